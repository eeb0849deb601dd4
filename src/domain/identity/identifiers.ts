import type { Violation } from "../errors.js";

/** The longest identifier accepted (an e-mail address is at most 254 octets; leave room for usernames). */
export const maxIdentifierLength = 320;

const emailShape = /^[^\s@]+@[^\s@]+$/u;

/**
 * Characters an identifier, an operator's e-mail address or a display name
 * may not hold, because they are invisible or change how text around them is
 * shown, so two identities could look the same in the dashboard:
 * - \p{Cc} control characters (U+0000 to U+001F, U+007F to U+009F);
 * - \p{Cf} format characters: zero-width ones (U+200B to U+200D, U+2060,
 *   U+FEFF) and the bidirectional controls (U+202A to U+202E, U+2066 to
 *   U+2069, U+200E, U+200F), the "Trojan Source" characters (CVE-2021-42574);
 * - \p{Cs} lone surrogates (not text; JSON can still carry them), \p{Co}
 *   private-use and \p{Cn} unassigned code points, which PRECIS
 *   (RFC 8264 section 9) disallows in identifiers;
 * - U+2028 and U+2029, the line and paragraph separators.
 */
const refusedCharacter = /[\p{C}\u2028\u2029]/u;

/** "U+200B" for a code point. */
function codePointName(character: string): string {
  return `U+${(character.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, "0")}`;
}

/**
 * The description of a violation when text holds a refused character (see
 * refusedCharacter), naming the first by code point and position, else null.
 */
export function invisibleCharacterProblem(text: string): string | null {
  const match = refusedCharacter.exec(text);
  if (!match) return null;
  const position = [...text.slice(0, match.index)].length + 1;
  return `must not contain control, format or invisible characters (such as zero-width spaces or right-to-left overrides): ${codePointName(match[0])} at character ${position}`;
}

/**
 * The canonical form of an identifier (docs/identity.md, "Passwords"): NFKC,
 * trimmed, and lower-cased when it is an e-mail address, so that
 * " Ａlice@Example.COM " and "alice@example.com" name one identity. Lower-casing
 * can leave a string that NFKC would change again, so it is normalised once more.
 */
export function normalizeIdentifier(raw: string): string {
  const trimmed = raw.normalize("NFKC").trim();
  return emailShape.test(trimmed) ? trimmed.toLowerCase().normalize("NFKC") : trimmed;
}

/** Normalises an identifier of a request, adding a violation under `field` when it cannot be one. */
export function readIdentifier(raw: string, field: string, violations: Violation[]): string {
  const identifier = normalizeIdentifier(raw);
  const invisible = invisibleCharacterProblem(identifier);
  if (identifier.length === 0) violations.push({ field, description: "is required" });
  else if (identifier.length > maxIdentifierLength)
    violations.push({ field, description: `must be at most ${maxIdentifierLength} characters` });
  else if (invisible) violations.push({ field, description: invisible });
  return identifier;
}

const uuidShape = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Whether `value` is a UUID as Gatehouse writes them (lower-case hex): every id of identities, sessions, ceremonies. */
export function isUuid(value: string): boolean {
  return uuidShape.test(value);
}

/** Reads a UUID field (identity_id, session_id), adding a violation when it is not one. */
export function readUuid(raw: string, field: string, violations: Violation[]): string {
  const value = raw.trim().toLowerCase();
  if (value.length === 0) violations.push({ field, description: "is required" });
  else if (!uuidShape.test(value)) violations.push({ field, description: "must be a UUID" });
  return value;
}
