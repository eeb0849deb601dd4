/**
 * The form of a path that routes and `path_prefix` rules are matched on, the
 * same for a configured path and for a request's.
 *
 * - Percent-encoded unreserved characters are decoded (RFC 3986 section
 *   6.2.2.2: `/%61dmin` is `/admin`), so encoding a letter does not slip past
 *   a rule; every other percent-encoded byte stays distinct from the character
 *   it encodes (`%2F` is not a separator).
 * - Runs of slashes count as one (`//admin` is `/admin`), as most upstream
 *   servers read them.
 * - A path with `.` or `..` segments (also encoded) is refused: an upstream
 *   would resolve it to a path other than the one routed and ruled on.
 *
 * Each encoded byte that stays encoded is written as one character of the
 * private-use block U+E000-U+E0FF. A request line never holds those (Node
 * reads request targets as Latin-1), so the form has no `%` and no `:` or `*`
 * meaning anything to the radix router, and the mapping is one-to-one.
 */

/** Characters a path may hold as they are: RFC 3986 pchar and "/", less "%". */
const plainPath = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/]*$/;
const dotSegment = /(?:^|\/)\.\.?(?:\/|$)/;

const unreserved = new Uint8Array(128);
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~") unreserved[c.charCodeAt(0)] = 1;
const pathChar = new Uint8Array(128);
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/") pathChar[c.charCodeAt(0)] = 1;

const encodedBase = 0xe000;

function hexValue(code: number): number {
  if (code >= 48 && code <= 57) return code - 48;
  if (code >= 65 && code <= 70) return code - 55;
  if (code >= 97 && code <= 102) return code - 87;
  return -1;
}

/**
 * The matching form of a path (no query), or undefined when the path is
 * malformed (broken percent-encoding, a dot segment, not starting with "/").
 */
export function canonicalPath(path: string): string | undefined {
  if (path.charCodeAt(0) !== 47) return undefined;
  if (plainPath.test(path)) {
    // The common case: nothing to decode.
    const collapsed = path.includes("//") ? path.replace(/\/{2,}/g, "/") : path;
    return dotSegment.test(collapsed) ? undefined : collapsed;
  }
  let out = "";
  for (let i = 0; i < path.length; i++) {
    const code = path.charCodeAt(i);
    if (code === 37) {
      const high = hexValue(path.charCodeAt(i + 1));
      const low = hexValue(path.charCodeAt(i + 2));
      if (high < 0 || low < 0) return undefined;
      const byte = high * 16 + low;
      out += byte < 128 && unreserved[byte] === 1 ? String.fromCharCode(byte) : String.fromCharCode(encodedBase + byte);
      i += 2;
    } else if (code < 128 && pathChar[code] === 1) {
      out += path[i];
    } else if (code <= 0xff) {
      // A character a path should have encoded (a space, a raw non-ASCII byte): the same as its encoding.
      out += String.fromCharCode(encodedBase + code);
    } else {
      return undefined;
    }
  }
  const collapsed = out.includes("//") ? out.replace(/\/{2,}/g, "/") : out;
  return dotSegment.test(collapsed) ? undefined : collapsed;
}

/** The path of a request target in origin form (`/a/b?q`), without its query. */
export function pathOfTarget(target: string): string {
  const query = target.indexOf("?");
  return query === -1 ? target : target.slice(0, query);
}
