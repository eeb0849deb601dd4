/**
 * The one error vocabulary of Gatehouse. Domain and storage code throw a
 * DomainError; src/interceptors/errors.ts maps its kind to a Connect code and
 * src/rest/status.ts maps codes (and a few reasons) to HTTP statuses.
 */
export type ErrorKind =
  | "invalid_argument"
  | "unauthenticated"
  | "permission_denied"
  | "not_found"
  | "already_exists"
  | "failed_precondition"
  | "aborted"
  | "resource_exhausted"
  | "unimplemented"
  | "data_loss"
  | "internal";

/** One problem with one field of a request or document. */
export interface Violation {
  /** Path of the field: `routes[2].methods[0]`, `encrypted_value`. */
  field: string;
  /** What is wrong and what is allowed. */
  description: string;
  /** 1-based position in a YAML document, when there is one. */
  line?: number;
  column?: number;
}

export class DomainError extends Error {
  override readonly name = "DomainError";

  constructor(
    readonly kind: ErrorKind,
    /** Stable snake_case reason clients may branch on. */
    readonly reason: string,
    message: string,
    readonly violations: Violation[] = [],
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

/** An invalid_argument error listing every violation found. */
export function invalidArgument(violations: Violation[], reason = "invalid_argument"): DomainError {
  const first = violations[0];
  const summary =
    violations.length === 1 && first
      ? `${first.field}: ${first.description}`
      : `${violations.length} problems: ${violations.map((v) => `${v.field}: ${v.description}`).join("; ")}`;
  return new DomainError("invalid_argument", reason, summary, violations);
}

export function notFound(reason: string, message: string): DomainError {
  return new DomainError("not_found", reason, message);
}

export function unimplemented(what: string): DomainError {
  return new DomainError("unimplemented", "not_implemented", `${what} is not implemented yet`);
}
