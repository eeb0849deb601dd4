/**
 * Codes the platform answers with (the Connect error codes of docs/errors.md,
 * "Statuses"), e.g. `unauthenticated` for a refused passkey response (401),
 * `already_exists` for an identifier that is taken (409), `permission_denied`
 * when passkeys are disabled (403).
 */
export type ServerErrorCode =
  | "canceled"
  | "unknown"
  | "invalid_argument"
  | "deadline_exceeded"
  | "not_found"
  | "already_exists"
  | "permission_denied"
  | "resource_exhausted"
  | "failed_precondition"
  | "aborted"
  | "out_of_range"
  | "unimplemented"
  | "internal"
  | "unavailable"
  | "data_loss"
  | "unauthenticated";

/**
 * Codes the browser side raises:
 * - `cancelled`: the ceremony was aborted (`gatehouse.cancel()`, an AbortSignal,
 *   or a newer ceremony replacing a pending one, e.g. a conditional login);
 * - `not_allowed`: the user dismissed the prompt, it timed out, or the browser
 *   refused (WebAuthn hides which, on purpose);
 * - `network`: the platform could not be reached, or answered something that is not JSON;
 * - `unsupported`: this browser cannot do WebAuthn (or passkey autofill, for a conditional login);
 * - `authenticator`: any other WebAuthn failure (e.g. the authenticator already holds
 *   a passkey for this identity, or the page's origin does not fit the relying-party ID); see `cause`.
 */
export type ClientErrorCode = "cancelled" | "not_allowed" | "network" | "unsupported" | "authenticator";

export type GatehouseErrorCode = ClientErrorCode | ServerErrorCode;

const serverCodes: ReadonlySet<string> = new Set<ServerErrorCode>([
  "canceled",
  "unknown",
  "invalid_argument",
  "deadline_exceeded",
  "not_found",
  "already_exists",
  "permission_denied",
  "resource_exhausted",
  "failed_precondition",
  "aborted",
  "out_of_range",
  "unimplemented",
  "internal",
  "unavailable",
  "data_loss",
  "unauthenticated",
]);

export function isServerErrorCode(code: unknown): code is ServerErrorCode {
  return typeof code === "string" && serverCodes.has(code);
}

/** One problem with one field, as the platform lists them for invalid_argument. */
export interface FieldViolation {
  field: string;
  description: string;
}

/** Every failure of the SDK: branch on `code`, which is stable; `message` is for people. */
export class GatehouseError extends Error {
  override readonly name = "GatehouseError";
  readonly code: GatehouseErrorCode;
  /** HTTP status of a server error. */
  readonly status: number | undefined;
  /** The platform's stable snake_case reason, when it gave one (e.g. `ceremony_expired`). */
  readonly reason: string | undefined;
  /** Seconds to wait before retrying (429). */
  readonly retryAfterSeconds: number | undefined;
  /** The fields an invalid_argument error names. */
  readonly violations: FieldViolation[];

  constructor(
    code: GatehouseErrorCode,
    message: string,
    details: { status?: number; reason?: string; retryAfterSeconds?: number; violations?: FieldViolation[]; cause?: unknown } = {},
  ) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.code = code;
    this.status = details.status;
    this.reason = details.reason;
    this.retryAfterSeconds = details.retryAfterSeconds;
    this.violations = details.violations ?? [];
  }
}
