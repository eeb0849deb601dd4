import type { Violation } from "../errors.js";
import { isCommonPassword } from "./common-passwords.js";

export const minPasswordLength = 8;
export const maxPasswordLength = 128;

/**
 * The form a password is hashed in. NIST SP 800-63B 5.1.1.2: "the verifier
 * SHOULD apply the Normalization Process for Stabilized Strings using either
 * the NFKC or NFKD normalization", so the same password typed on two keyboards
 * matches.
 */
export function normalizePassword(password: string): string {
  return password.normalize("NFKC");
}

/** Length in characters (code points), as a person counts them. */
function lengthOf(password: string): number {
  let count = 0;
  for (const _ of password) count++;
  return count;
}

/** Checks a new password (8 to 128 characters, not a common password), adding violations under `field`. */
export async function checkNewPassword(password: string, field: string, violations: Violation[]): Promise<void> {
  const length = lengthOf(normalizePassword(password));
  if (length < minPasswordLength) violations.push({ field, description: `must be at least ${minPasswordLength} characters` });
  else if (length > maxPasswordLength) violations.push({ field, description: `must be at most ${maxPasswordLength} characters` });
  else if (await isCommonPassword(normalizePassword(password))) {
    violations.push({ field, description: "is too common (it appears in lists of breached passwords); choose another" });
  }
}
