import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
} from "@simplewebauthn/server";
import type { PasskeyDescriptor } from "./passkey-store.js";
import { ceremonyTtlSeconds, userHandleOf } from "./passkey-rules.js";

/** A relying party: an organisation's (its identity settings) or the dashboard's (PUBLIC_URL). */
export interface RelyingParty {
  rpId: string;
}

/**
 * PublicKeyCredentialCreationOptionsJSON for a new passkey. Passkeys are
 * discoverable credentials with user verification (WebAuthn 6.2.2, 6.2.3):
 * residentKey "required" makes usernameless sign-in possible, and
 * userVerification "required" because the passkey is the only factor.
 * Attestation "none": Gatehouse trusts no authenticator model over another.
 */
export async function creationOptions(input: {
  rp: RelyingParty;
  challenge: Uint8Array<ArrayBuffer>;
  /** The identity's or the operator account's UUID: the user handle the passkey stores. */
  userId: string;
  userName: string;
  displayName: string;
  exclude: PasskeyDescriptor[];
}): Promise<PublicKeyCredentialCreationOptionsJSON> {
  return generateRegistrationOptions({
    // rp.name is what some authenticators show; the RP ID is the one name the user can check.
    rpName: input.rp.rpId,
    rpID: input.rp.rpId,
    userID: userHandleOf(input.userId),
    userName: input.userName,
    userDisplayName: input.displayName,
    challenge: input.challenge,
    timeout: ceremonyTtlSeconds * 1000,
    attestationType: "none",
    excludeCredentials: input.exclude.map((p) => ({ id: p.id, transports: p.transports })),
    authenticatorSelection: { residentKey: "required", requireResidentKey: true, userVerification: "required" },
  });
}

/**
 * PublicKeyCredentialRequestOptionsJSON: with `allow` for a sign-in by
 * identifier, without for a discoverable (usernameless) one.
 */
export async function requestOptions(input: {
  rp: RelyingParty;
  challenge: Uint8Array<ArrayBuffer>;
  allow: PasskeyDescriptor[] | null;
}): Promise<PublicKeyCredentialRequestOptionsJSON> {
  return generateAuthenticationOptions({
    rpID: input.rp.rpId,
    challenge: input.challenge,
    timeout: ceremonyTtlSeconds * 1000,
    userVerification: "required",
    ...(input.allow ? { allowCredentials: input.allow.map((p) => ({ id: p.id, transports: p.transports })) } : {}),
  });
}
