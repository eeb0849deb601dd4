import { createHmac } from "node:crypto";
import type { PasskeyDescriptor } from "./passkey-store.js";

/**
 * The allowCredentials of an identifier that has no passkey (unknown, or an
 * identity without passkeys), so that login/begin answers for it like for a
 * known one. WebAuthn 14.6.2 ("Username Enumeration") suggests exactly this:
 * "return a plausible imaginary value for allowCredentials". The value is an
 * HMAC of the organisation and identifier under an installation-wide secret,
 * so asking twice (on any instance) gives the same answer, as for a real
 * identity, and no one without the secret can tell it from a real one.
 */
export function decoyCredentials(secret: Buffer, organizationId: string, identifier: string): PasskeyDescriptor[] {
  const id = createHmac("sha256", secret).update(`passkey-decoy\0${organizationId}\0${identifier}`, "utf8").digest("base64url");
  // The transports a synced platform passkey reports, sorted as stored ones are.
  return [{ id, transports: ["hybrid", "internal"] }];
}
