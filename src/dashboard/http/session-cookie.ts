/**
 * The dashboard's cookies: the session, and the passkey sign-in challenge that
 * ties a sign-in ceremony to the browser that began it. Over https they take
 * the `__Host-` prefix, which browsers accept only with Secure, Path=/ and no
 * Domain, so no sibling host can set or shadow them (RFC 6265bis, "Cookie Name
 * Prefixes").
 */
export function sessionCookieName(publicUrl: string): string {
  return isHttps(publicUrl) ? "__Host-gatehouse_dashboard" : "gatehouse_dashboard";
}

/** The cookie that holds a passkey sign-in's challenge handle between begin and finish. */
export function passkeyChallengeCookieName(publicUrl: string): string {
  return isHttps(publicUrl) ? "__Host-gatehouse_dashboard_passkey" : "gatehouse_dashboard_passkey";
}

function isHttps(publicUrl: string): boolean {
  return new URL(publicUrl).protocol === "https:";
}

const tokenShape = /^[A-Za-z0-9_-]{43}$/;

/** The token value of the named cookie in a Cookie header, or null when there is none of the right shape. */
function readTokenCookie(cookieHeader: string | null, name: string): string | null {
  if (cookieHeader === null) return null;
  for (const part of cookieHeader.split(";")) {
    const eq = part.indexOf("=");
    if (eq === -1 || part.slice(0, eq).trim() !== name) continue;
    const value = part.slice(eq + 1).trim();
    if (tokenShape.test(value)) return value;
  }
  return null;
}

/**
 * A Set-Cookie value: HttpOnly (no script reads it), SameSite=Strict (no
 * cross-site request carries it), Secure over https.
 */
function tokenCookie(name: string, value: string, publicUrl: string, maxAgeSeconds: number): string {
  const secure = isHttps(publicUrl) ? "; Secure" : "";
  return `${name}=${value}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${Math.max(0, Math.floor(maxAgeSeconds))}${secure}`;
}

/** The session token of a Cookie header, or null when there is none of the right shape. */
export function readSessionCookie(cookieHeader: string | null, publicUrl: string): string | null {
  return readTokenCookie(cookieHeader, sessionCookieName(publicUrl));
}

/**
 * The Set-Cookie value of a new session, with a Max-Age of the session's
 * absolute lifetime (the idle limit is enforced by the server).
 */
export function sessionCookie(token: string, publicUrl: string, maxAgeSeconds: number): string {
  return tokenCookie(sessionCookieName(publicUrl), token, publicUrl, maxAgeSeconds);
}

/** The Set-Cookie value that removes the session cookie. */
export function clearedSessionCookie(publicUrl: string): string {
  return tokenCookie(sessionCookieName(publicUrl), "", publicUrl, 0);
}

/** The passkey sign-in challenge handle of a Cookie header, or null. */
export function readPasskeyChallengeCookie(cookieHeader: string | null, publicUrl: string): string | null {
  return readTokenCookie(cookieHeader, passkeyChallengeCookieName(publicUrl));
}

/** The Set-Cookie value of a passkey sign-in's challenge handle, lasting as long as the ceremony. */
export function passkeyChallengeCookie(token: string, publicUrl: string, maxAgeSeconds: number): string {
  return tokenCookie(passkeyChallengeCookieName(publicUrl), token, publicUrl, maxAgeSeconds);
}

/** The Set-Cookie value that removes the passkey challenge cookie. */
export function clearedPasskeyChallengeCookie(publicUrl: string): string {
  return tokenCookie(passkeyChallengeCookieName(publicUrl), "", publicUrl, 0);
}
