import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
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

/** The master key wraps per-purpose keys; this names the purpose in the associated data. */
export interface MasterKeyring {
  wrap(plaintext: Buffer, purpose: string): Buffer;
  unwrap(sealed: Buffer, purpose: string): Buffer;
}

export function createMasterKeyring(masterKey: Buffer): MasterKeyring {
  if (masterKey.length !== 32) throw new Error("master key must be 32 bytes");
  return {
    wrap: (plaintext, purpose) => seal(masterKey, plaintext, `gatehouse:master:${purpose}`),
    unwrap: (sealed, purpose) => open(masterKey, sealed, `gatehouse:master:${purpose}`),
  };
}
