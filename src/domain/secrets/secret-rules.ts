import type { Violation } from "../errors.js";

/** docs/secrets.md, "The API": the shapes of names, environments and tags. */
export const secretNamePattern = /^[A-Za-z_][A-Za-z0-9_.-]{0,127}$/;
export const environmentPattern = /^[a-z0-9][a-z0-9_-]{0,63}$/;
export const tagPattern = /^[a-z0-9][a-z0-9_.:-]{0,63}$/;
export const maxTags = 32;
/** Names one retrieve may ask for (a bound on the work of one request). */
export const maxRetrieveNames = 1000;

/** Largest value of the plain format: RSA-4096 OAEP-SHA-256 holds k - 2*hLen - 2 = 512 - 64 - 2 bytes (RFC 8017, 7.1.1). */
export const maxPlainValueBytes = 446;
/** Largest value of the hybrid format. */
export const maxValueBytes = 64 * 1024;

/** Shows a refused input in a message without echoing arbitrarily long or control characters. */
export function quote(value: string): string {
  const shown = value.length > 40 ? `${value.slice(0, 40)}…` : value;
  return JSON.stringify(shown);
}

export function checkName(value: string, field: string, into: Violation[]): void {
  if (value === "") into.push({ field, description: "is required: a secret name such as DATABASE_URL" });
  else if (!secretNamePattern.test(value)) {
    into.push({
      field,
      description: `${quote(value)} is not a valid secret name: use a letter or underscore, then up to 127 letters, digits, "_", "." or "-" (^[A-Za-z_][A-Za-z0-9_.-]{0,127}$)`,
    });
  }
}

export function checkEnvironment(value: string, field: string, into: Violation[], restName = "environment"): void {
  if (value === "") {
    into.push({
      field,
      description:
        restName === "environment"
          ? "is required: the environment such as production"
          : `is required: name the environment (REST: ?${restName}=production)`,
    });
  } else if (!environmentPattern.test(value)) {
    into.push({
      field,
      description: `${quote(value)} is not a valid environment: use a lower-case letter or digit, then up to 63 lower-case letters, digits, "_" or "-" (^[a-z0-9][a-z0-9_-]{0,63}$)`,
    });
  }
}

/** Checks tags and returns them de-duplicated and sorted (the stored and returned form). */
export function checkTags(tags: readonly string[], field: string, into: Violation[]): string[] {
  tags.forEach((tag, i) => {
    if (!tagPattern.test(tag)) {
      into.push({
        field: `${field}[${i}]`,
        description: `${quote(tag)} is not a valid tag: use a lower-case letter or digit, then up to 63 lower-case letters, digits, "_", ".", ":" or "-" (^[a-z0-9][a-z0-9_.:-]{0,63}$)`,
      });
    }
  });
  const unique = [...new Set(tags)].sort(byteOrder);
  if (unique.length > maxTags) into.push({ field, description: `has ${unique.length} tags; at most ${maxTags} are allowed` });
  return unique;
}

/** Byte order of UTF-8 strings; for the ASCII names of secrets it is code-unit order. */
export function byteOrder(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Whether a secret carries every one of the wanted tags. */
export function carriesEvery(tags: readonly string[], wanted: readonly string[]): boolean {
  return wanted.every((tag) => tags.includes(tag));
}
