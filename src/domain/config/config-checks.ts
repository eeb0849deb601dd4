import { pathRefusal, readRequestPath } from "./request-path.js";
import { isIPv4, isIPv6 } from "node:net";

/**
 * Checks of single values of a configuration document. Each answers undefined
 * when the value is fine, else what is wrong and what is allowed.
 */

export const namePattern = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** How a value is shown in a message: short, and never a long or multi-line string. */
export function describeValue(value: unknown): string {
  if (value === null || value === undefined) return "nothing";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "object") return "a mapping";
  if (typeof value === "string") {
    if (value.length > 64 || /[\x00-\x1f\x7f]/.test(value)) return "a string";
    return JSON.stringify(value);
  }
  return `${typeof value === "number" ? "the number" : "the boolean"} ${String(value)}`;
}

export function checkName(value: string): string | undefined {
  if (namePattern.test(value)) return undefined;
  const hint = value
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, "-")
    .replace(/^-+/, "")
    .slice(0, 63);
  const suggestion = hint && namePattern.test(hint) && hint !== value ? ` (e.g. "${hint}")` : "";
  return `invalid name ${describeValue(value)}: use 1 to 63 lower-case letters, digits and hyphens, starting with a letter or digit${suggestion}`;
}

const labelPattern = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
/** Dot-separated labels of labelPattern, tested in one pass (no array of labels per hostname). */
const hostnamePattern = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;

/** A DNS hostname (RFC 1123): lower-case letters, digits and hyphens, dot-separated. */
/** A domain's name: a hostname, or `*.` and a hostname (one wildcard label, leftmost). */
export function checkDomainName(value: string): string | undefined {
  if (value.startsWith("*.")) {
    const rest = value.slice(2);
    if (rest.includes("*"))
      return `${describeValue(value)} has more than one "*": a wildcard domain is "*." and a hostname (e.g. "*.example.com")`;
    const problem = checkHostname(rest);
    if (problem) return problem;
    if (!rest.includes("."))
      return `${describeValue(value)} would cover every name of a top-level domain: write "*." and a hostname with a dot (e.g. "*.example.com")`;
    return undefined;
  }
  if (value.includes("*")) return `${describeValue(value)}: a "*" is only allowed as the whole first label (e.g. "*.example.com")`;
  return checkHostname(value);
}

export function checkHostname(value: string): string | undefined {
  if (value.length > 0 && value.length <= 253 && hostnamePattern.test(value)) return undefined;
  const shown = describeValue(value);
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(value) || value.includes("/") || value.includes(":")) {
    return `${shown} is not a hostname: write the host only, without scheme, port or path (e.g. "api.example.com")`;
  }
  if (value !== value.toLowerCase() && checkHostname(value.toLowerCase()) === undefined) {
    return `hostnames are written in lower case: use "${value.toLowerCase()}"`;
  }
  if (value.length === 0 || value.length > 253 || !value.split(".").every((label) => labelPattern.test(label))) {
    return `${shown} is not a valid hostname: dot-separated labels of 1 to 63 lower-case letters, digits and hyphens (not at either end of a label), 253 characters at most`;
  }
  return undefined;
}

// RFC 3986 pchar: unreserved / pct-encoded / sub-delims / ":" / "@" ("*" has a meaning of its own here).
const pathCharacters = /^[A-Za-z0-9\-._~!$&'()+,;=:@/%]*$/;
/** A "." or ".." segment. */
const dotSegment = /(?:^|\/)\.\.?(?:\/|$)/;

/** A route path: exact, or a prefix when it ends in "/*". With `prefixOnly`, a rule's path_prefix (no "*"). */
export function checkPath(value: string, options: { wildcard: boolean }): string | undefined {
  const example = options.wildcard ? '"/plants" or "/plants/*"' : '"/admin"';
  if (!value.startsWith("/")) return `${describeValue(value)} is not a path: it starts with "/" (e.g. ${example})`;
  if (value.length > 2048) return "is longer than 2048 characters";
  if (value.includes("?") || value.includes("#")) return "a path has no query (?) or fragment (#)";
  const base = options.wildcard && value.endsWith("/*") ? value.slice(0, -1) : value;
  if (base.includes("*")) {
    return options.wildcard
      ? '"*" is only allowed as a trailing "/*", which makes the path a prefix (e.g. "/plants/*")'
      : '"*" is not allowed: path_prefix is already a prefix';
  }
  if (!pathCharacters.test(base)) {
    return `${describeValue(value)} has characters a URL path cannot hold: percent-encode them (RFC 3986), e.g. a space as %20`;
  }
  if (/%(?![0-9A-Fa-f]{2})/.test(base)) return 'a "%" must start a percent-encoded byte such as %20';
  if (dotSegment.test(base)) {
    return 'a path cannot hold "." or ".." segments';
  }
  // What a request path may not be, a configured one may not either (request-path.ts: `..;x`, `%2e%2e`, `%5C`).
  return readRequestPath(base) === undefined ? pathRefusal(base) : undefined;
}

/** A URL as messages show it: without the password of its user information, if any. */
function describeUrl(value: string): string {
  return describeValue(value.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/?#@]*@/i, "$1…@"));
}

/** An upstream: an absolute http or https URL, without credentials, query or fragment. */
export function checkUpstream(value: string): string | undefined {
  const shown = () => describeUrl(value);
  if (!/^https?:\/\//.test(value))
    return `${shown()} is not an upstream URL: it starts with http:// or https:// (e.g. "http://127.0.0.1:8081")`;
  if (value.length > 2048) return "is longer than 2048 characters";
  if (/[\s\x00-\x1f\x7f]/.test(value)) return "a URL cannot hold spaces or control characters: percent-encode them";
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `${shown()} is not a valid URL`;
  }
  if (url.hostname === "") return `${shown()} has no host`;
  if (url.username !== "" || url.password !== "")
    return "an upstream URL cannot carry credentials (user:password@); use a plugin to add them";
  if (value.includes("?")) return "an upstream URL cannot carry a query (?)";
  if (value.includes("#")) return "an upstream URL cannot carry a fragment (#)";
  return undefined;
}

/** An IPv4 or IPv6 CIDR block whose host bits are zero. */
export function checkCidr(value: string): string | undefined {
  const shown = describeValue(value);
  const parts = value.split("/");
  const [address = "", bits] = parts;
  if (parts.length !== 2 || bits === undefined)
    return `${shown} is not a CIDR block: write address/prefix-length (e.g. "10.0.0.0/8" or "2001:db8::/32")`;
  const v4 = isIPv4(address);
  const v6 = !v4 && isIPv6(address) && !address.includes("%");
  if (!v4 && !v6) return `${shown} is not a CIDR block: "${address.slice(0, 45)}" is not an IPv4 or IPv6 address`;
  const max = v4 ? 32 : 128;
  if (!/^(0|[1-9][0-9]{0,2})$/.test(bits) || Number(bits) > max)
    return `${shown}: the prefix length must be a whole number from 0 to ${max}`;
  const prefix = Number(bits);
  const width = BigInt(max);
  const numeric = v4 ? ipv4ToBigInt(address) : ipv6ToBigInt(address);
  const hostMask = (1n << (width - BigInt(prefix))) - 1n;
  if ((numeric & hostMask) !== 0n) {
    const network = numeric & ~hostMask & ((1n << width) - 1n);
    const written = v4 ? bigIntToIpv4(network) : bigIntToIpv6(network);
    return `${shown} has host bits set: did you mean "${written}/${prefix}"?`;
  }
  return undefined;
}

function ipv4ToBigInt(address: string): bigint {
  return address.split(".").reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
}

function bigIntToIpv4(value: bigint): string {
  return [24n, 16n, 8n, 0n].map((shift) => String((value >> shift) & 255n)).join(".");
}

function ipv6ToBigInt(address: string): bigint {
  let text = address;
  // An embedded IPv4 tail (::ffff:10.0.0.1) stands for the last two groups.
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4?.[1]) {
    const n = ipv4ToBigInt(v4[1]);
    text = `${text.slice(0, -v4[1].length)}${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
  }
  const [head = "", tail] = text.split("::");
  const headGroups = head === "" ? [] : head.split(":");
  const tailGroups = tail === undefined || tail === "" ? [] : tail.split(":");
  const missing = 8 - headGroups.length - tailGroups.length;
  const groups = [...headGroups, ...Array<string>(tail === undefined ? 0 : missing).fill("0"), ...tailGroups];
  return groups.reduce((acc, group) => (acc << 16n) | BigInt(parseInt(group, 16)), 0n);
}

function bigIntToIpv6(value: bigint): string {
  const groups: string[] = [];
  for (let shift = 112n; shift >= 0n; shift -= 16n) groups.push(((value >> shift) & 0xffffn).toString(16));
  // Compress the longest run of zero groups (RFC 5952).
  let best = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== "0") {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === "0") j++;
    if (j - i > bestLength) {
      best = i;
      bestLength = j - i;
    }
    i = j;
  }
  if (best === -1) return groups.join(":");
  return `${groups.slice(0, best).join(":")}::${groups.slice(best + bestLength).join(":")}`;
}

// RFC 9110 section 5.1: a field name is a token.
const tokenPattern = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

export function checkHeaderName(value: string): string | undefined {
  if (value.length === 0 || value.length > 256 || !tokenPattern.test(value)) {
    return `${describeValue(value)} is not an HTTP header name: letters, digits and !#$%&'*+-.^_\`|~ only (e.g. "x-request-id")`;
  }
  return undefined;
}

/** A header value: visible ASCII, spaces and tabs, without leading or trailing whitespace (RFC 9110 section 5.5). */
export function checkHeaderValue(value: string): string | undefined {
  if (value.length > 8192) return "a header value is at most 8192 characters";
  if (/[\r\n\x00]/.test(value)) return "a header value cannot contain line breaks or NUL";
  if (/[^\t\x20-\x7e]/.test(value)) return "a header value is visible ASCII characters, spaces and tabs only";
  if (/^[ \t]|[ \t]$/.test(value)) return "a header value has no leading or trailing whitespace";
  return undefined;
}

/** A CORS origin ("*" or scheme://host[:port]). */
export function checkOrigin(value: string): string | undefined {
  if (value === "*") return undefined;
  const hint = 'an origin is scheme, host and optional port, e.g. "https://app.example.com", or "*"';
  if (!/^https?:\/\//.test(value)) return `${describeUrl(value)} is not an origin: ${hint}`;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `${describeUrl(value)} is not an origin: ${hint}`;
  }
  if (url.origin !== value) {
    return url.origin === "null"
      ? `${describeUrl(value)} is not an origin: ${hint}`
      : `${describeUrl(value)} is not an origin as browsers send it: use "${url.origin}" (${hint})`;
  }
  return undefined;
}

/** A cookie name: a token (RFC 6265 section 4.1.1), compared as written (cookie names are case-sensitive). */
export function checkCookieName(value: string): string | undefined {
  if (value.length === 0 || value.length > 256 || !tokenPattern.test(value)) {
    return `${describeValue(value)} is not a cookie name: letters, digits and !#$%&'*+-.^_\`|~ only (e.g. "session")`;
  }
  return undefined;
}

/** A whole number from min to max; `unit` follows the bounds in the message (e.g. "(10 GiB)"). */
export function checkWholeNumber(value: unknown, min: number, max: number, unit = ""): string | undefined {
  if (typeof value === "number" && Number.isInteger(value) && value >= min && value <= max) return undefined;
  return `must be a whole number from ${min.toLocaleString("en-US")} to ${max.toLocaleString("en-US")}${unit}, got ${describeValue(value)}`;
}
