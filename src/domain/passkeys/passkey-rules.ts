import type { AuthenticationResponseJSON, RegistrationResponseJSON } from "@simplewebauthn/server";
import type { Violation } from "../errors.js";
import { isUuid } from "../identity/identifiers.js";

/** docs/passkeys.md, "The ceremonies over HTTP": ceremonies expire after 5 minutes and are single-use. */
export const ceremonyTtlSeconds = 5 * 60;

/** The most passkeys one identity may hold (issue 6). */
export const maxPasskeysPerIdentity = 20;

/**
 * WebAuthn 5.4.3: "Relying Parties SHOULD perform enforcement ... when setting
 * displayName's value ... to 64 bytes"; the same bound serves a passkey's name.
 */
export const maxNameLength = 64;

/** WebAuthn 5.1: a credential id is at most 1023 bytes (1364 base64url characters). */
const maxCredentialIdLength = 1364;

const base64url = /^[A-Za-z0-9_-]+$/;
const controlCharacter = /\p{Cc}/u;

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Reads a ceremony id; an id that cannot be one of ours is bad input (400), an unknown one a refusal (401). */
export function readCeremonyId(raw: string, field: string, violations: Violation[]): string {
  const value = raw.trim().toLowerCase();
  if (value.length === 0) violations.push({ field, description: "is required" });
  else if (!isUuid(value)) violations.push({ field, description: "must be the ceremony_id a begin call returned" });
  return value;
}

/** Reads a credential id (base64url without padding). */
export function readCredentialId(raw: string, field: string, violations: Violation[]): string {
  const value = raw.trim();
  if (value.length === 0) violations.push({ field, description: "is required" });
  else if (value.length > maxCredentialIdLength || !base64url.test(value)) {
    violations.push({ field, description: "must be a credential id (base64url, at most 1023 bytes)" });
  }
  return value;
}

/** Reads an optional human-readable name (display name, passkey name); empty means none. */
export function readOptionalName(raw: string, field: string, violations: Violation[]): string | null {
  const value = raw.normalize("NFC").trim();
  if (value.length === 0) return null;
  if (value.length > maxNameLength) violations.push({ field, description: `must be at most ${maxNameLength} characters` });
  else if (controlCharacter.test(value)) violations.push({ field, description: "must not contain control characters" });
  return value;
}

function requireString(container: Json, key: string, path: string, violations: Violation[], options: { base64url?: boolean } = {}): string {
  const value = container[key];
  if (typeof value !== "string" || value.length === 0) {
    violations.push({ field: `${path}.${key}`, description: "is required (a string)" });
    return "";
  }
  if (options.base64url && !base64url.test(value)) violations.push({ field: `${path}.${key}`, description: "must be base64url" });
  return value;
}

function readEnvelope(raw: unknown, field: string, violations: Violation[]) {
  if (!isObject(raw)) {
    violations.push({ field, description: "is required: the JSON the authenticator returned (PublicKeyCredential.toJSON())" });
    return null;
  }
  const id = requireString(raw, "id", field, violations);
  if (id.length > maxCredentialIdLength || (id.length > 0 && !base64url.test(id))) {
    violations.push({ field: `${field}.id`, description: "must be a credential id (base64url, at most 1023 bytes)" });
  }
  const rawId = requireString(raw, "rawId", field, violations);
  if (raw.type !== "public-key") violations.push({ field: `${field}.type`, description: 'must be "public-key"' });
  const extensions = raw.clientExtensionResults;
  if (extensions !== undefined && !isObject(extensions)) {
    violations.push({ field: `${field}.clientExtensionResults`, description: "must be an object" });
  }
  const attachment = raw.authenticatorAttachment;
  if (attachment !== undefined && attachment !== "platform" && attachment !== "cross-platform") {
    violations.push({ field: `${field}.authenticatorAttachment`, description: 'must be "platform" or "cross-platform"' });
  }
  const response = raw.response;
  if (!isObject(response)) violations.push({ field: `${field}.response`, description: "is required (an object)" });
  const knownAttachment: "platform" | "cross-platform" | undefined =
    attachment === "platform" || attachment === "cross-platform" ? attachment : undefined;
  return {
    id,
    rawId,
    extensions: isObject(extensions) ? extensions : {},
    attachment: knownAttachment,
    response: isObject(response) ? response : null,
  };
}

/** Reads a RegistrationResponseJSON, listing every structural problem (what the authenticator signed is checked later). */
export function readRegistrationCredential(raw: unknown, field: string, violations: Violation[]): RegistrationResponseJSON | null {
  const before = violations.length;
  const envelope = readEnvelope(raw, field, violations);
  if (!envelope) return null;
  const path = `${field}.response`;
  const response = envelope.response ?? {};
  const clientDataJSON = envelope.response ? requireString(response, "clientDataJSON", path, violations, { base64url: true }) : "";
  const attestationObject = envelope.response ? requireString(response, "attestationObject", path, violations, { base64url: true }) : "";
  const transports = response.transports;
  if (transports !== undefined && !(Array.isArray(transports) && transports.every((t) => typeof t === "string"))) {
    violations.push({ field: `${path}.transports`, description: "must be a list of strings" });
  }
  if (violations.length > before) return null;
  return {
    id: envelope.id,
    rawId: envelope.rawId,
    type: "public-key",
    clientExtensionResults: envelope.extensions,
    ...(envelope.attachment ? { authenticatorAttachment: envelope.attachment } : {}),
    response: {
      clientDataJSON,
      attestationObject,
      ...(Array.isArray(transports) ? { transports: transports as string[] } : {}),
    },
  };
}

/** Reads an AuthenticationResponseJSON, listing every structural problem. */
export function readAuthenticationCredential(raw: unknown, field: string, violations: Violation[]): AuthenticationResponseJSON | null {
  const before = violations.length;
  const envelope = readEnvelope(raw, field, violations);
  if (!envelope) return null;
  const path = `${field}.response`;
  const response = envelope.response ?? {};
  const present = envelope.response !== null;
  const clientDataJSON = present ? requireString(response, "clientDataJSON", path, violations, { base64url: true }) : "";
  const authenticatorData = present ? requireString(response, "authenticatorData", path, violations, { base64url: true }) : "";
  const signature = present ? requireString(response, "signature", path, violations, { base64url: true }) : "";
  const userHandle = response.userHandle;
  // An empty user handle is what some clients send for "none".
  if (
    userHandle !== undefined &&
    userHandle !== null &&
    !(typeof userHandle === "string" && (userHandle === "" || base64url.test(userHandle)))
  ) {
    violations.push({ field: `${path}.userHandle`, description: "must be base64url" });
  }
  if (violations.length > before) return null;
  return {
    id: envelope.id,
    rawId: envelope.rawId,
    type: "public-key",
    clientExtensionResults: envelope.extensions,
    ...(envelope.attachment ? { authenticatorAttachment: envelope.attachment } : {}),
    response: {
      clientDataJSON,
      authenticatorData,
      signature,
      ...(typeof userHandle === "string" && userHandle !== "" ? { userHandle } : {}),
    },
  };
}

/**
 * The WebAuthn user handle of a user (an identity, or an operator's platform
 * account): the UTF-8 bytes of its UUID. WebAuthn 14.6.1: the user handle
 * "MUST NOT contain personally identifying information about the user" (so
 * not the identifier or e-mail address) and is at most 64 bytes.
 */
export function userHandleOf(userId: string): Uint8Array<ArrayBuffer> {
  return new Uint8Array(Buffer.from(userId, "utf8"));
}

/** The user id (identity or account UUID) a user handle (base64url) names, or null when it names none. */
export function userIdOfUserHandle(userHandle: string): string | null {
  const text = Buffer.from(userHandle, "base64url").toString("utf8");
  return isUuid(text) ? text : null;
}
