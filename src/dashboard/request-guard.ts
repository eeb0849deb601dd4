import { DomainError } from "../domain/errors.js";

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
 * Cross-site request forgery defence of every dashboard request that uses the
 * session cookie (RPCs, sign-in, setup and sign-out): the browser-set `Origin`
 * must be the platform's PUBLIC_URL origin ("Verifying Origin With Standard
 * Headers") and the custom header must be present. The cookie is also
 * SameSite=Strict. Returns the refusal, or null when the request may proceed.
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
