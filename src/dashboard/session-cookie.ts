/**
 * The dashboard session cookie. Over https it takes the `__Host-` prefix, which
 * browsers accept only with Secure, Path=/ and no Domain, so no sibling host can
 * set or shadow it (RFC 6265bis, "Cookie Name Prefixes").
 */
export function sessionCookieName(publicUrl: string): string {
  return isHttps(publicUrl) ? "__Host-gatehouse_dashboard" : "gatehouse_dashboard";
}

function isHttps(publicUrl: string): boolean {
  return new URL(publicUrl).protocol === "https:";
}

const tokenShape = /^[A-Za-z0-9_-]{43}$/;

/** The session token of a Cookie header, or null when there is none of the right shape. */
export function readSessionCookie(cookieHeader: string | null, publicUrl: string): string | null {
  if (cookieHeader === null) return null;
  const name = sessionCookieName(publicUrl);
  for (const part of cookieHeader.split(";")) {
    const eq = part.indexOf("=");
    if (eq === -1 || part.slice(0, eq).trim() !== name) continue;
    const value = part.slice(eq + 1).trim();
    if (tokenShape.test(value)) return value;
  }
  return null;
}

/**
 * The Set-Cookie value of a new session: HttpOnly (no script reads it),
 * SameSite=Strict (no cross-site request carries it), Secure over https, and a
 * Max-Age of the session's absolute lifetime (the idle limit is enforced by the server).
 */
export function sessionCookie(token: string, publicUrl: string, maxAgeSeconds: number): string {
  const secure = isHttps(publicUrl) ? "; Secure" : "";
  return `${sessionCookieName(publicUrl)}=${token}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${Math.max(0, Math.floor(maxAgeSeconds))}${secure}`;
}

/** The Set-Cookie value that removes the session cookie. */
export function clearedSessionCookie(publicUrl: string): string {
  const secure = isHttps(publicUrl) ? "; Secure" : "";
  return `${sessionCookieName(publicUrl)}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0${secure}`;
}
