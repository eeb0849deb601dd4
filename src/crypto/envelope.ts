import { createCipheriv, createDecipheriv, createHmac, randomBytes } from "node:crypto";
import { DomainError } from "../domain/errors.js";

const ivLength = 12;
const tagLength = 16;

/**
 * AES-256-GCM with associated data: iv (12) || ciphertext || tag (16).
 * The associated data binds a ciphertext to where it belongs (organisation,
 * purpose, row), so a ciphertext copied elsewhere fails to open.
 */
export function seal(key: Buffer, plaintext: Buffer, associatedData: string): Buffer {
  const iv = randomBytes(ivLength);
  const cipher = createCipheriv("aes-256-gcm", key, iv);
  cipher.setAAD(Buffer.from(associatedData, "utf8"));
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([iv, body, cipher.getAuthTag()]);
}

/** Opens what seal() made; a wrong key, tampering or other associated data is data_loss. */
export function open(key: Buffer, sealed: Buffer, associatedData: string): Buffer {
  if (sealed.length < ivLength + tagLength) {
    throw new DomainError("data_loss", "ciphertext_corrupt", "stored ciphertext is truncated");
  }
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, sealed.subarray(0, ivLength));
    decipher.setAAD(Buffer.from(associatedData, "utf8"));
    decipher.setAuthTag(sealed.subarray(sealed.length - tagLength));
    return Buffer.concat([decipher.update(sealed.subarray(ivLength, sealed.length - tagLength)), decipher.final()]);
  } catch {
    throw new DomainError(
      "data_loss",
      "ciphertext_corrupt",
      "stored ciphertext does not authenticate: it was altered or moved from another row",
    );
  }
}

/**
 * The master keys: the current one wraps, every one unwraps. Each wrapped value
 * is stored with the id of the key that wrapped it (masterKeyIdOf), so a
 * process knows which key opens it, and a master-key rotation (docs/secrets.md,
 * "Rotating the master key") knows what is left to wrap again.
 */
export interface MasterKeyring {
  /** The current key's id: what to record beside a value wrap() returns. */
  readonly currentId: string;
  /** Every key's id, the current one first. */
  readonly ids: readonly string[];
  /** Wraps with the current key; the purpose names what the value is, in the associated data. */
  wrap(plaintext: Buffer, purpose: string): Buffer;
  /**
   * Unwraps a value wrapped under the key `masterKeyId`; null or undefined (a
   * value wrapped before ids were recorded) tries every key, the current one
   * first (AES-GCM authenticates: a wrong key fails, never yields garbage).
   * A value under a key this process was not given, or that does not
   * authenticate, is an error (master_key_missing, ciphertext_corrupt).
   */
  unwrap(sealed: Buffer, purpose: string, masterKeyId?: string | null): Buffer;
}

/**
 * A master key's id: 16 hex digits of HMAC-SHA-256 under the key itself
 * (RFC 2104), a name for the key in logs, errors and `master-key status` that
 * reveals nothing of it (the key is 32 random bytes: no guess can be checked
 * against the id in practice).
 */
export function masterKeyIdOf(masterKey: Buffer): string {
  return createHmac("sha256", masterKey).update("gatehouse master key id").digest("hex").slice(0, 16);
}

export function createMasterKeyring(masterKey: Buffer, previousKeys: readonly Buffer[] = []): MasterKeyring {
  const keys = new Map<string, Buffer>();
  for (const key of [masterKey, ...previousKeys]) {
    if (key.length !== 32) throw new Error("a master key must be 32 bytes");
    const id = masterKeyIdOf(key);
    if (!keys.has(id)) keys.set(id, key);
  }
  const currentId = masterKeyIdOf(masterKey);
  const ids = [...keys.keys()];
  const associatedData = (purpose: string) => `gatehouse:master:${purpose}`;
  return {
    currentId,
    ids,
    wrap: (plaintext, purpose) => seal(masterKey, plaintext, associatedData(purpose)),
    unwrap(sealed, purpose, masterKeyId) {
      if (masterKeyId) {
        const key = keys.get(masterKeyId);
        if (!key) {
          throw new DomainError(
            "failed_precondition",
            "master_key_missing",
            `a value is wrapped under master key ${masterKeyId}, which this process was not given (it has ${ids.join(", ")})`,
          );
        }
        return open(key, sealed, associatedData(purpose));
      }
      for (const key of keys.values()) {
        try {
          return open(key, sealed, associatedData(purpose));
        } catch {
          // not this key
        }
      }
      throw new DomainError(
        "data_loss",
        "ciphertext_corrupt",
        `a value wrapped before master key ids were recorded opens with none of this process's master keys (${ids.join(", ")})`,
      );
    },
  };
}
