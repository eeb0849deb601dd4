import type { DescService } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import { Credential } from "../../../gen/svc/v1/auth_pb.js";
import { DomainError } from "../../domain/errors.js";
import { authRuleOf } from "../../interceptors/auth.js";

/** The one thing the guard reads from a request's headers. */
export type HeaderReader = Pick<Headers, "get">;

/**
 * The header every dashboard request carries. A page of another site cannot
 * send it without a CORS preflight, which the platform never grants
 * (OWASP CSRF Prevention Cheat Sheet, "Employing Custom Request Headers for
 * AJAX/API").
 */
export const dashboardHeader = "x-gatehouse-dashboard";

/**
 * Cross-site request forgery defence of every dashboard request: the
 * browser-set `Origin` must be the platform's PUBLIC_URL origin ("Verifying
 * Origin With Standard Headers") and the custom header must be present. The
 * cookies are also SameSite=Strict. Returns the refusal, or null when the
 * request may proceed.
 */
export function checkSameOrigin(header: HeaderReader, expectedOrigin: string): DomainError | null {
  const origin = header.get("origin");
  if (origin !== expectedOrigin) {
    return new DomainError(
      "permission_denied",
      "cross_site_request",
      origin === null
        ? `dashboard requests must come from a page of ${expectedOrigin} (no Origin header was sent)`
        : `dashboard requests must come from a page of ${expectedOrigin}, not ${origin.slice(0, 200)}: open the dashboard at ${expectedOrigin}/dashboard/`,
    );
  }
  if (header.get(dashboardHeader) !== "1") {
    return new DomainError("permission_denied", "cross_site_request", `dashboard requests must carry the header "${dashboardHeader}: 1"`);
  }
  return null;
}

export interface RequestGuardOptions {
  /** PUBLIC_URL: the only origin whose pages may use the dashboard. */
  publicUrl: string;
  /** The dashboard's services: every RPC of theirs is guarded. */
  services: readonly DescService[];
}

/**
 * The dashboard's request guard, one interceptor in the app's chain (before
 * authentication, so a forged request is refused before its cookie is even
 * looked up): every RPC of the dashboard's services, and any RPC a dashboard
 * session could authenticate, must come from a dashboard page
 * (checkSameOrigin), whatever door it came through. Other RPCs pass untouched.
 * An RPC that takes a key as well as a dashboard session (WebhooksService) is
 * guarded only when no `Authorization` header names a key: a request with one
 * is authenticated by the key, never by a cookie, so nothing rides on the
 * browser's ambient credentials, and a page of another site cannot send that
 * header without a CORS preflight, which is never granted.
 */
export function createRequestGuard(options: RequestGuardOptions): Interceptor {
  const expectedOrigin = new URL(options.publicUrl).origin;
  const guarded = new Set(options.services.map((service) => service.typeName));
  const isGuarded = (req: Parameters<Parameters<Interceptor>[0]>[0]) => {
    if (guarded.has(req.service.typeName)) return true;
    const credentials = authRuleOf(req.method).credentials;
    if (!credentials.includes(Credential.DASHBOARD_SESSION)) return false;
    const takesKeys = credentials.some((credential) => credential !== Credential.DASHBOARD_SESSION);
    return !takesKeys || (req.header.get("authorization") ?? "").trim() === "";
  };
  return (next) => (req) => {
    if (isGuarded(req)) {
      const refused = checkSameOrigin(req.header, expectedOrigin);
      if (refused) throw refused;
    }
    return next(req);
  };
}
