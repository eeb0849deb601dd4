import { createHash, createPrivateKey, generateKeyPair, type KeyObject } from "node:crypto";
import { promisify } from "node:util";
import type { MasterKeyring } from "../../crypto/envelope.js";
import type { RandomSource } from "../../crypto/tokens.js";
import { dataKeyPurpose, sealingKeyPurpose } from "../master-key/wrapped-purposes.js";
import type { EventLog } from "../events/event-log.js";
import type { PreviousSealingKeyRecord, SecretKeyringRecord, SecretsStore } from "./secrets-store.js";

const generateKeyPairAsync = promisify(generateKeyPair);

/** One of an organisation's sealing keys, unwrapped. */
export interface SealingKey {
  /** Hex SHA-256 of the public key's DER (SPKI). */
  keyId: string;
  /** RSA-4096 public key, SPKI PEM. */
  publicKeyPem: string;
  /** Private key that opens sealed writes. */
  privateKey: KeyObject;
  createdAt: Date;
}

/** A sealing key a rotation replaced. */
export interface PreviousSealingKey extends SealingKey {
  retiredAt: Date;
  /** Until when a value sealed to it is accepted (retiredAt + the grace period). */
  acceptedUntil: Date;
}

/** An organisation's unwrapped secrets keys. */
export interface OrganizationKeys {
  organizationId: string;
  /** The current sealing key's RSA-4096 public key, SPKI PEM. */
  publicKeyPem: string;
  /** Hex SHA-256 of the current public key's DER (SPKI). */
  keyId: string;
  /** Private key of the current sealing key. */
  privateKey: KeyObject;
  /** When the current sealing key was made. */
  keyCreatedAt: Date;
  /**
   * The keys rotations replaced that are still kept, newest first: those
   * within their grace period are accepted, the others only recognised.
   */
  previous: readonly PreviousSealingKey[];
  /** sealing_key_rotation_days of the organisation (0: no scheduled rotation). */
  rotationDays: number;
  /** AES-256 key that encrypts values at rest. */
  dataKey: Buffer;
}

/** How long a value sealed to a replaced key is still accepted (docs/secrets.md, "Rotating the sealing key": 24 hours). */
export const sealingKeyGraceMs = 24 * 3600_000;
/**
 * How long after its grace period a replaced key is kept, only to recognise a
 * value sealed to it and answer that it is outdated (409) rather than not
 * sealed (400); then its row is deleted.
 */
export const sealingKeyRecognitionMs = 7 * 24 * 3600_000;

/** What a rotation did: the new current key and the replaced keys still kept. */
export interface SealingKeyRotated {
  organizationId: string;
  current: SealingKey;
  /** The key this rotation replaced (absent when another rotation came first and this one wrote nothing). */
  replacedKeyId?: string;
  previous: readonly PreviousSealingKey[];
}

export interface SecretKeyringsDeps {
  store: Pick<SecretsStore, "findKeyring" | "insertKeyring" | "listPreviousSealingKeys" | "findSealingKeyRotationDays">;
  /** Runs fn in one transaction (retried when it lost a race); `events` records the rotation's event in it. */
  transaction<T>(
    fn: (store: Pick<SecretsStore, "rotateSealingKey" | "deletePreviousSealingKeys">, events: EventLog) => Promise<T>,
  ): Promise<T>;
  /** Tells every instance, once the rotation has committed, to forget the organisation's cached keys. */
  announceRotation?(organizationId: string): Promise<void>;
  masterKeyring: MasterKeyring;
  random: RandomSource;
  /** Organisations whose unwrapped keys stay in memory (least recently used leave first). */
  cacheSize?: number;
  /** How long unwrapped keys stay in memory before they are read and unwrapped again, in milliseconds. */
  maxAgeMs?: number;
  /** Milliseconds since some fixed point (the clock seam); Date.now by default. */
  now?: () => number;
  /** Key generation seam; RSA-4096 by default. */
  generateRsaKeyPair?: () => Promise<{ publicKey: KeyObject; privateKey: KeyObject }>;
}

// Purposes name the organisation, so a wrapped key copied to another organisation's row fails to unwrap.
const privateKeyPurpose = sealingKeyPurpose;

/** key_id (docs/secrets.md, "Rotating the sealing key"): the hex SHA-256 of the key's DER (SPKI) encoding. */
export function keyIdOf(publicKey: KeyObject): string {
  return createHash("sha256")
    .update(publicKey.export({ type: "spki", format: "der" }))
    .digest("hex");
}

/**
 * The organisations' secrets keyrings: an RSA-4096 sealing key pair and an
 * AES-256 data key each, created on first use and stored only wrapped by the
 * master key. The sealing key rotates (rotate(), or the first read of the
 * public key once sealing_key_rotation_days have passed); the keys it replaced
 * are kept, wrapped, for the grace period and the recognition period after it.
 * The data key never changes: values at rest stay as they are.
 *
 * Unwrapped keys are cached per organisation, as a KMS client caches data keys:
 * bounded in number (least recently used leave first) and in age (after
 * maxAgeMs they are read and unwrapped again), so that a request costs no
 * database read and no unwrapping. A rotation makes every instance forget the
 * organisation's entry (announceRotation, over the change feed); a sealed
 * value that none of the cached keys opens makes the caller read them again
 * (find with fresh: true), in case an announcement was lost.
 */
export function createSecretKeyrings(deps: SecretKeyringsDeps) {
  const cacheSize = deps.cacheSize ?? 512;
  const maxAgeMs = deps.maxAgeMs ?? 5 * 60_000;
  const now = deps.now ?? Date.now;
  const cache = new Map<string, OrganizationKeys & { unwrappedAt: number }>();
  // One load or creation per organisation at a time in this process; across
  // processes the insert on the primary key decides and the loser reads back.
  const inflight = new Map<string, Promise<OrganizationKeys | null>>();
  const generate =
    deps.generateRsaKeyPair ??
    // The async form runs on the libuv pool: RSA-4096 generation takes around a second.
    (() => generateKeyPairAsync("rsa", { modulusLength: 4096, publicExponent: 0x10001 }));

  function remember(keys: OrganizationKeys): OrganizationKeys {
    cache.delete(keys.organizationId);
    cache.set(keys.organizationId, { ...keys, unwrappedAt: now() });
    while (cache.size > cacheSize) {
      const oldest = cache.keys().next().value;
      if (oldest === undefined) break;
      cache.delete(oldest);
    }
    return keys;
  }

  function unwrapPrivateKey(organizationId: string, wrapped: Buffer, masterKeyId: string | null): KeyObject {
    const der = deps.masterKeyring.unwrap(wrapped, privateKeyPurpose(organizationId), masterKeyId);
    try {
      return createPrivateKey({ key: der, format: "der", type: "pkcs8" });
    } finally {
      der.fill(0);
    }
  }

  function unwrapPrevious(record: PreviousSealingKeyRecord): PreviousSealingKey {
    return {
      keyId: record.keyId,
      publicKeyPem: record.publicKeyPem,
      privateKey: unwrapPrivateKey(record.organizationId, record.privateKeyEnc, record.masterKeyId),
      createdAt: record.createdAt,
      retiredAt: record.retiredAt,
      acceptedUntil: new Date(record.retiredAt.getTime() + sealingKeyGraceMs),
    };
  }

  async function unwrap(record: SecretKeyringRecord): Promise<OrganizationKeys> {
    const [previous, rotationDays] = await Promise.all([
      deps.store.listPreviousSealingKeys(record.organizationId),
      deps.store.findSealingKeyRotationDays(record.organizationId),
    ]);
    const kept = now() - sealingKeyGraceMs - sealingKeyRecognitionMs;
    return {
      organizationId: record.organizationId,
      publicKeyPem: record.publicKeyPem,
      keyId: record.keyId,
      privateKey: unwrapPrivateKey(record.organizationId, record.privateKeyEnc, record.masterKeyId),
      keyCreatedAt: record.keyCreatedAt,
      // Past their recognition period they are deleted at the next rotation; until then they are not used.
      previous: previous.filter((key) => key.retiredAt.getTime() > kept).map(unwrapPrevious),
      rotationDays: rotationDays ?? 0,
      dataKey: deps.masterKeyring.unwrap(record.dataKeyEnc, dataKeyPurpose(record.organizationId), record.masterKeyId),
    };
  }

  /** A new RSA-4096 key pair, its key_id and its private key wrapped by the master key. */
  async function newKeyPair(organizationId: string) {
    const { publicKey, privateKey } = await generate();
    const der = privateKey.export({ type: "pkcs8", format: "der" });
    try {
      return {
        publicKeyPem: publicKey.export({ type: "spki", format: "pem" }).toString(),
        keyId: keyIdOf(publicKey),
        privateKey,
        privateKeyEnc: deps.masterKeyring.wrap(der, privateKeyPurpose(organizationId)),
      };
    } finally {
      der.fill(0);
    }
  }

  async function create(organizationId: string): Promise<OrganizationKeys> {
    const pair = await newKeyPair(organizationId);
    const dataKey = deps.random(32);
    const record: SecretKeyringRecord = {
      organizationId,
      publicKeyPem: pair.publicKeyPem,
      keyId: pair.keyId,
      privateKeyEnc: pair.privateKeyEnc,
      dataKeyEnc: deps.masterKeyring.wrap(dataKey, dataKeyPurpose(organizationId)),
      masterKeyId: deps.masterKeyring.currentId,
      keyCreatedAt: new Date(now()),
    };
    if (await deps.store.insertKeyring(record)) {
      const rotationDays = (await deps.store.findSealingKeyRotationDays(organizationId)) ?? 0;
      return {
        organizationId,
        publicKeyPem: record.publicKeyPem,
        keyId: record.keyId,
        privateKey: pair.privateKey,
        keyCreatedAt: record.keyCreatedAt,
        previous: [],
        rotationDays,
        dataKey,
      };
    }
    // Another process created it first: everyone uses that one.
    const winner = await deps.store.findKeyring(organizationId);
    if (!winner) throw new Error(`secrets keyring of ${organizationId} vanished after a conflicting insert`);
    return unwrap(winner);
  }

  function load(organizationId: string, createIfMissing: boolean): Promise<OrganizationKeys | null> {
    const cached = cache.get(organizationId);
    if (cached && now() - cached.unwrappedAt < maxAgeMs) {
      cache.delete(organizationId);
      cache.set(organizationId, cached);
      return Promise.resolve(cached);
    }
    if (cached) cache.delete(organizationId);
    const key = `${organizationId}:${createIfMissing}`;
    let pending = inflight.get(key);
    if (!pending) {
      pending = (async () => {
        const record = await deps.store.findKeyring(organizationId);
        if (record) return remember(await unwrap(record));
        if (!createIfMissing) return null;
        return remember(await create(organizationId));
      })().finally(() => inflight.delete(key));
      inflight.set(key, pending);
    }
    return pending;
  }

  function forget(organizationId: string): void {
    cache.delete(organizationId);
  }

  const rotating = new Map<string, Promise<SealingKeyRotated>>();

  /**
   * Replaces the organisation's sealing key with a new RSA-4096 key pair. The
   * old one is accepted for the grace period (sealingKeyGraceMs); keys past
   * their recognition period are deleted. Two rotations at once (on any
   * instances) make one new key: the later one finds the key it meant to
   * replace gone and reports the winner's.
   */
  function rotate(organizationId: string): Promise<SealingKeyRotated> {
    let pending = rotating.get(organizationId);
    if (!pending) {
      pending = (async () => {
        // Read again: the key to replace is the one stored now, not a cached one.
        forget(organizationId);
        const before = await load(organizationId, true);
        if (!before) throw new Error(`secrets keyring of ${organizationId} could not be created`);
        // Generated before the transaction: it takes about a second, and no lock is held meanwhile.
        const pair = await newKeyPair(organizationId);
        const rotatedAt = new Date(now());
        const replaced = await deps.transaction(async (store, events) => {
          const done = await store.rotateSealingKey({
            organizationId,
            replacedKeyId: before.keyId,
            publicKeyPem: pair.publicKeyPem,
            keyId: pair.keyId,
            privateKeyEnc: pair.privateKeyEnc,
            // Wrapped again with the new key pair, so the row's wrapped keys are written together.
            dataKeyEnc: deps.masterKeyring.wrap(before.dataKey, dataKeyPurpose(organizationId)),
            masterKeyId: deps.masterKeyring.currentId,
            rotatedAt,
          });
          if (done) {
            await store.deletePreviousSealingKeys(
              organizationId,
              new Date(rotatedAt.getTime() - sealingKeyGraceMs - sealingKeyRecognitionMs),
            );
            await events.record(organizationId, {
              type: "secret.sealing_key_rotated",
              data: { key_id: pair.keyId, previous_key_id: before.keyId },
            });
          }
          return done;
        });
        forget(organizationId);
        if (replaced) await deps.announceRotation?.(organizationId);
        const after = (await load(organizationId, true)) as OrganizationKeys;
        return {
          organizationId,
          current: { keyId: after.keyId, publicKeyPem: after.publicKeyPem, privateKey: after.privateKey, createdAt: after.keyCreatedAt },
          ...(replaced ? { replacedKeyId: before.keyId } : {}),
          previous: after.previous,
        };
      })().finally(() => rotating.delete(organizationId));
      rotating.set(organizationId, pending);
    }
    return pending;
  }

  return {
    /** The organisation's keys, created on first use. */
    async obtain(organizationId: string): Promise<OrganizationKeys> {
      return (await load(organizationId, true)) as OrganizationKeys;
    },
    /**
     * The organisation's keys for a client that is about to seal to them:
     * created on first use, and rotated first when sealing_key_rotation_days
     * have passed since the current key was made.
     */
    async obtainForSealing(organizationId: string): Promise<OrganizationKeys> {
      const keys = (await load(organizationId, true)) as OrganizationKeys;
      const dueAt = keys.keyCreatedAt.getTime() + keys.rotationDays * 24 * 3600_000;
      if (keys.rotationDays === 0 || now() < dueAt) return keys;
      await rotate(organizationId);
      return (await load(organizationId, true)) as OrganizationKeys;
    },
    /**
     * The organisation's keys, or null when it has none yet. `fresh` reads them
     * from the database again, for a caller whose cached keys did not open a
     * value (a rotation on another instance whose announcement was lost).
     */
    find(organizationId: string, options: { fresh?: boolean } = {}): Promise<OrganizationKeys | null> {
      if (options.fresh) forget(organizationId);
      return load(organizationId, false);
    },
    rotate,
    /** Forgets the organisation's cached keys (another instance rotated them, or its rotation setting changed). */
    forget,
  };
}

export type SecretKeyrings = ReturnType<typeof createSecretKeyrings>;
