import {
  browserSupportsWebAuthn,
  browserSupportsWebAuthnAutofill,
  startAuthentication,
  startRegistration,
  WebAuthnAbortService,
  WebAuthnError,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
} from "@simplewebauthn/browser";
import { GatehouseError, isServerErrorCode, type FieldViolation, type ServerErrorCode } from "./gatehouse-error.js";

export interface GatehouseOptions {
  /** The organisation's publishable key (`pk_...`); safe to ship in a browser. */
  publishableKey: string;
  /** The platform's base address, an origin such as `https://auth.example.com`. */
  domain: string;
  /** A fetch to use instead of the global one (tests, instrumentation). */
  fetch?: typeof fetch;
}

/** A session: an ES256 JWT and when it expires (RFC 3339). */
export interface Session {
  token: string;
  expires_at: string;
}

/** What register() and login() resolve to. */
export interface SignedIn {
  identity_id: string;
  session: Session;
}

export interface RegisterOptions {
  /** The name the authenticator shows; defaults to the identifier. */
  displayName?: string;
  signal?: AbortSignal;
}

export interface LoginOptions {
  /** Sign in as this identifier; omit it for a discoverable passkey (usernameless). */
  identifier?: string;
  /**
   * `conditional`: passkey autofill. The promise settles when the user picks a
   * passkey from the autofill list of an `<input autocomplete="username webauthn">`;
   * start it when the page loads. Any other ceremony (or cancel()) ends it
   * with code `cancelled`.
   */
  mediation?: "conditional";
  signal?: AbortSignal;
}

interface Begun<Options> {
  ceremony_id: string;
  options: Options;
}

/**
 * The connect-protocol mapping of HTTP statuses, for answers that carry no
 * Connect error body (a proxy's error page, for instance).
 */
function codeOfStatus(status: number): ServerErrorCode {
  if (status === 400) return "invalid_argument";
  if (status === 401) return "unauthenticated";
  if (status === 403) return "permission_denied";
  if (status === 404) return "not_found";
  if (status === 409) return "already_exists";
  if (status === 412) return "failed_precondition";
  if (status === 429) return "resource_exhausted";
  if (status === 502 || status === 503 || status === 504) return "unavailable";
  if (status === 501) return "unimplemented";
  return status >= 500 ? "internal" : "unknown";
}

/** The WebAuthn failure as a GatehouseError with a stable code. */
function fromWebAuthn(error: unknown): GatehouseError {
  if (error instanceof GatehouseError) return error;
  if (error instanceof WebAuthnError) {
    if (error.code === "ERROR_CEREMONY_ABORTED")
      return new GatehouseError("cancelled", "the passkey ceremony was cancelled", { cause: error });
    if (error.name === "NotAllowedError") {
      return new GatehouseError("not_allowed", "the passkey prompt was dismissed, timed out, or not allowed", { cause: error });
    }
    return new GatehouseError("authenticator", error.message, { cause: error });
  }
  const name = error instanceof Error ? error.name : "";
  if (name === "AbortError") return new GatehouseError("cancelled", "the passkey ceremony was cancelled", { cause: error });
  if (name === "NotAllowedError")
    return new GatehouseError("not_allowed", "the passkey prompt was dismissed, timed out, or not allowed", { cause: error });
  const message = error instanceof Error ? error.message : String(error);
  return new GatehouseError("authenticator", message, { cause: error });
}

/**
 * Passkey sign-up and sign-in against a Gatehouse organisation, from the
 * browser. Every method resolves to `{identity_id, session}` or rejects with
 * a GatehouseError.
 *
 * ```js
 * const gatehouse = new Gatehouse({ publishableKey: "pk_...", domain: "https://auth.example.com" });
 * const { identity_id, session } = await gatehouse.register("ada@example.com");
 * ```
 */
export class Gatehouse {
  readonly domain: string;
  readonly #publishableKey: string;
  readonly #fetch: typeof fetch;

  constructor(options: GatehouseOptions) {
    const key = options?.publishableKey;
    if (typeof key !== "string" || !key.startsWith("pk_")) {
      // A secret key in a browser would hand the organisation's backend powers to every visitor.
      throw new GatehouseError(
        "invalid_argument",
        "publishableKey must be the organisation's publishable key (pk_...); never use a secret key in a browser",
      );
    }
    let domain: URL;
    try {
      domain = new URL(options.domain);
    } catch {
      throw new GatehouseError(
        "invalid_argument",
        `domain must be the platform's base address, such as https://auth.example.com (got ${String(options.domain)})`,
      );
    }
    this.domain = domain.href.replace(/\/+$/, "");
    this.#publishableKey = key;
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /** Whether this browser can use passkeys at all. */
  static isSupported(): boolean {
    return browserSupportsWebAuthn();
  }

  /** Whether this browser offers passkeys in autofill (`login({ mediation: "conditional" })`). */
  static supportsAutofill(): Promise<boolean> {
    return browserSupportsWebAuthnAutofill();
  }

  /** Creates an identity for a new identifier with a passkey on this device, and signs it in. */
  async register(identifier: string, options: RegisterOptions = {}): Promise<SignedIn> {
    const begun = await this.#post<Begun<PublicKeyCredentialCreationOptionsJSON>>("/identity/register/begin", {
      identifier,
      ...(options.displayName !== undefined ? { display_name: options.displayName } : {}),
    });
    const credential = await this.#ceremony(options.signal, () => startRegistration({ optionsJSON: begun.options }));
    const finished = await this.#post<SignedIn & { credential_id: string }>("/identity/register/finish", {
      ceremony_id: begun.ceremony_id,
      credential,
    });
    return { identity_id: finished.identity_id, session: finished.session };
  }

  /**
   * Signs in with a passkey: `login("ada@example.com")` offers that identity's
   * passkeys, `login()` any passkey of this site (usernameless), and
   * `login({ mediation: "conditional" })` waits for the user to pick one from autofill.
   */
  async login(identifierOrOptions?: string | LoginOptions): Promise<SignedIn> {
    const options: LoginOptions =
      typeof identifierOrOptions === "string" ? { identifier: identifierOrOptions } : (identifierOrOptions ?? {});
    const conditional = options.mediation === "conditional";
    if (conditional && !(await browserSupportsWebAuthnAutofill())) {
      throw new GatehouseError("unsupported", "this browser does not offer passkeys in autofill");
    }
    // Conditional UI needs an empty allow list (WebAuthn 5.1.4.1), so it never takes an identifier.
    const identifier = conditional ? undefined : options.identifier;
    const begun = await this.#post<Begun<PublicKeyCredentialRequestOptionsJSON>>(
      "/identity/login/begin",
      identifier !== undefined && identifier !== "" ? { identifier } : {},
    );
    const credential = await this.#ceremony(options.signal, () =>
      startAuthentication({ optionsJSON: begun.options, useBrowserAutofill: conditional }),
    );
    const finished = await this.#post<SignedIn>("/identity/login/finish", { ceremony_id: begun.ceremony_id, credential });
    return { identity_id: finished.identity_id, session: finished.session };
  }

  /** Ends a pending ceremony (a conditional login, for example); its promise rejects with code `cancelled`. */
  cancel(): void {
    WebAuthnAbortService.cancelCeremony();
  }

  async #ceremony<T>(signal: AbortSignal | undefined, run: () => Promise<T>): Promise<T> {
    if (!browserSupportsWebAuthn()) throw new GatehouseError("unsupported", "this browser does not support passkeys (WebAuthn)");
    if (signal?.aborted) throw new GatehouseError("cancelled", "the passkey ceremony was cancelled");
    const abort = () => WebAuthnAbortService.cancelCeremony();
    signal?.addEventListener("abort", abort, { once: true });
    try {
      return await run();
    } catch (error) {
      throw fromWebAuthn(error);
    } finally {
      signal?.removeEventListener("abort", abort);
    }
  }

  async #post<T>(path: string, body: unknown): Promise<T> {
    let response: Response;
    try {
      response = await this.#fetch(this.domain + path, {
        method: "POST",
        headers: { authorization: `Bearer ${this.#publishableKey}`, "content-type": "application/json" },
        body: JSON.stringify(body),
        // The publishable key is the credential; cookies play no part.
        credentials: "omit",
      });
    } catch (error) {
      throw new GatehouseError("network", `could not reach ${this.domain}`, { cause: error });
    }
    let json: unknown;
    try {
      json = await response.json();
    } catch (error) {
      if (response.ok) throw new GatehouseError("network", `${this.domain}${path} answered something that is not JSON`, { cause: error });
      json = undefined;
    }
    if (response.ok) return json as T;
    throw serverError(response, json);
  }
}

function serverError(response: Response, json: unknown): GatehouseError {
  const body = (typeof json === "object" && json !== null ? json : {}) as {
    code?: unknown;
    message?: unknown;
    details?: { debug?: { reason?: unknown; violations?: { field?: unknown; description?: unknown }[] } }[];
  };
  const code = isServerErrorCode(body.code) ? body.code : codeOfStatus(response.status);
  const debug = Array.isArray(body.details) ? body.details.find((d) => d?.debug)?.debug : undefined;
  const violations: FieldViolation[] = Array.isArray(debug?.violations)
    ? debug.violations.flatMap((v) =>
        typeof v?.field === "string" && typeof v.description === "string" ? [{ field: v.field, description: v.description }] : [],
      )
    : [];
  const retryAfter = Number(response.headers.get("retry-after"));
  return new GatehouseError(code, typeof body.message === "string" ? body.message : `the platform answered HTTP ${response.status}`, {
    status: response.status,
    ...(typeof debug?.reason === "string" ? { reason: debug.reason } : {}),
    ...(Number.isFinite(retryAfter) && retryAfter > 0 ? { retryAfterSeconds: retryAfter } : {}),
    violations,
  });
}
