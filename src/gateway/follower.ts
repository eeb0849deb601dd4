import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import type { WatchGatewayResponse } from "../../gen/svc/v1/gateway_pb.js";
import { hashToken } from "../crypto/tokens.js";
import type { ConfigDocument } from "../domain/config/config-document.js";
import { readConfigDocument } from "../domain/config/read-config-document.js";
import { cacheFileIn, findCacheFile, readCacheFile, writeCacheFile, type GatewayCache } from "./cache-file.js";
import { createControlPlanes, isRefusal, type ControlPlaneEndpoint } from "./control-plane.js";
import type { Consumer, GatewayState, JsonWebKeyLike } from "./gateway-state.js";
import { createSecretResolver, type SecretResolver } from "./secret-resolver.js";

/** Where the follower writes its logs (a pino logger fits). Never given a secret value or a key. */
export interface FollowerLogger {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
  error(object: object, message: string): void;
}

export interface FollowerOptions {
  /** GATEHOUSE_URL: control-plane base addresses, in order of preference (a list or a comma-separated string). */
  urls: readonly string[] | string;
  /** GATEHOUSE_GATEWAY_KEY (gw_...). */
  gatewayKey: string;
  /** How this gateway is listed among the organisation's connected gateways (e.g. its host name). */
  gatewayId: string;
  /**
   * GATEWAY_CACHE: the last-known-good cache file, or a directory in which it
   * is gateway-<organization_id>.json (found again at a cold start by this
   * gateway key); undefined: no cache.
   */
  cacheFile?: string | { directory: string } | undefined;
  /** Called with every new state, in order; the data plane compiles it and swaps it in. */
  onState(state: GatewayState): void;
  logger?: FollowerLogger;
  /** Reconnection delays: exponential from initialMs to maxMs with jitter; refusedMs after the key was refused. */
  backoff?: { initialMs?: number; maxMs?: number; refusedMs?: number };
  /** How long a control plane may take to send the first message of its stream before the next one is tried. */
  answerTimeoutMs?: number;
  /** Randomness of the jitter (tests pin it). */
  random?: () => number;
  /** Current time in epoch ms, to forget revocations of expired sessions (tests move it). */
  now?: () => number;
  /** Size of the gateway's own RSA key for secrets (default 3072). */
  rsaModulusLength?: number;
}

export interface FollowerStatus {
  /** A state has been handed to onState (from the control plane or the cache file): the gateway can serve. */
  ready: boolean;
  /** Where the current state came from. */
  source: "control_plane" | "cache" | undefined;
  /** A stream to a control plane is open. */
  connected: boolean;
  /** The control plane followed (or last followed). */
  url: string | undefined;
  organizationId: string | undefined;
  revision: number | undefined;
  /** The control plane refused the gateway key (unknown, revoked, wrong kind). */
  refused: boolean;
  /** Referenced secrets (`<environment>/<name>`) without a value: their routes answer 503. */
  unresolvedSecrets: string[];
  /** When the last state was handed over. */
  lastStateAt: Date | undefined;
}

export interface Follower {
  /** Loads the cache file (a cold start serves from it at once) and starts following; resolves once following has begun. */
  start(): Promise<void>;
  /** Stops following and waits for the cache file to be written. */
  close(): Promise<void>;
  status(): FollowerStatus;
  /** The latest state handed to onState. */
  state(): GatewayState | undefined;
}

interface ReferencedVersion {
  environment: string;
  name: string;
  version: number;
}

/** What the follower knows, from the stream (or the cache file); secret values are kept apart. */
interface Knowledge {
  organizationId: string;
  issuer: string;
  audience: string;
  revision: number;
  yaml: string;
  document: ConfigDocument;
  jwks: JsonWebKeyLike[];
  /** Session id -> expiry (epoch ms). */
  revoked: Map<string, number>;
  /** Consumer id -> consumer with the hex SHA-256 of its key. */
  consumers: Map<string, { name: string; hash: string }>;
  /** `<environment>/<name>` -> the version the control plane announced (0: absent). */
  secrets: Map<string, ReferencedVersion>;
}

const defaultHeartbeatSeconds = 20;

/**
 * The gateway's follower: the control-plane side of the data plane. It
 * follows svc.v1.GatewayService/WatchGateway on the first control plane that
 * answers (failing over along GATEHOUSE_URL), turns every change into a new
 * immutable GatewayState, resolves the secrets the configuration references
 * with a key pair of its own, reconnects with exponential backoff and jitter,
 * resumes from its revision, and keeps a last-known-good cache file for a
 * cold start while no control plane answers.
 */
export function createFollower(options: FollowerOptions): Follower {
  const logger = options.logger ?? silentLogger;
  const endpoints = createControlPlanes({ urls: options.urls, gatewayKey: options.gatewayKey });
  const keyHash = hashToken(options.gatewayKey);
  const initialMs = options.backoff?.initialMs ?? 100;
  // A control plane that answers /readyz again is followed within this (plus jitter): well inside the 5 s of CONTRACT.md.
  const maxMs = options.backoff?.maxMs ?? 2_000;
  const refusedMs = options.backoff?.refusedMs ?? 30_000;
  const answerTimeoutMs = options.answerTimeoutMs ?? 10_000;
  const random = options.random ?? Math.random;
  const clock = options.now ?? Date.now;

  let resolver: SecretResolver | undefined;
  let knowledge: Knowledge | undefined;
  /** Values of referenced secrets by `<environment>/<name>`; null: that version cannot go into a header. */
  const values = new Map<string, { version: number; value: string | null }>();
  let current: GatewayState | undefined;
  const status: FollowerStatus = {
    ready: false,
    source: undefined,
    connected: false,
    url: undefined,
    organizationId: undefined,
    revision: undefined,
    refused: false,
    unresolvedSecrets: [],
    lastStateAt: undefined,
  };
  let closed = false;
  let stream: AbortController | undefined;
  let wakeSleep: (() => void) | undefined;
  let running: Promise<void> | undefined;
  let retryTimer: NodeJS.Timeout | undefined;
  /** Messages and secret retries are applied one at a time, in order. */
  let queue: Promise<void> = Promise.resolve();
  const serial = (fn: () => Promise<void>) => {
    const next = queue.then(fn, fn);
    queue = next.catch(() => {});
    return next;
  };

  // ------------------------------------------------------------------ state

  function validate(yaml: string, revision: number): ConfigDocument | undefined {
    try {
      return readConfigDocument(yaml).document;
    } catch (error) {
      logger.error(
        { revision, err: error instanceof Error ? error.message : String(error) },
        "configuration revision does not validate here; keeping the last good one",
      );
      return undefined;
    }
  }

  function emit(): void {
    const k = knowledge;
    if (!k) return;
    const now = clock();
    for (const [sid, expiresAt] of k.revoked) if (expiresAt <= now) k.revoked.delete(sid);
    const consumers = new Map<string, Consumer>();
    for (const [id, c] of k.consumers) consumers.set(c.hash, Object.freeze({ id, name: c.name }));
    const secrets = new Map<string, string>();
    const unresolved: string[] = [];
    for (const [key, ref] of k.secrets) {
      const held = values.get(key);
      if (ref.version > 0 && held && held.value !== null) secrets.set(key, held.value);
      else unresolved.push(key);
    }
    const state: GatewayState = Object.freeze({
      organizationId: k.organizationId,
      issuer: k.issuer,
      audience: k.audience,
      revision: k.revision,
      document: k.document,
      jwks: Object.freeze({ keys: Object.freeze(k.jwks.map((key) => Object.freeze({ ...key }))) }),
      revokedSessions: new Map(k.revoked),
      consumers,
      secrets,
    });
    current = state;
    status.ready = true;
    status.organizationId = k.organizationId;
    status.revision = k.revision;
    status.unresolvedSecrets = unresolved.sort();
    status.lastStateAt = new Date(now);
    try {
      options.onState(state);
    } catch (error) {
      logger.error({ err: error instanceof Error ? error.message : String(error) }, "the data plane failed to take a new state");
    }
  }

  // ------------------------------------------------------------------ cache file

  let writing: Promise<void> | undefined;
  let writeAgain = false;

  function cachePath(organizationId: string): string | undefined {
    const target = options.cacheFile;
    if (target === undefined) return undefined;
    return typeof target === "string" ? target : cacheFileIn(target.directory, organizationId);
  }

  function toCache(k: Knowledge): GatewayCache {
    return {
      format: 1,
      gateway_key_sha256: keyHash,
      organization_id: k.organizationId,
      issuer: k.issuer,
      audience: k.audience,
      revision: k.revision,
      yaml: k.yaml,
      signing_keys: k.jwks.map((key) => ({ ...key })),
      revoked_sessions: [...k.revoked].map(([sessionId, expiresAt]) => ({
        session_id: sessionId,
        expires_at: new Date(expiresAt).toISOString(),
      })),
      consumers: [...k.consumers].map(([id, c]) => ({ consumer_id: id, name: c.name, key_sha256: c.hash })),
      // Names and versions only: values live in memory and nowhere else.
      secrets: [...k.secrets.values()].map((s) => ({ environment: s.environment, name: s.name, version: s.version })),
      saved_at: new Date(clock()).toISOString(),
    };
  }

  /** Writes the cache file soon; writes that pile up while one is under way become one more. */
  function persist(): void {
    const k = knowledge;
    const path = k && cachePath(k.organizationId);
    if (!k || !path) return;
    if (writing) {
      writeAgain = true;
      return;
    }
    writing = (async () => {
      do {
        writeAgain = false;
        const latest = knowledge as Knowledge;
        try {
          await writeCacheFile(cachePath(latest.organizationId) as string, toCache(latest));
        } catch (error) {
          logger.warn({ err: error instanceof Error ? error.message : String(error) }, "could not write the gateway cache file");
        }
      } while (writeAgain && !closed);
    })().finally(() => {
      writing = undefined;
    });
  }

  async function loadCache(): Promise<void> {
    const target = options.cacheFile;
    if (target === undefined) return;
    let cache: GatewayCache | undefined;
    try {
      if (typeof target === "string") cache = await readCacheFile(target);
      else cache = (await findCacheFile(target.directory, keyHash))?.cache;
    } catch (error) {
      logger.warn({ err: error instanceof Error ? error.message : String(error) }, "ignoring an unreadable gateway cache file");
      return;
    }
    if (!cache) return;
    const document = validate(cache.yaml, cache.revision);
    if (!document) return;
    knowledge = {
      organizationId: cache.organization_id,
      issuer: cache.issuer,
      audience: cache.audience,
      revision: cache.revision,
      yaml: cache.yaml,
      document,
      jwks: cache.signing_keys,
      revoked: new Map(cache.revoked_sessions.map((s) => [s.session_id, Date.parse(s.expires_at)])),
      consumers: new Map(cache.consumers.map((c) => [c.consumer_id, { name: c.name, hash: c.key_sha256 }])),
      secrets: new Map(cache.secrets.map((s) => [`${s.environment}/${s.name}`, s])),
    };
    status.source = "cache";
    logger.info(
      { organizationId: cache.organization_id, revision: cache.revision },
      "serving the cached configuration until a control plane answers",
    );
    emit();
  }

  // ------------------------------------------------------------------ secrets

  /** Retrieves referenced secrets whose announced version is newer than the value held; forgets unreferenced ones. */
  async function resolveSecrets(endpoint: ControlPlaneEndpoint): Promise<void> {
    const k = knowledge;
    if (!k || !resolver) return;
    for (const key of values.keys()) {
      const ref = k.secrets.get(key);
      if (!ref || ref.version === 0) values.delete(key);
    }
    const wanted = new Map<string, string[]>();
    for (const [key, ref] of k.secrets) {
      if (ref.version === 0) continue;
      const held = values.get(key);
      if (held && held.version >= ref.version) continue;
      wanted.set(ref.environment, [...(wanted.get(ref.environment) ?? []), ref.name]);
    }
    let failed = false;
    for (const [environment, names] of wanted) {
      const retrieve = (request: { environment: string; names: readonly string[]; publicKeyPem: string }) =>
        endpoint.retrieve(request, stream?.signal);
      try {
        const resolved = await resolveOrOneByOne(resolver, retrieve, environment, names);
        for (const secret of resolved) values.set(`${secret.environment}/${secret.name}`, { version: secret.version, value: secret.value });
        if (resolved.length < names.length) failed = true;
      } catch (error) {
        failed = true;
        logger.warn(
          { environment, names, err: ConnectError.from(error).message },
          "could not retrieve referenced secrets; routes that need them answer 503 until they resolve",
        );
      }
    }
    if (failed) scheduleSecretRetry(endpoint);
  }

  function scheduleSecretRetry(endpoint: ControlPlaneEndpoint): void {
    if (retryTimer || closed) return;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      if (closed || !status.connected || status.url !== endpoint.url) return;
      serial(async () => {
        await resolveSecrets(endpoint);
        emit();
      }).catch(() => {});
    }, 1_000);
    retryTimer.unref();
  }

  // ------------------------------------------------------------------ the stream

  async function apply(message: WatchGatewayResponse, endpoint: ControlPlaneEndpoint): Promise<void> {
    const event = message.event;
    switch (event.case) {
      case "snapshot": {
        const s = event.value;
        let yaml: string;
        let document: ConfigDocument | undefined;
        if (s.yaml !== undefined) {
          yaml = s.yaml;
          document = validate(s.yaml, s.revision);
        } else if (knowledge && knowledge.revision === s.revision && knowledge.organizationId === s.organizationId) {
          yaml = knowledge.yaml;
          document = knowledge.document;
        } else {
          // Not the document held (another organisation's cache, say): ask for the whole document next time.
          resync = true;
          throw new Error("the control plane sent no document for a revision this gateway does not hold");
        }
        const secrets = referencedVersions(s.secrets);
        if (!document) {
          if (!knowledge) throw new Error("the control plane's configuration does not validate here and no earlier one is held");
          // Keep the last good document; everything else follows the control plane.
          knowledge = {
            ...knowledge,
            jwks: s.signingKeys.map(toJwk),
            revoked: revocations(s.revokedSessions),
            consumers: consumersOf(s.consumers),
          };
        } else {
          knowledge = {
            organizationId: s.organizationId,
            issuer: s.issuer,
            audience: s.audience,
            revision: s.revision,
            yaml,
            document,
            jwks: s.signingKeys.map(toJwk),
            revoked: revocations(s.revokedSessions),
            consumers: consumersOf(s.consumers),
            secrets,
          };
        }
        heartbeatSeconds = s.heartbeatSeconds > 0 ? s.heartbeatSeconds : defaultHeartbeatSeconds;
        status.source = "control_plane";
        await resolveSecrets(endpoint);
        emit();
        persist();
        return;
      }
      case "config": {
        const k = knowledge;
        if (!k) return;
        const document = validate(event.value.yaml, event.value.revision);
        if (!document) return;
        knowledge = {
          ...k,
          revision: event.value.revision,
          yaml: event.value.yaml,
          document,
          secrets: referencedVersions(event.value.secrets),
        };
        // Secrets first, so the new revision is served with its secrets rather than with 503s.
        await resolveSecrets(endpoint);
        break;
      }
      case "signingKeys":
        if (!knowledge) return;
        knowledge = { ...knowledge, jwks: event.value.keys.map(toJwk) };
        break;
      case "sessionsRevoked":
        if (!knowledge) return;
        for (const session of event.value.sessions) {
          knowledge.revoked.set(
            session.sessionId,
            session.expiresAt ? timestampDate(session.expiresAt).getTime() : Number.MAX_SAFE_INTEGER,
          );
        }
        break;
      case "consumerCreated":
        if (!knowledge) return;
        knowledge.consumers.set(event.value.consumerId, { name: event.value.name, hash: event.value.keySha256 });
        break;
      case "consumerRevoked":
        if (!knowledge) return;
        knowledge.consumers.delete(event.value.consumerId);
        break;
      case "secretChanged": {
        const k = knowledge;
        const key = `${event.value.environment}/${event.value.name}`;
        if (!k?.secrets.has(key)) return;
        k.secrets.set(key, { environment: event.value.environment, name: event.value.name, version: event.value.version });
        await resolveSecrets(endpoint);
        break;
      }
      default:
        // Heartbeats (and events of a newer control plane) change nothing.
        return;
    }
    emit();
    persist();
  }

  let heartbeatSeconds = defaultHeartbeatSeconds;
  /** Set when the revision held cannot be resumed from. */
  let resync = false;

  /** Follows one control plane until its stream ends. */
  async function follow(endpoint: ControlPlaneEndpoint): Promise<"unreachable" | "ended" | "refused"> {
    const controller = new AbortController();
    stream = controller;
    const sinceRevision = resync ? undefined : knowledge?.revision;
    resync = false;
    const iterator = endpoint.watch({ gatewayId: options.gatewayId, sinceRevision }, controller.signal);
    let watchdog: NodeJS.Timeout | undefined;
    // A stream silent for three heartbeats (a half-open connection) is given up.
    const arm = (ms: number) => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => controller.abort(), ms);
      watchdog.unref();
    };
    let answered = false;
    try {
      arm(answerTimeoutMs);
      const first = await iterator.next();
      if (first.done) return "unreachable";
      answered = true;
      status.connected = true;
      status.refused = false;
      status.url = endpoint.url;
      logger.info({ url: endpoint.url }, "following the control plane");
      await serial(() => apply(first.value, endpoint));
      for (;;) {
        arm(heartbeatSeconds * 3_000 + 5_000);
        const next = await iterator.next();
        if (next.done) return "ended";
        await serial(() => apply(next.value, endpoint));
      }
    } catch (error) {
      if (closed) return "ended";
      if (isRefusal(error)) {
        status.refused = true;
        logger.error(
          { url: endpoint.url, code: Code[ConnectError.from(error).code], err: ConnectError.from(error).rawMessage },
          "the control plane refused this gateway's key; keeping the current state",
        );
        return "refused";
      }
      logger.warn(
        { url: endpoint.url, err: controller.signal.aborted ? "no message in time" : ConnectError.from(error).rawMessage },
        answered ? "lost the control plane; reconnecting" : "control plane unreachable",
      );
      return answered ? "ended" : "unreachable";
    } finally {
      clearTimeout(watchdog);
      status.connected = false;
      controller.abort();
      iterator.return?.().catch(() => {});
    }
  }

  function sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wakeSleep = undefined;
        resolve();
      }
      wakeSleep = done;
    });
  }

  /** Exponential backoff with "equal jitter": half the delay fixed, half random, so gateways do not reconnect in lockstep. */
  function delayAfter(failures: number): number {
    const base = Math.min(maxMs, initialMs * 2 ** Math.min(failures, 20));
    return base / 2 + random() * (base / 2);
  }

  async function run(): Promise<void> {
    let failures = 0;
    while (!closed) {
      let outcome: "unreachable" | "ended" | "refused" = "unreachable";
      // Always from the first: the preferred control plane is followed again as soon as it answers.
      for (const endpoint of endpoints) {
        if (closed) return;
        outcome = await follow(endpoint);
        if (outcome !== "unreachable") break;
      }
      if (closed) return;
      if (outcome === "ended") failures = 0;
      await sleep(outcome === "refused" ? refusedMs : delayAfter(failures++));
    }
  }

  return {
    async start() {
      if (running) return;
      resolver = await createSecretResolver({
        ...(options.rsaModulusLength ? { modulusLength: options.rsaModulusLength } : {}),
        onUnusable: (secret) =>
          logger.error(secret, "a referenced secret cannot go into a header (line breaks or non-ASCII characters); its routes answer 503"),
      });
      await loadCache();
      running = run().catch((error: unknown) => {
        logger.error({ err: error instanceof Error ? error.message : String(error) }, "the follower stopped");
      });
    },
    async close() {
      closed = true;
      clearTimeout(retryTimer);
      stream?.abort();
      wakeSleep?.();
      await running;
      await queue;
      await writing;
    },
    status: () => ({ ...status, unresolvedSecrets: [...status.unresolvedSecrets] }),
    state: () => current,
  };
}

async function resolveOrOneByOne(
  resolver: SecretResolver,
  retrieve: Parameters<SecretResolver["resolve"]>[0],
  environment: string,
  names: string[],
) {
  try {
    return await resolver.resolve(retrieve, environment, names);
  } catch (error) {
    // One name deleted meanwhile fails the whole retrieve (not_found): fetch the others one by one.
    if (ConnectError.from(error).code !== Code.NotFound || names.length === 1) throw error;
    const resolved = [];
    for (const name of names) {
      try {
        resolved.push(...(await resolver.resolve(retrieve, environment, [name])));
      } catch (inner) {
        if (ConnectError.from(inner).code !== Code.NotFound) throw inner;
      }
    }
    return resolved;
  }
}

function referencedVersions(secrets: readonly { environment: string; name: string; version: number }[]): Map<string, ReferencedVersion> {
  return new Map(secrets.map((s) => [`${s.environment}/${s.name}`, { environment: s.environment, name: s.name, version: s.version }]));
}

function revocations(sessions: readonly { sessionId: string; expiresAt?: Parameters<typeof timestampDate>[0] | undefined }[]) {
  return new Map(sessions.map((s) => [s.sessionId, s.expiresAt ? timestampDate(s.expiresAt).getTime() : Number.MAX_SAFE_INTEGER] as const));
}

function consumersOf(consumers: readonly { consumerId: string; name: string; keySha256: string }[]) {
  return new Map(consumers.map((c) => [c.consumerId, { name: c.name, hash: c.keySha256 }] as const));
}

function toJwk(key: { kty: string; kid: string; alg: string; crv: string; x: string; y: string; use: string }): JsonWebKeyLike {
  return { kty: key.kty, kid: key.kid, alg: key.alg, crv: key.crv, x: key.x, y: key.y, use: key.use };
}

const silentLogger: FollowerLogger = { info() {}, warn() {}, error() {} };
