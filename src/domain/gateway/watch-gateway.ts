import type { ConfigStore } from "../config/config-store.js";
import type { GatewayStore, LiveConsumerRecord } from "./gateway-store.js";
import type { ChangeSubscriptions } from "../changes/topic.js";
import { configRevisions, gatewayChanges, secretChanges } from "../changes/topics.js";
import type { Clock } from "../clock.js";
import { referencedSecrets, secretKey, type SecretReference } from "../config/secret-references.js";
import { renderConfigDocument } from "../config/render-config-document.js";
import { DomainError, invalidArgument, type Violation } from "../errors.js";
import type { PublicJwk } from "../identity/session-token.js";
import { everyOrganization, type GatewayChangeKind } from "./gateway-changes.js";

/** A secret the configuration references, and its current version (0: it does not exist). */
export interface SecretVersion extends SecretReference {
  version: number;
}

export interface RevokedSessionView {
  id: string;
  expiresAt: Date;
}

/** What a gateway's stream carries, in order: the snapshot, then changes and heartbeats. */
export type GatewayEvent =
  | {
      kind: "snapshot";
      organizationId: string;
      issuer: string;
      audience: string;
      revision: number;
      /** Absent when the gateway holds this revision already. */
      yaml: string | undefined;
      signingKeys: PublicJwk[];
      revokedSessions: RevokedSessionView[];
      consumers: LiveConsumerRecord[];
      secrets: SecretVersion[];
      heartbeatSeconds: number;
    }
  | { kind: "config"; revision: number; yaml: string; secrets: SecretVersion[] }
  | { kind: "signing_keys"; keys: PublicJwk[] }
  | { kind: "sessions_revoked"; sessions: RevokedSessionView[] }
  | { kind: "consumer_created"; consumer: LiveConsumerRecord }
  | { kind: "consumer_revoked"; consumerId: string }
  | { kind: "secret_changed"; secret: SecretVersion }
  | { kind: "heartbeat"; at: Date };

/** A change the feed announced (undefined: some may have been missed, re-read everything). */
export type WatchedChange =
  | { topic: "config"; organizationId: string }
  | { topic: "secrets"; organizationId: string }
  | { topic: "gateway"; organizationId: string; kind: GatewayChangeKind };

export interface GatewayWatchDeps {
  /** Reads outside transactions. */
  gatewayStore: GatewayStore;
  configStore: Pick<ConfigStore, "latestRevision">;
  /** The change feed: revisions, secrets and gateway changes announced to this process, from any instance. */
  changes: ChangeSubscriptions;
  /** The JWKS: every key whose tokens may still be live. */
  /** The organisation's published session keys (its own and the legacy shared ones). */
  signingKeys(organizationId: string): Promise<PublicJwk[]>;
  /** The `iss` of session tokens (PUBLIC_URL). */
  issuer: string;
  clock: Clock;
  /** Between heartbeats (and last-seen refreshes); default 20 s. */
  heartbeatMs?: number;
  /** Every this many heartbeats, the stream re-reads everything, in case a change went unannounced; default 3. */
  reconcileEvery?: number;
  onError?: (error: unknown) => void;
}

export interface WatchInput {
  /** The organisation of the gateway key. */
  organizationId: string;
  gatewayKeyId: string;
  gatewayId: string;
  sinceRevision: number | undefined;
  signal: AbortSignal;
}

const gatewayIdPattern = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** Whether a gateway id is one the control plane lists a gateway under (1 to 128 of A-Z a-z 0-9 . _ : -). */
export function isGatewayId(id: string): boolean {
  return gatewayIdPattern.test(id);
}
const pruneConnectionsEveryMs = 10 * 60 * 1000;
const keepConnectionsMs = 7 * 24 * 3600 * 1000;

type Dirty = { key: boolean; signingKeys: boolean; config: boolean; secrets: boolean; consumers: boolean; sessions: boolean };
const clean = (): Dirty => ({ key: false, signingKeys: false, config: false, secrets: false, consumers: false, sessions: false });
const everything = (): Dirty => ({ key: true, signingKeys: true, config: true, secrets: true, consumers: true, sessions: true });

/**
 * The gateway's stream (svc.v1.GatewayService/WatchGateway): a snapshot of
 * everything a gateway enforces, then each change as the change feed
 * announces it. The stream keeps what it last sent and sends differences, so
 * a notification that changed nothing for this gateway sends nothing; every
 * few heartbeats it re-reads everything, which repairs a missed notification.
 */
export function createGatewayWatch(deps: GatewayWatchDeps) {
  /** Every change of the topics a stream follows (undefined: some may have been missed, re-read everything). */
  function subscribe(listener: (change: WatchedChange | undefined) => void): { ready: Promise<void>; close(): void } {
    const subscriptions = [
      deps.changes.subscribe(configRevisions, (event) =>
        listener(event.kind === "gap" ? undefined : { topic: "config", organizationId: event.value.organizationId }),
      ),
      deps.changes.subscribe(secretChanges, (event) =>
        listener(event.kind === "gap" ? undefined : { topic: "secrets", organizationId: event.value.organizationId }),
      ),
      deps.changes.subscribe(gatewayChanges, (event) => listener(event.kind === "gap" ? undefined : { topic: "gateway", ...event.value })),
    ];
    return {
      ready: Promise.all(subscriptions.map((s) => s.ready)).then(() => undefined),
      close: () => {
        for (const s of subscriptions) s.close();
      },
    };
  }

  const heartbeatMs = deps.heartbeatMs ?? 20_000;
  const reconcileEvery = Math.max(1, deps.reconcileEvery ?? 3);
  let lastPrune = 0;

  async function secretVersions(organizationId: string, references: readonly SecretReference[]): Promise<SecretVersion[]> {
    if (references.length === 0) return [];
    const versions = await deps.gatewayStore.secretVersions(organizationId, references);
    return references.map((r) => ({ ...r, version: versions.get(secretKey(r)) ?? 0 }));
  }

  async function currentReferences(organizationId: string): Promise<SecretReference[]> {
    return referencedSecrets(await deps.gatewayStore.listSecretHolders(organizationId));
  }

  async function requireLiveKey(organizationId: string, gatewayKeyId: string): Promise<void> {
    const key = await deps.gatewayStore.findGatewayKey(organizationId, gatewayKeyId);
    if (!key || key.revokedAt) throw new DomainError("unauthenticated", "credential_revoked", "this gateway key has been revoked");
  }

  async function* watch(input: WatchInput): AsyncGenerator<GatewayEvent> {
    const violations: Violation[] = [];
    if (!gatewayIdPattern.test(input.gatewayId)) {
      violations.push({
        field: "gateway_id",
        description:
          'must be 1 to 128 letters, digits, ".", "_", ":" or "-", starting with a letter or digit: the name this gateway is listed under (e.g. its host name)',
      });
    }
    if (input.sinceRevision !== undefined && input.sinceRevision < 0) {
      violations.push({ field: "since_revision", description: `must be 0 or more, got ${input.sinceRevision}` });
    }
    if (violations.length > 0) throw invalidArgument(violations);
    const { organizationId, signal } = input;

    let dirty = clean();
    const wake = createWakeup();
    // Subscribe before reading, so that no change slips between the read and the subscription.
    const subscription = subscribe((change) => {
      if (!change) dirty = everything();
      else if (change.organizationId !== organizationId && change.organizationId !== everyOrganization) return;
      else if (change.topic === "config") dirty.config = true;
      else if (change.topic === "secrets") dirty.secrets = true;
      else if (change.kind === "sessions") dirty.sessions = true;
      else if (change.kind === "consumers") dirty.consumers = true;
      else if (change.kind === "gateway_keys") dirty.key = true;
      else dirty.signingKeys = true;
      wake.notify();
    });
    const connectedAt = deps.clock();
    let recorded = false;
    try {
      await subscription.ready;
      await requireLiveKey(organizationId, input.gatewayKeyId);
      const latest = await deps.configStore.latestRevision(organizationId);
      let revision = latest?.revision ?? 0;
      const yaml = latest?.document ?? renderConfigDocument([]);
      let references = await currentReferences(organizationId);
      let secrets = await secretVersions(organizationId, references);
      let keys = await deps.signingKeys(organizationId);
      let keysSeen = JSON.stringify(keys);
      const consumers = new Map((await deps.gatewayStore.liveConsumers(organizationId)).map((c) => [c.id, c]));
      const revoked = new Map((await deps.gatewayStore.liveRevocations(organizationId, deps.clock())).map((s) => [s.id, s.expiresAt]));

      await deps.gatewayStore.saveConnection({
        organizationId,
        gatewayId: input.gatewayId,
        gatewayKeyId: input.gatewayKeyId,
        revision,
        connectedAt,
        lastSeenAt: connectedAt,
      });
      recorded = true;
      pruneConnections();

      yield {
        kind: "snapshot",
        organizationId,
        issuer: deps.issuer,
        audience: organizationId,
        revision,
        yaml: input.sinceRevision === revision ? undefined : yaml,
        signingKeys: keys,
        revokedSessions: [...revoked].map(([id, expiresAt]) => ({ id, expiresAt })),
        consumers: [...consumers.values()],
        secrets,
        heartbeatSeconds: Math.round(heartbeatMs / 1000),
      };

      let beats = 0;
      for (;;) {
        const woke = await wake.wait(signal, heartbeatMs);
        if (woke === "aborted") return;
        if (woke === "timeout") {
          beats++;
          if (beats % reconcileEvery === 0) dirty = everything();
          await deps.gatewayStore.touchConnection(organizationId, input.gatewayId, { revision, lastSeenAt: deps.clock() });
          yield { kind: "heartbeat", at: deps.clock() };
        }
        const work = dirty;
        dirty = clean();

        if (work.key) await requireLiveKey(organizationId, input.gatewayKeyId);

        if (work.signingKeys) {
          const fresh = await deps.signingKeys(organizationId);
          const seen = JSON.stringify(fresh);
          if (seen !== keysSeen) {
            keys = fresh;
            keysSeen = seen;
            yield { kind: "signing_keys", keys };
          }
        }

        if (work.config) {
          // The document and the plugins it references are read at once (one round trip, not four
          // in a row): this is the control plane's share of every change's propagation.
          const [record, fresh] = await Promise.all([deps.configStore.latestRevision(organizationId), currentReferences(organizationId)]);
          if ((record?.revision ?? 0) !== revision) {
            references = fresh;
            secrets = await secretVersions(organizationId, references);
            revision = record?.revision ?? 0;
            yield { kind: "config", revision, yaml: record?.document ?? renderConfigDocument([]), secrets };
            await deps.gatewayStore.touchConnection(organizationId, input.gatewayId, { revision, lastSeenAt: deps.clock() });
            // The versions just sent are current: no separate secret events for them.
            work.secrets = false;
          }
        }

        if (work.secrets) {
          const fresh = await secretVersions(organizationId, references);
          for (let i = 0; i < fresh.length; i++) {
            const now = fresh[i] as SecretVersion;
            if (now.version !== secrets[i]?.version) yield { kind: "secret_changed", secret: now };
          }
          secrets = fresh;
        }

        if (work.consumers) {
          const live = new Map((await deps.gatewayStore.liveConsumers(organizationId)).map((c) => [c.id, c]));
          for (const id of consumers.keys()) if (!live.has(id)) yield { kind: "consumer_revoked", consumerId: id };
          for (const [id, consumer] of live) if (!consumers.has(id)) yield { kind: "consumer_created", consumer };
          consumers.clear();
          for (const [id, consumer] of live) consumers.set(id, consumer);
        }

        if (work.sessions) {
          const now = deps.clock();
          const live = await deps.gatewayStore.liveRevocations(organizationId, now);
          const added = live.filter((s) => !revoked.has(s.id));
          // Expired revocations are forgotten here as the gateway forgets them (the token fails on exp).
          revoked.clear();
          for (const s of live) revoked.set(s.id, s.expiresAt);
          if (added.length > 0) yield { kind: "sessions_revoked", sessions: added };
        }
      }
    } finally {
      subscription.close();
      if (recorded) {
        deps.gatewayStore
          .endConnection(organizationId, input.gatewayId, connectedAt, deps.clock())
          .catch((error: unknown) => deps.onError?.(error));
      }
    }
  }

  /** Forgets gateways not seen for a week, at most every ten minutes per instance, in the background. */
  function pruneConnections(): void {
    const now = deps.clock().getTime();
    if (now - lastPrune < pruneConnectionsEveryMs) return;
    lastPrune = now;
    deps.gatewayStore.pruneConnections(new Date(now - keepConnectionsMs)).catch((error: unknown) => deps.onError?.(error));
  }

  return { watch };
}

export type GatewayWatch = ReturnType<typeof createGatewayWatch>;

/** A level-triggered wake-up with a timeout: a notification before wait() is not lost. */
function createWakeup() {
  let pending = false;
  let resume: (() => void) | undefined;
  return {
    notify() {
      pending = true;
      resume?.();
    },
    async wait(signal: AbortSignal, timeoutMs: number): Promise<"notified" | "timeout" | "aborted"> {
      if (!pending && !signal.aborted) {
        let timedOut = false;
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(timer);
            signal.removeEventListener("abort", done);
            resume = undefined;
            resolve();
          };
          const timer = setTimeout(() => {
            timedOut = true;
            done();
          }, timeoutMs);
          resume = done;
          signal.addEventListener("abort", done, { once: true });
        });
        if (signal.aborted) return "aborted";
        if (timedOut && !pending) return "timeout";
      }
      if (signal.aborted) return "aborted";
      pending = false;
      return "notified";
    },
  };
}
