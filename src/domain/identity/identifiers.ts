import type { Violation } from "../errors.js";

/** The longest identifier accepted (an e-mail address is at most 254 octets; leave room for usernames). */
export const maxIdentifierLength = 320;

const emailShape = /^[^\s@]+@[^\s@]+$/u;
const controlCharacter = /\p{Cc}/u;

/**
 * The canonical form of an identifier (CONTRACT.md "Identity API"): NFKC,
 * trimmed, and lower-cased when it is an e-mail address, so that
 * " Ａlice@Example.COM " and "alice@example.com" name one identity.
 */
export function normalizeIdentifier(raw: string): string {
  const trimmed = raw.normalize("NFKC").trim();
  return emailShape.test(trimmed) ? trimmed.toLowerCase() : trimmed;
}

/** Normalises an identifier of a request, adding a violation under `field` when it cannot be one. */
export function readIdentifier(raw: string, field: string, violations: Violation[]): string {
  const identifier = normalizeIdentifier(raw);
  if (identifier.length === 0) violations.push({ field, description: "is required" });
  else if (identifier.length > maxIdentifierLength)
    violations.push({ field, description: `must be at most ${maxIdentifierLength} characters` });
  else if (controlCharacter.test(identifier)) violations.push({ field, description: "must not contain control characters" });
  return identifier;
}

const uuidShape = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Reads a UUID field (identity_id, session_id), adding a violation when it is not one. */
export function readUuid(raw: string, field: string, violations: Violation[]): string {
  const value = raw.trim().toLowerCase();
  if (value.length === 0) violations.push({ field, description: "is required" });
  else if (!uuidShape.test(value)) violations.push({ field, description: "must be a UUID" });
  return value;
}
