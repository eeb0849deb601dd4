import { randomUUID } from "node:crypto";
import type { RandomSource } from "../../crypto/tokens.js";
import type { AuditCursor, SecretAuditRecord, SecretRecord, SecretsStore, SecretVersionRecord } from "./secrets-store.js";
import type { ChangeSubscriptions } from "../changes/topic.js";
import { secretChanges } from "../changes/topics.js";
import type { Clock } from "../clock.js";
import type { CanonicalResource } from "../config/config-document.js";
import { pluginsReferencing, secretInUse } from "../config/secret-references.js";
import type { EventLog } from "../events/event-log.js";
import { DomainError, invalidArgument, type Violation } from "../errors.js";
import { createAuditWriter } from "./audit-writer.js";
import { createCurrentValuesCache, retrievableSorted, type RetrievableValue } from "./current-values-cache.js";
import type { createClientKeyParser } from "./client-key.js";
import { sealForClient, type RetrievalEnvelope, type RetrievedSecret } from "./retrieval-envelope.js";
import type { RsaDecryptor } from "./rsa-decryption-pool.js";
import { decodeSealedValue, notSealedToKey, openRsaBlock, openSealedPayload, valueText } from "./sealed-value.js";
import type { OrganizationKeys, PreviousSealingKey, SecretKeyrings, SealingKeyRotated } from "./secret-keyrings.js";
import { byteOrder, carriesEvery, checkEnvironment, checkName, checkTags, maxRetrieveNames } from "./secret-rules.js";
import { openAtRest, sealAtRest } from "./value-at-rest.js";

/** The caller of a secrets operation (the auth interceptor established it). */
export interface SecretsCaller {
  organizationId: string;
  /** Audit name of the account and key. */
  actor: string;
}

/** One of the organisation's sealing keys, as the API describes it (never the private key). */
export interface SealingKeyView {
  keyId: string;
  publicKeyPem: string;
  createdAt: Date;
  /** When a rotation replaced it; absent for the current key. */
  retiredAt?: Date;
  /** Until when a value sealed to it is accepted; absent for the current key. */
  acceptedUntil?: Date;
}

/** The organisation's sealing keys: the current one (null before first use) and those rotations replaced that are kept. */
export interface SealingKeysView {
  current: SealingKeyView | null;
  previous: SealingKeyView[];
  rotationDays: number;
}

/** A secret's metadata: what listings and writes return. */
export interface SecretView {
  name: string;
  environment: string;
  version: number;
  tags: string[];
  updatedAt: Date;
}

export interface PutSecretInput {
  name: string;
  environment: string;
  encryptedValue: string;
  /** The key_id the value is sealed to, when the request names it (empty: not named). */
  keyId?: string | undefined;
  /** undefined when the request did not carry it. */
  sealed: boolean | undefined;
  tags: readonly string[];
  /** A plaintext value; its mere presence is refused. */
  value: string | undefined;
}

/** What one transaction of the secrets area hands its function. */
export interface SecretsScope {
  store: SecretsStore;
  /** Tells every instance, once the transaction commits, that an environment's secrets changed. */
  announce(organizationId: string, environment: string): void;
  /** Records the change's events in the transaction (docs/events.md). */
  events: EventLog;
  /**
   * The plugins of the organisation's current configuration, read after taking
   * its configuration lock, which an import holds while it checks that the
   * secrets it references exist: a delete and an import cannot interleave.
   */
  lockedPlugins(organizationId: string): Promise<CanonicalResource[]>;
}

export interface SecretsDeps {
  /** Reads outside a transaction. */
  store: SecretsStore;
  /** Runs fn in one transaction (retried as a whole when it lost a race). */
  transaction<T>(fn: (scope: SecretsScope) => Promise<T>): Promise<T>;
  /**
   * The change feed: every committed change of any organisation's secrets
   * reaches this process on it (secretChanges). Stored values are cached only
   * while it is live.
   */
  changes: ChangeSubscriptions;
  keyrings: SecretKeyrings;
  decryptor: RsaDecryptor;
  parseClientKey: ReturnType<typeof createClientKeyParser>;
  clock: Clock;
  random: RandomSource;
  /** Versions always kept per secret (at least 10); up to 4 more may remain between prunes. */
  keepVersions?: number;
}

const maxAuditPage = 100;
/** Stored values kept for retrieves, in bytes of ciphertext (see createCurrentValuesCache). */
const valuesCacheBytes = 16 * 1024 * 1024;
/** Secrets an environment may have to be kept (larger ones are read by name, as asked). */
const valuesCachePerEnvironment = 256;
/** How long an environment's stored values serve retrieves before they are read again. */
const valuesCacheTtlMs = 2_000;
const pruneEvery = 5;
const defaultAuditPage = 50;

/**
 * The secrets store: values arrive sealed to the organisation's RSA key, are
 * kept AES-256-GCM encrypted under its data key, and leave encrypted to the
 * caller's key. Every write, delete and retrieve is audited (never values).
 */
export function createSecrets(deps: SecretsDeps) {
  const keepVersions = Math.max(10, deps.keepVersions ?? 10);
  const recordRetrieve = createAuditWriter((events) => deps.store.insertAuditEvents(events));
  const values = createCurrentValuesCache({
    load: (organizationId, environment, limit) => deps.store.listCurrentValues(organizationId, environment, [], { limit }),
    maxValues: valuesCachePerEnvironment,
    announced: () => announcements.live(),
    now: () => deps.clock().getTime(),
    ttlMs: valuesCacheTtlMs,
    maxBytes: valuesCacheBytes,
  });
  // PostgreSQL: NOTIFY from every instance; SQLite: in-process, before the write answers.
  const announcements = deps.changes.subscribe(secretChanges, (event) => {
    if (event.kind === "message") values.forget(event.value.organizationId, event.value.environment);
    else values.forget();
  });

  const view = (secret: SecretRecord): SecretView => ({
    name: secret.name,
    environment: secret.environment,
    version: secret.version,
    tags: secret.tags,
    updatedAt: secret.updatedAt,
  });

  const audit = (
    caller: SecretsCaller,
    action: SecretAuditRecord["action"],
    environment: string,
    names: string[],
    at: Date,
  ): SecretAuditRecord => ({
    id: randomUUID(),
    organizationId: caller.organizationId,
    action,
    actor: caller.actor,
    environment,
    names,
    createdAt: at,
  });

  async function getPublicKey(caller: SecretsCaller): Promise<{ publicKeyPem: string; keyId: string }> {
    // A key due for its scheduled rotation is replaced first: clients learn of a new key by reading it.
    const keys = await deps.keyrings.obtainForSealing(caller.organizationId);
    return { publicKeyPem: keys.publicKeyPem, keyId: keys.keyId };
  }

  const previousView = (key: PreviousSealingKey): SealingKeyView => ({
    keyId: key.keyId,
    publicKeyPem: key.publicKeyPem,
    createdAt: key.createdAt,
    retiredAt: key.retiredAt,
    acceptedUntil: key.acceptedUntil,
  });

  /** Replaces the organisation's sealing key; the replaced one is accepted for 24 hours. */
  async function rotatePublicKey(caller: SecretsCaller): Promise<{ current: SealingKeyView; previous: SealingKeyView[] }> {
    const rotated: SealingKeyRotated = await deps.keyrings.rotate(caller.organizationId);
    return {
      current: { keyId: rotated.current.keyId, publicKeyPem: rotated.current.publicKeyPem, createdAt: rotated.current.createdAt },
      previous: rotated.previous.map(previousView),
    };
  }

  /** The organisation's sealing keys, without creating one. */
  async function listPublicKeys(caller: SecretsCaller): Promise<SealingKeysView> {
    const keys = await deps.keyrings.find(caller.organizationId);
    if (!keys) return { current: null, previous: [], rotationDays: 0 };
    return {
      current: { keyId: keys.keyId, publicKeyPem: keys.publicKeyPem, createdAt: keys.keyCreatedAt },
      previous: keys.previous.map(previousView),
      rotationDays: keys.rotationDays,
    };
  }

  type Opening = { kind: "opened"; value: Buffer | null } | { kind: "outdated"; description: string } | { kind: "not_opened" };

  /**
   * Opens a sealed value with the organisation's keys. With a key_id, only
   * that key, if it is current or within its grace period. Without one: the
   * current key, then the keys within their grace period, newest first; a
   * value that only a key past its grace period opens is outdated.
   */
  async function openWithKeys(
    sealed: Buffer,
    keys: OrganizationKeys,
    keyId: string | undefined,
    violations: Violation[],
  ): Promise<Opening> {
    const now = deps.clock().getTime();
    const current = { keyId: keys.keyId, privateKey: keys.privateKey };
    const accepted = keys.previous.filter((key) => key.acceptedUntil.getTime() > now);
    if (keyId !== undefined) {
      const named = keyId === keys.keyId ? current : keys.previous.find((key) => key.keyId === keyId);
      if (!named) return { kind: "outdated", description: `key_id ${keyId} names no sealing key of the organisation` };
      if (!accepted.includes(named as PreviousSealingKey) && named !== current) {
        const retired = named as PreviousSealingKey;
        return {
          kind: "outdated",
          description: `key_id ${keyId} was replaced at ${retired.retiredAt.toISOString()} and accepted until ${retired.acceptedUntil.toISOString()}`,
        };
      }
      const opened = await openRsaBlock(sealed, [named], deps.decryptor);
      if (!opened) {
        violations.push(notSealedToKey(keyId));
        return { kind: "opened", value: null };
      }
      return { kind: "opened", value: openSealedPayload(sealed, opened.block, violations) };
    }
    const opened = await openRsaBlock(sealed, [current, ...accepted], deps.decryptor);
    if (opened) return { kind: "opened", value: openSealedPayload(sealed, opened.block, violations) };
    // Only to say "outdated" rather than "not sealed": at most the four most recently replaced keys past their grace.
    const retired = keys.previous.filter((key) => !accepted.includes(key)).slice(0, 4);
    const recognised = await openRsaBlock(sealed, retired, deps.decryptor);
    if (recognised) {
      recognised.block.fill(0);
      const key = retired.find((k) => k.keyId === recognised.keyId) as PreviousSealingKey;
      return {
        kind: "outdated",
        description: `encrypted_value is sealed to key_id ${key.keyId}, replaced at ${key.retiredAt.toISOString()} and accepted until ${key.acceptedUntil.toISOString()}`,
      };
    }
    return { kind: "not_opened" };
  }

  /** Whether two readings of an organisation's keys hold the same keys (a fresh read changed nothing). */
  const sameKeys = (a: OrganizationKeys, b: OrganizationKeys) =>
    a.keyId === b.keyId && a.previous.map((key) => key.keyId).join() === b.previous.map((key) => key.keyId).join();

  async function putSecret(caller: SecretsCaller, input: PutSecretInput): Promise<SecretView> {
    const violations: Violation[] = [];
    const reasons = new Set<string>();
    checkName(input.name, "name", violations);
    checkEnvironment(input.environment, "environment", violations);
    const tags = checkTags(input.tags, "tags", violations);
    if (input.sealed !== true) {
      reasons.add("plaintext_refused");
      violations.push({
        field: "sealed",
        description: `${input.sealed === undefined ? "is required and" : "is false but"} must be true: only values sealed to the organisation's public key are stored`,
      });
    }
    if (input.value !== undefined) {
      reasons.add("plaintext_refused");
      violations.push({
        field: "value",
        description: 'plaintext values are refused and nothing was stored: remove "value" and send the value sealed in encrypted_value',
      });
    }

    let keyId = input.keyId === "" ? undefined : input.keyId;
    if (keyId !== undefined && !/^[0-9a-f]{64}$/.test(keyId)) {
      keyId = undefined;
      violations.push({
        field: "key_id",
        description:
          "must be the key_id of the organisation's public key (64 lower-case hex digits, GET /organization/{id}/secrets/public-key), or absent",
      });
    }

    let plaintext: Buffer | null = null;
    let outdated: { description: string; currentKeyId: string } | null = null;
    const before = violations.length;
    const sealed = decodeSealedValue(input.encryptedValue, violations);
    if (sealed && violations.length === before) {
      let keys = await deps.keyrings.find(caller.organizationId);
      if (!keys) {
        violations.push({
          field: "encrypted_value",
          description:
            "cannot be opened: the organisation has no secrets key yet; fetch it with GET /organization/{id}/secrets/public-key, seal the value to it and retry",
        });
      } else {
        let opening = await openWithKeys(sealed, keys, keyId, violations);
        if (opening.kind !== "opened") {
          // The cached keys may predate a rotation on another instance: read them again once.
          const fresh = await deps.keyrings.find(caller.organizationId, { fresh: true });
          if (fresh && !sameKeys(fresh, keys)) {
            keys = fresh;
            opening = await openWithKeys(sealed, keys, keyId, violations);
          }
        }
        if (opening.kind === "opened") plaintext = opening.value;
        else if (opening.kind === "outdated") outdated = { description: opening.description, currentKeyId: keys.keyId };
        else violations.push(notSealedToKey(keys.keyId));
        if (plaintext && valueText(plaintext, violations) === null) {
          plaintext.fill(0);
          plaintext = null;
        }
      }
    }
    if (outdated) {
      const description = `${outdated.description}: seal the value again to the current key, key_id ${outdated.currentKeyId} (GET /organization/{id}/secrets/public-key)`;
      // Alone, it is a conflict with the key's state (409); beside other problems, one of them.
      if (violations.length === 0) {
        throw new DomainError("aborted", "sealing_key_outdated", description, [
          { field: keyId !== undefined ? "key_id" : "encrypted_value", description },
        ]);
      }
      violations.push({ field: keyId !== undefined ? "key_id" : "encrypted_value", description });
    }
    if (violations.length > before) reasons.add("value_not_sealed");

    if (violations.length > 0) {
      plaintext?.fill(0);
      throw invalidArgument(
        violations,
        reasons.has("plaintext_refused") ? "plaintext_refused" : reasons.has("value_not_sealed") ? "value_not_sealed" : "invalid_argument",
      );
    }
    const value = plaintext as Buffer;
    const keys = await deps.keyrings.obtain(caller.organizationId);
    const now = deps.clock();
    try {
      const stored = await deps.transaction(async ({ store, announce, events }) => {
        const place = { organizationId: caller.organizationId, environment: input.environment, name: input.name };
        announce(caller.organizationId, input.environment);
        let secret = await store.advanceSecret(place, { tags, updatedAt: now });
        if (!secret) {
          // A concurrent creation of the same name makes this insert fail; the transaction is retried.
          secret = { id: randomUUID(), ...place, version: 1, tags, updatedAt: now };
          await store.createSecret(secret);
        }
        await store.insertVersion({
          secretId: secret.id,
          version: secret.version,
          ciphertext: sealAtRest(keys.dataKey, value, { ...secret }),
          tags,
          actor: caller.actor,
          createdAt: now,
        });
        // Pruning every fifth version keeps 10 to 14 versions and saves a statement on most writes.
        if (secret.version > keepVersions && secret.version % pruneEvery === 0) {
          await store.pruneVersions(secret.id, secret.version - keepVersions + 1);
        }
        await store.insertAuditEvent(audit(caller, "write", input.environment, [input.name], now));
        await events.record(caller.organizationId, {
          type: secret.version === 1 ? "secret.created" : "secret.updated",
          data: { name: input.name, environment: input.environment, version: secret.version, actor: caller.actor },
        });
        return secret;
      });
      // Committed: this instance's next retrieve must see it, whenever the announcement arrives.
      values.forget(caller.organizationId, input.environment);
      return view(stored);
    } finally {
      value.fill(0);
    }
  }

  async function listSecrets(caller: SecretsCaller, input: { environment: string; tags: readonly string[] }): Promise<SecretView[]> {
    const violations: Violation[] = [];
    checkEnvironment(input.environment, "environment", violations, "env");
    const tags = checkTags(input.tags, "tags", violations);
    if (violations.length > 0) throw invalidArgument(violations);
    const secrets = await deps.store.listSecrets(caller.organizationId, input.environment);
    return secrets
      .filter((secret) => carriesEvery(secret.tags, tags))
      .sort((a, b) => byteOrder(a.name, b.name))
      .map(view);
  }

  /** The environments that hold a secret, in byte order (as names are listed). */
  async function listEnvironments(caller: SecretsCaller): Promise<string[]> {
    return (await deps.store.listEnvironments(caller.organizationId)).sort(byteOrder);
  }

  async function retrieveSecrets(
    caller: SecretsCaller,
    input: { environment: string; names: readonly string[]; tags: readonly string[]; publicKeyPem: string },
  ): Promise<RetrievalEnvelope> {
    const violations: Violation[] = [];
    checkEnvironment(input.environment, "environment", violations);
    input.names.forEach((name, i) => {
      checkName(name, `names[${i}]`, violations);
    });
    const names = [...new Set(input.names)];
    if (names.length > maxRetrieveNames) {
      violations.push({
        field: "names",
        description: `asks for ${names.length} names; at most ${maxRetrieveNames} per request (or select by environment and tags)`,
      });
    }
    const tags = checkTags(input.tags, "tags", violations);
    const clientKey = deps.parseClientKey(input.publicKeyPem, violations);
    if (violations.length > 0 || !clientKey) throw invalidArgument(violations);

    const keys = await deps.keyrings.find(caller.organizationId);
    const found = keys ? await currentValues(caller.organizationId, input.environment, names) : [];
    const present = new Set(found.map((s) => s.name));
    const missing = names.filter((name) => !present.has(name));
    if (missing.length > 0) {
      throw new DomainError(
        "not_found",
        "secret_not_found",
        `no secret named ${missing.map((n) => `"${n}"`).join(", ")} in environment "${input.environment}"`,
        missing.map((name) => ({
          field: `names[${input.names.indexOf(name)}]`,
          description: `no secret "${name}" in environment "${input.environment}"`,
        })),
      );
    }
    // Sorted by name already (currentValues): the selection keeps that order.
    const selected = tags.length === 0 ? found : found.filter((s) => carriesEvery(s.tags, tags));

    const secrets: RetrievedSecret[] = selected.map((secret) => {
      const value = openAtRest((keys as NonNullable<typeof keys>).dataKey, secret.ciphertext, secret, secret.associatedData);
      try {
        return {
          name: secret.name,
          environment: secret.environment,
          version: secret.version,
          tags: secret.tags,
          updated_at: secret.updatedAtText,
          value: value.toString("utf8"),
        };
      } finally {
        value.fill(0);
      }
    });
    const envelope = sealForClient(secrets, clientKey, deps.random);
    await recordRetrieve(
      audit(
        caller,
        "retrieve",
        input.environment,
        secrets.map((s) => s.name),
        deps.clock(),
      ),
    );
    return envelope;
  }

  /**
   * The named secrets of the environment (all of them without names) with their
   * stored values, sorted by name; from the cache when it holds them.
   */
  async function currentValues(
    organizationId: string,
    environment: string,
    names: readonly string[],
  ): Promise<readonly RetrievableValue[]> {
    const cached = await values.get(organizationId, environment);
    if (!cached) return retrievableSorted(await deps.store.listCurrentValues(organizationId, environment, names));
    if (names.length === 0) return cached;
    const wanted = new Set(names);
    return cached.filter((value) => wanted.has(value.name));
  }

  /**
   * The current values of the named secrets (keys `<environment>/<name>`; a
   * missing one is absent), for a check the platform makes itself: the
   * certificate and key a domain references, at import (docs/gateway.md,
   * "TLS"). The values go to no caller, so no retrieval is audited.
   */
  async function valuesForCheck(organizationId: string, keys: readonly string[]): Promise<Map<string, string>> {
    const opened = new Map<string, string>();
    const keyring = keys.length === 0 ? undefined : await deps.keyrings.find(organizationId);
    if (!keyring) return opened;
    const byEnvironment = new Map<string, string[]>();
    for (const key of keys) {
      const slash = key.indexOf("/");
      const environment = key.slice(0, slash);
      byEnvironment.set(environment, [...(byEnvironment.get(environment) ?? []), key.slice(slash + 1)]);
    }
    for (const [environment, names] of byEnvironment) {
      for (const secret of await currentValues(organizationId, environment, names)) {
        const value = openAtRest(keyring.dataKey, secret.ciphertext, secret, secret.associatedData);
        opened.set(`${environment}/${secret.name}`, value.toString("utf8"));
        value.fill(0);
      }
    }
    return opened;
  }

  async function deleteSecret(caller: SecretsCaller, input: { name: string; environment: string }): Promise<void> {
    const violations: Violation[] = [];
    checkName(input.name, "name", violations);
    checkEnvironment(input.environment, "environment", violations, "env");
    if (violations.length > 0) throw invalidArgument(violations);
    const now = deps.clock();
    await deps.transaction(async ({ store, announce, events, lockedPlugins }) => {
      // A secret the current configuration references cannot be deleted (409, naming the plugins).
      const plugins = pluginsReferencing(await lockedPlugins(caller.organizationId), input);
      if (plugins.length > 0) throw secretInUse(input, plugins);
      const secret = await store.findSecret(caller.organizationId, input.environment, input.name);
      if (!secret || !(await store.deleteSecret(caller.organizationId, input.environment, input.name))) throw secretNotFound(input);
      await store.insertAuditEvent(audit(caller, "delete", input.environment, [input.name], now));
      await events.record(caller.organizationId, {
        type: "secret.deleted",
        data: { name: input.name, environment: input.environment, version: secret.version, actor: caller.actor },
      });
      announce(caller.organizationId, input.environment);
    });
    values.forget(caller.organizationId, input.environment);
  }

  async function listVersions(caller: SecretsCaller, input: { name: string; environment: string }): Promise<SecretVersionRecord[]> {
    const violations: Violation[] = [];
    checkName(input.name, "name", violations);
    checkEnvironment(input.environment, "environment", violations);
    if (violations.length > 0) throw invalidArgument(violations);
    const secret = await deps.store.findSecret(caller.organizationId, input.environment, input.name);
    if (!secret) throw secretNotFound(input);
    return deps.store.listVersions(secret.id);
  }

  async function listAuditEvents(
    caller: SecretsCaller,
    input: { pageSize: number; pageToken: string },
  ): Promise<{ events: SecretAuditRecord[]; nextPageToken: string }> {
    const violations: Violation[] = [];
    if (input.pageSize < 0 || input.pageSize > maxAuditPage) {
      violations.push({
        field: "page_size",
        description: `must be from 1 to ${maxAuditPage} (0 or absent means ${defaultAuditPage}), got ${input.pageSize}`,
      });
    }
    const after = input.pageToken === "" ? undefined : decodeCursor(input.pageToken);
    if (after === null)
      violations.push({
        field: "page_token",
        description: "is not a token from a previous answer: send next_page_token unchanged, or nothing for the first page",
      });
    if (violations.length > 0) throw invalidArgument(violations);
    const limit = input.pageSize || defaultAuditPage;
    const rows = await deps.store.listAuditEvents(caller.organizationId, limit + 1, after ?? undefined);
    const events = rows.slice(0, limit);
    const last = events.at(-1);
    return { events, nextPageToken: rows.length > limit && last ? encodeCursor({ createdAt: last.createdAt, id: last.id }) : "" };
  }

  /** Stops listening to announcements. */
  function close(): void {
    announcements.close();
    values.forget();
  }

  return {
    getPublicKey,
    rotatePublicKey,
    listPublicKeys,
    putSecret,
    listSecrets,
    listEnvironments,
    retrieveSecrets,
    valuesForCheck,
    deleteSecret,
    listVersions,
    listAuditEvents,
    close,
  };
}

export type Secrets = ReturnType<typeof createSecrets>;

function secretNotFound(input: { name: string; environment: string }): DomainError {
  return new DomainError("not_found", "secret_not_found", `no secret named "${input.name}" in environment "${input.environment}"`);
}

function encodeCursor(cursor: AuditCursor): string {
  return Buffer.from(JSON.stringify([cursor.createdAt.toISOString(), cursor.id])).toString("base64url");
}

function decodeCursor(token: string): AuditCursor | null {
  try {
    const value: unknown = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
    if (!Array.isArray(value) || value.length !== 2 || typeof value[0] !== "string" || typeof value[1] !== "string") return null;
    const createdAt = new Date(value[0]);
    if (Number.isNaN(createdAt.getTime())) return null;
    return { createdAt, id: value[1] };
  } catch {
    return null;
  }
}
