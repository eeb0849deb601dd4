import {
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
  type AuthenticationResponseJSON,
  type RegistrationResponseJSON,
} from "@simplewebauthn/server";

/** Why a response was refused; stable snake_case reasons of the 401 the client gets. */
export type RefusalReason =
  | "passkey_challenge_mismatch"
  | "passkey_origin_mismatch"
  | "passkey_rp_id_mismatch"
  | "passkey_counter_regression"
  | "passkey_user_not_verified"
  | "passkey_verification_failed";

/** What the client is told for each reason (the detail goes only to the operator's log). */
export const refusalMessages: Record<RefusalReason, string> = {
  passkey_challenge_mismatch: "the passkey response does not answer this ceremony's challenge",
  passkey_origin_mismatch: "the passkey response comes from an origin this relying party does not allow",
  passkey_rp_id_mismatch: "the passkey response is for another relying party",
  passkey_counter_regression: "the passkey's signature counter went backwards; the authenticator may have been cloned",
  passkey_user_not_verified: "the authenticator did not verify the user",
  passkey_verification_failed: "the passkey response does not verify",
};

/** A negative verdict is a value: the caller decides how to refuse. */
export type Verdict<T> = { ok: true; value: T } | { ok: false; reason: RefusalReason; detail: string };

/** What the relying party expects of a response (the organisation's identity settings and the ceremony). */
export interface Expectation {
  challenge: string;
  origins: string[];
  rpId: string;
}

export interface VerifiedRegistration {
  credentialId: string;
  publicKey: Uint8Array;
  counter: number;
  transports: string[];
  deviceType: string;
  backedUp: boolean;
  aaguid: string;
}

export interface VerifiedAssertion {
  counter: number;
  deviceType: string;
  backedUp: boolean;
}

/**
 * Names the check that failed. @simplewebauthn/server throws plain Errors, so
 * the wording of its messages is all there is to go on; anything unrecognised
 * stays the generic reason (still a 401).
 */
function classify(error: unknown): { reason: RefusalReason; detail: string } {
  const detail = error instanceof Error ? error.message : String(error);
  if (/challenge/i.test(detail)) return { reason: "passkey_challenge_mismatch", detail };
  if (/RP ID/i.test(detail)) return { reason: "passkey_rp_id_mismatch", detail };
  if (/origin/i.test(detail)) return { reason: "passkey_origin_mismatch", detail };
  if (/counter/i.test(detail)) return { reason: "passkey_counter_regression", detail };
  if (/user verification|could not be verified/i.test(detail)) return { reason: "passkey_user_not_verified", detail };
  return { reason: "passkey_verification_failed", detail };
}

/**
 * Verifies a registration response (WebAuthn 7.1): challenge, origin, RP ID
 * hash, user presence and verification, and the attestation. Passkeys are
 * the only factor, so user verification is required.
 */
export async function verifyPasskeyRegistration(
  response: RegistrationResponseJSON,
  expected: Expectation,
): Promise<Verdict<VerifiedRegistration>> {
  try {
    const result = await verifyRegistrationResponse({
      response,
      expectedChallenge: expected.challenge,
      expectedOrigin: expected.origins,
      expectedRPID: expected.rpId,
      requireUserVerification: true,
    });
    if (!result.verified) return { ok: false, reason: "passkey_verification_failed", detail: "the registration response did not verify" };
    const info = result.registrationInfo;
    // WebAuthn 7.1 step 22 binds the credential id to the signed authenticator
    // data; the id beside it in the JSON must name the same credential.
    if (info.credential.id !== response.id) {
      return { ok: false, reason: "passkey_verification_failed", detail: "the credential id does not match the authenticator data" };
    }
    return {
      ok: true,
      value: {
        credentialId: info.credential.id,
        publicKey: info.credential.publicKey,
        counter: info.credential.counter,
        transports: [...new Set(info.credential.transports ?? [])].sort(),
        deviceType: info.credentialDeviceType,
        backedUp: info.credentialBackedUp,
        aaguid: info.aaguid,
      },
    };
  } catch (error) {
    return { ok: false, ...classify(error) };
  }
}

/**
 * Verifies an authentication response (WebAuthn 7.2) against a stored passkey:
 * challenge, origin, RP ID hash, user verification, the signature, and the
 * signature counter ("if either is non-zero ... the new one must be greater").
 */
export async function verifyPasskeyAssertion(
  response: AuthenticationResponseJSON,
  expected: Expectation,
  passkey: { id: string; publicKey: Uint8Array; counter: number; transports: string[] },
): Promise<Verdict<VerifiedAssertion>> {
  try {
    const result = await verifyAuthenticationResponse({
      response,
      expectedChallenge: expected.challenge,
      expectedOrigin: expected.origins,
      expectedRPID: expected.rpId,
      credential: {
        id: passkey.id,
        publicKey: new Uint8Array(passkey.publicKey),
        counter: passkey.counter,
        transports: passkey.transports,
      },
      requireUserVerification: true,
    });
    if (!result.verified) return { ok: false, reason: "passkey_verification_failed", detail: "the signature does not verify" };
    const info = result.authenticationInfo;
    return { ok: true, value: { counter: info.newCounter, deviceType: info.credentialDeviceType, backedUp: info.credentialBackedUp } };
  } catch (error) {
    return { ok: false, ...classify(error) };
  }
}
