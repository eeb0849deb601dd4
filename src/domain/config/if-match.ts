import { DomainError } from "../errors.js";

/** Which current revisions an `If-Match` precondition accepts. */
export interface RevisionCondition {
  matches(revision: number): boolean;
  /** The header's entity tags as the answer repeats them (`"3", "4"`), or `*`. */
  readonly describe: string;
}

const entityTag = /^(W\/)?"([\x21\x23-\x7e\x80-\xff]*)"$/;

/**
 * Reads an `If-Match` header (RFC 9110 §13.1.1): `*`, or a list of entity
 * tags. "An origin server MUST use the strong comparison function when
 * comparing entity-tags for If-Match": a weak tag (`W/"3"`) never matches,
 * and a strong tag matches the revision whose ETag (`"<revision>"`) it equals.
 */
export function parseIfMatch(header: string): RevisionCondition {
  const value = header.trim();
  if (value === "*") return { matches: () => true, describe: "*" };
  const revisions = new Set<number>();
  const tags: string[] = [];
  for (const part of value.split(",")) {
    const tag = part.trim();
    if (tag === "") continue;
    const match = entityTag.exec(tag);
    if (!match) {
      throw new DomainError(
        "invalid_argument",
        "malformed_request",
        'If-Match must be * or a comma-separated list of entity tags such as "7" (with the quotes; RFC 9110 §13.1.1)',
        [{ field: "If-Match", description: 'must be * or entity tags such as "7"' }],
      );
    }
    if (match[1] === undefined && /^(0|[1-9][0-9]{0,9})$/.test(match[2] as string)) revisions.add(Number(match[2]));
    if (tags.length < 8) tags.push(tag.length > 24 ? `${tag.slice(0, 20)}…"` : tag);
  }
  if (tags.length === 0) {
    throw new DomainError("invalid_argument", "malformed_request", 'If-Match is empty: send * or entity tags such as "7"');
  }
  return { matches: (revision) => revisions.has(revision), describe: tags.join(", ") };
}
