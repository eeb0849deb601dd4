import type { WrappedKind } from "./master-key-store.js";

// What each value wrapped by the master key is, as its associated data names it
// (envelope.ts prefixes "gatehouse:master:"): a wrapped value copied to another
// row, organisation or purpose fails to unwrap. One place for every purpose, so
// that the code that wraps and a master-key rotation agree.

/** An organisation's RSA sealing key (current or previous; the key_id is checked against the public key). */
export const sealingKeyPurpose = (organizationId: string) => `secrets-private-key:${organizationId}`;
/** An organisation's AES data key, which encrypts its secret values at rest. */
export const dataKeyPurpose = (organizationId: string) => `secrets-data-key:${organizationId}`;
/** An organisation's ES256 session signing key, under its kid. */
export const sessionSigningKeyPurpose = (organizationId: string, kid: string) => `session-signing-key:${organizationId}:${kid}`;
/** A webhook endpoint's signing secrets (current and previous, one value), bound to its organisation and id. */
export const webhookSecretsPurpose = (organizationId: string, endpointId: string) => `webhook-secrets:${organizationId}:${endpointId}`;
/** A legacy session signing key shared by every organisation (read only). */
export const legacySigningKeyPurpose = (kid: string) => `identity-signing-key:${kid}`;

/** The purpose of each wrapped column of a row, by its kind, primary key and context columns (WrappedRow). */
export function purposesOf(kind: WrappedKind, key: readonly string[], context: readonly string[] = []): Record<string, string> {
  const [first = ""] = key;
  const [organizationId = ""] = context;
  switch (kind) {
    case "secret_keyring":
      return { privateKeyEnc: sealingKeyPurpose(first), dataKeyEnc: dataKeyPurpose(first) };
    case "previous_sealing_key":
      return { privateKeyEnc: sealingKeyPurpose(first) };
    case "session_signing_key":
      // The row's key is its kid; the organisation, part of the purpose, is read with the row.
      return { privateKeyEnc: sessionSigningKeyPurpose(organizationId, first) };
    case "legacy_signing_key":
      return { privateKeyEnc: legacySigningKeyPurpose(first) };
    case "webhook_endpoint":
      return { secretsEnc: webhookSecretsPurpose(organizationId, first) };
    case "system_value":
      // A system value is wrapped with its SystemState key as the purpose (the passkey decoy secret).
      return { value: first };
  }
}
