import { createDecipheriv, type KeyObject } from "node:crypto";
import type { Violation } from "../errors.js";
import type { RsaDecryptor } from "./rsa-decryption-pool.js";
import { maxValueBytes } from "./secret-rules.js";

/** RSA-4096 ciphertext length. */
export const rsaBlockBytes = 512;
const ivBytes = 12;
const tagBytes = 16;
const aesKeyBytes = 32;
const field = "encrypted_value";

const base64Shape = /^[A-Za-z0-9+/]*={0,2}$/;

const sealHint =
  "seal the UTF-8 value with RSA-OAEP (SHA-256, MGF1-SHA-256) to the organisation's public key " +
  "(GET /organization/{id}/secrets/public-key) and send the base64 ciphertext";

/**
 * Decodes encrypted_value from base64 (standard alphabet, padding optional; line
 * breaks such as `openssl base64` writes are ignored) and checks its length
 * against the two wire formats of docs/secrets.md, "The API". Returns null and records a
 * violation when it cannot be a sealed value.
 */
export function decodeSealedValue(encoded: string, into: Violation[]): Buffer | null {
  const compact = encoded.replace(/[\r\n\t ]/g, "");
  if (compact === "") {
    into.push({ field, description: `is required: ${sealHint}` });
    return null;
  }
  if (!base64Shape.test(compact) || compact.length % 4 === 1) {
    into.push({ field, description: `is not base64 (standard alphabet A-Z a-z 0-9 + /): ${sealHint}` });
    return null;
  }
  const bytes = Buffer.from(compact, "base64");
  if (bytes.length === rsaBlockBytes) return bytes;
  if (bytes.length < rsaBlockBytes + ivBytes + tagBytes) {
    into.push({
      field,
      description:
        `is ${bytes.length} bytes after base64 decoding; a sealed value is either the ${rsaBlockBytes}-byte RSA-OAEP ciphertext ` +
        `of a value up to 446 bytes, or (hybrid, values up to 64 KiB) the ${rsaBlockBytes}-byte RSA-OAEP ciphertext of a 32-byte AES key ` +
        `followed by a 12-byte IV, the AES-256-GCM ciphertext and its 16-byte tag`,
    });
    return null;
  }
  const valueBytes = bytes.length - rsaBlockBytes - ivBytes - tagBytes;
  if (valueBytes > maxValueBytes) {
    into.push({ field, description: `holds a ${valueBytes}-byte value; values are limited to ${maxValueBytes} bytes (64 KiB)` });
    return null;
  }
  return bytes;
}

/** A private key that may open a sealed value, and its key_id. */
export interface SealingKeyCandidate {
  keyId: string;
  privateKey: KeyObject;
}

/**
 * Which of the keys opens the sealed value's RSA block, tried in order: the
 * block's plaintext and the key, or null. RSA-OAEP decryption with a wrong
 * key fails its padding check (RFC 8017, 7.1.2 step 3), so trying the next
 * key is safe; a value is never taken from a key that merely "decrypted".
 */
export async function openRsaBlock(
  sealed: Buffer,
  keys: readonly SealingKeyCandidate[],
  decryptor: RsaDecryptor,
): Promise<{ block: Buffer; keyId: string } | null> {
  const ciphertext = sealed.subarray(0, rsaBlockBytes);
  for (const key of keys) {
    const block = await decryptor.decrypt(key.privateKey, ciphertext);
    if (block !== null) return { block, keyId: key.keyId };
  }
  return null;
}

/** The violation of a sealed value that no key of the organisation opens. */
export function notSealedToKey(keyId: string): Violation {
  return {
    field,
    description:
      `does not decrypt with the organisation's key (key_id ${keyId}): use RSA-OAEP with SHA-256 and MGF1-SHA-256 ` +
      "(not PKCS#1 v1.5, not SHA-1) with the organisation's current public key (GET /organization/{id}/secrets/public-key)",
  };
}

/**
 * Opens a sealed value whose RSA block `block` is (openRsaBlock): the plain
 * format (exactly one RSA block) or the hybrid one (an RSA block holding an
 * AES-256 key, then IV || AES-256-GCM ciphertext || tag, no associated data).
 * Returns the value's bytes, or null with a violation saying what to fix.
 * Takes ownership of `block` (it is zeroed).
 */
export function openSealedPayload(sealed: Buffer, block: Buffer, into: Violation[]): Buffer | null {
  if (sealed.length === rsaBlockBytes) return block;
  try {
    if (block.length !== aesKeyBytes) {
      into.push({
        field,
        description: `is in the hybrid format (longer than ${rsaBlockBytes} bytes) but its RSA block holds ${block.length} bytes instead of a 32-byte AES-256 key`,
      });
      return null;
    }
    const iv = sealed.subarray(rsaBlockBytes, rsaBlockBytes + ivBytes);
    const decipher = createDecipheriv("aes-256-gcm", block, iv);
    decipher.setAuthTag(sealed.subarray(sealed.length - tagBytes));
    return Buffer.concat([decipher.update(sealed.subarray(rsaBlockBytes + ivBytes, sealed.length - tagBytes)), decipher.final()]);
  } catch {
    into.push({
      field,
      description:
        "is in the hybrid format but its AES-256-GCM part does not authenticate: send the 512-byte RSA block, then the 12-byte IV, " +
        "the ciphertext and the 16-byte tag, encrypted with the AES key of the RSA block and no associated data",
    });
    return null;
  } finally {
    block.fill(0);
  }
}

// ignoreBOM keeps a leading byte-order mark: it is part of the value.
const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The value as text; null with a violation when it is not UTF-8. */
export function valueText(bytes: Buffer, into: Violation[]): string | null {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    into.push({
      field,
      description:
        "decrypts to bytes that are not UTF-8 text: secret values are UTF-8 strings (base64-encode binary data before sealing it)",
    });
    return null;
  }
}
