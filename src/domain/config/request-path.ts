/**
 * The one canonical form of a request path (docs/gateway.md, "One canonical
 * path"; docs/security.md, "The gateway"). A path is read once, in one pass,
 * into two strings that always go together:
 *
 * - `forward`, what the upstream receives: percent-encoded unreserved
 *   characters decoded (RFC 3986 section 6.2.2.2: `/%61dmin` is `/admin`),
 *   every other percent-encoding kept with upper-case hex, every character a
 *   path may not hold as it is (a space, a raw non-ASCII byte) encoded, runs
 *   of slashes collapsed, `;` parameters kept.
 * - `match`, what routes and rules are matched on: `forward` as the most
 *   liberal of the servers behind a gateway would read it. Encoded
 *   sub-delimiters, `:` and `@` are decoded (`%21` is `!`); `%2F` is a
 *   separator like `/` (many frameworks decode it); `;` parameters are left
 *   out of each segment (servlet containers ignore them: `/admin;x/y` is
 *   `/admin/y` to Tomcat). What stays encoded (`%25`, `%3F`, `%23`, `%3B`,
 *   controls, non-ASCII) becomes one character of the private-use block
 *   U+E000-U+E0FF, which no request line holds (Node reads targets as
 *   Latin-1), so the form has no `%` and the mapping is one-to-one.
 *
 * Refused (undefined): a path that does not start with `/`, broken
 * percent-encoding, a backslash raw or encoded (`\` is `/` to a WHATWG URL
 * parser and an error to others), and a `.` or `..` segment in either form
 * (also `%2e%2e`, `..;x` and `..%2F`): each of these is a path an upstream
 * could resolve to one the gateway did not judge. So whichever way an
 * upstream reads `forward` (keeping `%2F` or decoding it, with or without
 * parameters), it finds the route and rules that `match` found.
 */
export interface RequestPath {
  /** The matching form: route table keys and rule prefixes are in it. */
  readonly match: string;
  /**
   * `match` as a server that neither ignores parameters nor decodes `%2F`
   * reads the path (WHATWG, Express): the same string unless the path holds
   * a `;` or a `%2F`. An allow rule must match both forms.
   */
  readonly literal: string;
  /** The path sent upstream (the query is added by the caller). */
  readonly forward: string;
}

/** Characters a path may hold as they are, with one meaning in both forms: unreserved, sub-delims but ";", ":", "@", "/". */
const plainPath = /^[A-Za-z0-9\-._~!$&'()*+,=:@/]*$/;
const dotSegment = /(?:^|\/)\.\.?(?:\/|$)/;

/** Byte classes of an encoded or raw ASCII character. */
const unreservedClass = 1;
/** Sub-delims (";" aside), ":" and "@": raw in both forms when sent raw; decoded for matching when sent encoded. */
const delimiterClass = 2;
const unreservedOrDelimiter = new Uint8Array(128);
for (const c of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
  unreservedOrDelimiter[c.charCodeAt(0)] = unreservedClass;
for (const c of "!$&'()*+,=:@") unreservedOrDelimiter[c.charCodeAt(0)] = delimiterClass;

const encodedBase = 0xe000;
const hex = "0123456789ABCDEF";

function hexValue(code: number): number {
  if (code >= 48 && code <= 57) return code - 48;
  if (code >= 65 && code <= 70) return code - 55;
  if (code >= 97 && code <= 102) return code - 87;
  return -1;
}

function encoded(byte: number): string {
  return `%${hex[byte >> 4]}${hex[byte & 15]}`;
}

const collapse = (path: string) => (path.includes("//") ? path.replace(/\/{2,}/g, "/") : path);

/**
 * The two forms of a path (no query), or undefined when the gateway refuses
 * it (see above). A configured path goes through the same function, so a
 * route's path and a request's are compared in one form.
 */
export function readRequestPath(path: string): RequestPath | undefined {
  if (path.charCodeAt(0) !== 47) return undefined;
  if (plainPath.test(path)) {
    // The common case: nothing to decode, no parameters; both forms are the path.
    const form = collapse(path);
    return dotSegment.test(form) ? undefined : { match: form, literal: form, forward: form };
  }
  let match = "";
  let literal = "";
  let forward = "";
  /** Inside a `;` parameter: the rest of the segment is forwarded but not matched. */
  let parameter = false;
  for (let i = 0; i < path.length; i++) {
    const code = path.charCodeAt(i);
    if (code === 37 /* % */) {
      const high = hexValue(path.charCodeAt(i + 1));
      const low = hexValue(path.charCodeAt(i + 2));
      if (high < 0 || low < 0) return undefined;
      const byte = high * 16 + low;
      i += 2;
      if (byte === 92 /* \ */) return undefined;
      const kind = byte < 128 ? unreservedOrDelimiter[byte] : 0;
      if (kind === unreservedClass) {
        const c = String.fromCharCode(byte);
        forward += c;
        literal += c;
        if (!parameter) match += c;
      } else if (byte === 47 /* %2F */) {
        forward += "%2F";
        literal += String.fromCharCode(encodedBase + byte);
        parameter = false;
        match += "/";
      } else {
        forward += encoded(byte);
        const c = kind === delimiterClass ? String.fromCharCode(byte) : String.fromCharCode(encodedBase + byte);
        literal += c;
        if (!parameter) match += c;
      }
    } else if (code === 47 /* / */) {
      forward += "/";
      match += "/";
      literal += "/";
      parameter = false;
    } else if (code === 59 /* ; */) {
      forward += ";";
      literal += ";";
      parameter = true;
    } else if (code === 92 /* \ */) {
      return undefined;
    } else if (code < 128 && unreservedOrDelimiter[code] !== 0) {
      forward += path[i];
      literal += path[i];
      if (!parameter) match += path[i];
    } else if (code <= 0xff) {
      // A character a path should have encoded (a space, a raw non-ASCII byte): the same as its encoding.
      forward += encoded(code);
      literal += String.fromCharCode(encodedBase + code);
      if (!parameter) match += String.fromCharCode(encodedBase + code);
    } else {
      return undefined;
    }
  }
  forward = collapse(forward);
  match = collapse(match);
  literal = collapse(literal);
  if (dotSegment.test(match) || dotSegment.test(forward)) return undefined;
  return { match, literal, forward };
}

/** Why a path is refused, for a message (undefined: it is not). Slower than readRequestPath; for errors only. */
export function pathRefusal(path: string): string | undefined {
  if (readRequestPath(path) !== undefined) return undefined;
  if (path.charCodeAt(0) !== 47) return 'a path starts with "/"';
  if (/%(?![0-9A-Fa-f]{2})/.test(path)) return 'a "%" must start a percent-encoded byte such as %20';
  if (path.includes("\\") || /%5c/i.test(path)) return "a path cannot hold a backslash (\\ or %5C): upstreams disagree on what it means";
  if (/[^\x00-\xff]/.test(path)) return "a path holds only ASCII; percent-encode other characters as UTF-8 bytes";
  return 'a path cannot hold "." or ".." segments (also encoded, or followed by ";" parameters)';
}

/** The path of a request target in origin form (`/a/b?q`), without its query. */
export function pathOfTarget(target: string): string {
  const query = target.indexOf("?");
  return query === -1 ? target : target.slice(0, query);
}
