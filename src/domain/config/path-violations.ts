/** A step into a document: a mapping key or a list index. */
export type PathSegment = string | number;

/** A violation found in a document value, before it is placed at a line and column. */
export interface PathViolation {
  path: PathSegment[];
  description: string;
  /** Point at the key (unknown keys) or at the value (everything else). */
  at: "key" | "value";
}

/** Collects violations while a validator walks a document. */
export class PathViolations {
  readonly items: PathViolation[] = [];

  add(path: PathSegment[], description: string, at: "key" | "value" = "value"): void {
    this.items.push({ path, description, at });
  }
}

const identifier = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** `routes[2].methods[0]`; keys that are not identifiers are quoted: `config.set["x-request-id"]`. */
export function formatPath(path: readonly PathSegment[]): string {
  let out = "";
  for (const segment of path) {
    if (typeof segment === "number") out += `[${segment}]`;
    else if (identifier.test(segment)) out += out === "" ? segment : `.${segment}`;
    else out += `[${JSON.stringify(segment)}]`;
  }
  return out === "" ? "document" : out;
}
