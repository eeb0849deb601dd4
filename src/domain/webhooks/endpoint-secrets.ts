import type { MasterKeyring } from "../../crypto/envelope.js";
import { webhookSecretsPurpose } from "../master-key/wrapped-purposes.js";

/** An endpoint's signing secrets: the current one, and after a rotation the previous one (for 24 hours). */
export interface EndpointSecrets {
  current: string;
  previous?: string | undefined;
}

/** Wraps an endpoint's secrets under the current master key, bound to the endpoint (a copy elsewhere fails to open). */
export function wrapSecrets(
  keyring: MasterKeyring,
  organizationId: string,
  endpointId: string,
  secrets: EndpointSecrets,
): { secretsEnc: Uint8Array; masterKeyId: string } {
  const plain = Buffer.from(JSON.stringify(secrets), "utf8");
  try {
    return { secretsEnc: keyring.wrap(plain, webhookSecretsPurpose(organizationId, endpointId)), masterKeyId: keyring.currentId };
  } finally {
    plain.fill(0);
  }
}

export function unwrapSecrets(
  keyring: MasterKeyring,
  endpoint: { organizationId: string; id: string; secretsEnc: Uint8Array; masterKeyId: string | null },
): EndpointSecrets {
  const plain = keyring.unwrap(
    Buffer.from(endpoint.secretsEnc),
    webhookSecretsPurpose(endpoint.organizationId, endpoint.id),
    endpoint.masterKeyId,
  );
  try {
    const parsed = JSON.parse(plain.toString("utf8")) as EndpointSecrets;
    return { current: parsed.current, ...(parsed.previous ? { previous: parsed.previous } : {}) };
  } finally {
    plain.fill(0);
  }
}

/** The secrets that sign now: the current one, and the previous one until its 24 hours are over. */
export function signingSecrets(secrets: EndpointSecrets, previousUntil: Date | null, now: Date): string[] {
  return secrets.previous && previousUntil && previousUntil.getTime() > now.getTime()
    ? [secrets.current, secrets.previous]
    : [secrets.current];
}
