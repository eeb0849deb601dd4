import { constants, createCipheriv, publicEncrypt, type KeyObject } from "node:crypto";
import type { RandomSource } from "../../crypto/tokens.js";

/** One secret in the decrypted retrieve payload (docs/secrets.md, "The API"). */
export interface RetrievedSecret {
  name: string;
  environment: string;
  version: number;
  tags: string[];
  updated_at: string;
  value: string;
}

export interface RetrievalEnvelope {
  /** base64(12-byte IV || AES-256-GCM ciphertext || 16-byte tag), no associated data. */
  encryptedSecrets: string;
  /** base64(RSA-OAEP-SHA-256 of the 32-byte AES key, to the client's key). */
  encryptedKey: string;
}

/**
 * Encrypts a retrieve answer to the caller: a fresh AES-256 key per answer
 * encrypts the JSON payload, and the caller's RSA key wraps that AES key
 * (OAEP with SHA-256; OpenSSL takes the MGF1 digest from the OAEP digest, so
 * this is MGF1-SHA-256 too, as WebCrypto's RSA-OAEP expects).
 */
export function sealForClient(secrets: readonly RetrievedSecret[], clientKey: KeyObject, random: RandomSource): RetrievalEnvelope {
  const aesKey = random(32);
  const iv = random(12);
  try {
    const cipher = createCipheriv("aes-256-gcm", aesKey, iv);
    const body = Buffer.concat([cipher.update(JSON.stringify({ secrets }), "utf8"), cipher.final()]);
    const encryptedKey = publicEncrypt({ key: clientKey, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha256" }, aesKey);
    return {
      encryptedSecrets: Buffer.concat([iv, body, cipher.getAuthTag()]).toString("base64"),
      encryptedKey: encryptedKey.toString("base64"),
    };
  } finally {
    aesKey.fill(0);
  }
}

/** RFC 3339 UTC, as the protobuf JSON mapping writes Timestamps (no fraction when it is zero). */
export function rfc3339(date: Date): string {
  return date.toISOString().replace(".000Z", "Z");
}
