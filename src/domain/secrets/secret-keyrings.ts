import { createHash, createPrivateKey, generateKeyPair, type KeyObject } from "node:crypto";
import { promisify } from "node:util";
import type { MasterKeyring } from "../../crypto/envelope.js";
import type { RandomSource } from "../../crypto/tokens.js";
import type { SecretKeyringRecord, SecretsStore } from "../../storage/secrets-store.js";

const generateKeyPairAsync = promisify(generateKeyPair);

/** An organisation's unwrapped secrets keys. */
export interface OrganizationKeys {
  organizationId: string;
  /** RSA-4096 public key, SPKI PEM. */
  publicKeyPem: string;
  /** Hex SHA-256 of the public key's DER (SPKI). */
  keyId: string;
  /** Private key that opens sealed writes. */
  privateKey: KeyObject;
  /** AES-256 key that encrypts values at rest. */
  dataKey: Buffer;
}

export interface SecretKeyringsDeps {
  store: Pick<SecretsStore, "findKeyring" | "insertKeyring">;
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
const privateKeyPurpose = (organizationId: string) => `secrets-private-key:${organizationId}`;
const dataKeyPurpose = (organizationId: string) => `secrets-data-key:${organizationId}`;

/** key_id of CONTRACT.md: the hex SHA-256 of the key's DER (SPKI) encoding. */
export function keyIdOf(publicKey: KeyObject): string {
  return createHash("sha256")
    .update(publicKey.export({ type: "spki", format: "der" }))
    .digest("hex");
}

/**
 * The organisations' secrets keyrings: an RSA-4096 key pair and an AES-256 data
 * key each, created on first use and stored only wrapped by the master key.
 *
 * Unwrapped keys are cached per organisation, as a KMS client caches data keys:
 * bounded in number (least recently used leave first) and in age (after
 * maxAgeMs they are read and unwrapped again), so that a request costs no
 * database read and no unwrapping. A keyring never changes once created (there
 * is no key rotation), so the cache cannot go stale; were rotation added, it
 * would have to forget the organisation's entry on every instance, as the
 * secrets change feed does for stored values.
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

  function unwrap(record: SecretKeyringRecord): OrganizationKeys {
    const der = deps.masterKeyring.unwrap(record.privateKeyEnc, privateKeyPurpose(record.organizationId));
    try {
      return {
        organizationId: record.organizationId,
        publicKeyPem: record.publicKeyPem,
        keyId: record.keyId,
        privateKey: createPrivateKey({ key: der, format: "der", type: "pkcs8" }),
        dataKey: deps.masterKeyring.unwrap(record.dataKeyEnc, dataKeyPurpose(record.organizationId)),
      };
    } finally {
      der.fill(0);
    }
  }

  async function create(organizationId: string): Promise<OrganizationKeys> {
    const { publicKey, privateKey } = await generate();
    const der = privateKey.export({ type: "pkcs8", format: "der" });
    const dataKey = deps.random(32);
    const record: SecretKeyringRecord = {
      organizationId,
      publicKeyPem: publicKey.export({ type: "spki", format: "pem" }).toString(),
      keyId: keyIdOf(publicKey),
      privateKeyEnc: deps.masterKeyring.wrap(der, privateKeyPurpose(organizationId)),
      dataKeyEnc: deps.masterKeyring.wrap(dataKey, dataKeyPurpose(organizationId)),
    };
    der.fill(0);
    if (await deps.store.insertKeyring(record)) {
      return { organizationId, publicKeyPem: record.publicKeyPem, keyId: record.keyId, privateKey, dataKey };
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
        if (record) return remember(unwrap(record));
        if (!createIfMissing) return null;
        return remember(await create(organizationId));
      })().finally(() => inflight.delete(key));
      inflight.set(key, pending);
    }
    return pending;
  }

  return {
    /** The organisation's keys, created on first use. */
    async obtain(organizationId: string): Promise<OrganizationKeys> {
      return (await load(organizationId, true)) as OrganizationKeys;
    },
    /** The organisation's keys, or null when it has none yet. */
    find(organizationId: string): Promise<OrganizationKeys | null> {
      return load(organizationId, false);
    },
  };
}

export type SecretKeyrings = ReturnType<typeof createSecretKeyrings>;
