import { createHmac } from "node:crypto";
import type { RandomSource } from "../../crypto/tokens.js";

// Standard Webhooks 1.0 (standardwebhooks.com, "Signature scheme"): a secret is `whsec_` + base64 of its
// bytes; the signed content is `{webhook-id}.{webhook-timestamp}.{body}`; the signature is `v1,` + base64 of
// its HMAC-SHA256 under the secret's bytes; "webhook-signature" carries one or more, space-separated.

const secretPrefix = "whsec_";

/** A new signing secret: `whsec_` + base64 of 32 random bytes ("between 24 bytes and 64 bytes" per the specification). */
export function newWebhookSecret(random: RandomSource): string {
  return secretPrefix + random(32).toString("base64");
}

/** The bytes of a `whsec_` secret. */
export function secretBytes(secret: string): Buffer {
  if (!secret.startsWith(secretPrefix)) throw new Error("a webhook secret starts with whsec_");
  return Buffer.from(secret.slice(secretPrefix.length), "base64");
}

/** `v1,` + base64 HMAC-SHA256 of `{id}.{timestamp}.{body}` under the secret's bytes. */
export function signPayload(secret: string, id: string, timestampSeconds: number, body: string): string {
  const mac = createHmac("sha256", secretBytes(secret)).update(`${id}.${timestampSeconds}.${body}`).digest("base64");
  return `v1,${mac}`;
}

/** The webhook-signature header: one signature per secret (the current one first), space-separated. */
export function signatureHeader(secrets: readonly string[], id: string, timestampSeconds: number, body: string): string {
  return secrets.map((secret) => signPayload(secret, id, timestampSeconds, body)).join(" ");
}
