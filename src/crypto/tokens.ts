import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

/** Prefixes of the credentials of docs/api.md, "Credentials and roles", and docs/gateway.md, "Keys and consumers". */
export const credentialPrefixes = {
  apiKey: "gk_",
  publishableKey: "pk_",
  secretKey: "sk_",
  gatewayKey: "gw_",
  /** Consumer keys authenticate to a gateway's api-key-auth, never to the platform API. */
  consumerKey: "ck_",
} as const;

export type CredentialPrefix = (typeof credentialPrefixes)[keyof typeof credentialPrefixes];

/** A source of random bytes; tests inject a deterministic one. */
export type RandomSource = (size: number) => Buffer;

export const systemRandom: RandomSource = (size) => randomBytes(size);

/** 32 random bytes, base64url: 43 characters. */
export function newOpaqueToken(random: RandomSource = systemRandom): string {
  return random(32).toString("base64url");
}

/** A new credential: prefix + 43 base64url characters (32 random bytes). */
export function newCredential(prefix: CredentialPrefix, random: RandomSource = systemRandom): string {
  return prefix + newOpaqueToken(random);
}

const credentialShape = /^(gk|pk|sk|gw)_[A-Za-z0-9_-]{43}$/;

/** Whether a string has the shape of a key the platform API takes (not whether it exists). */
export function isCredentialShaped(value: string): boolean {
  return credentialShape.test(value);
}

/**
 * The stored form of a high-entropy token: hex SHA-256. Keys and tokens carry 256
 * random bits, so a fast hash is enough (no password-style stretching needed) and
 * lookups can use a unique index on the hash.
 */
export function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/** Constant-time comparison of two hex digests (or any two strings). */
export function constantTimeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, "utf8");
  const right = Buffer.from(b, "utf8");
  if (left.length !== right.length) {
    // Compare against itself so the time does not depend on where they differ.
    timingSafeEqual(left, left);
    return false;
  }
  return timingSafeEqual(left, right);
}

/** The displayable prefix of a key: its kind and first 6 random characters. */
export function displayPrefix(credential: string): string {
  return credential.slice(0, 9);
}
