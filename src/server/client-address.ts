import { isIPv4, isIPv6 } from "node:net";

/**
 * The client's address, for per-address limits and lockout: the TCP peer, or,
 * when the peer is a reverse proxy the operator trusts (TRUSTED_PROXIES), the
 * address that proxy saw, read from X-Forwarded-For. Pure functions, no I/O.
 *
 * X-Forwarded-For is a list every proxy appends the address it received the
 * request from to; anything left of what a trusted proxy appended was written
 * by someone else (possibly the client) and proves nothing. So the list is read
 * from the right, skipping addresses that are themselves trusted proxies, and
 * the first address that is not one is the client (OWASP, and the rule nginx's
 * `real_ip_recursive on` and Express's `trust proxy` apply). A client can put
 * anything it likes in the header; that only matters when a trusted peer relays it.
 */

/** One IPv4 or IPv6 network: 4 or 16 bytes and a prefix length. */
export interface Network {
  readonly bytes: Uint8Array;
  readonly prefix: number;
}

/** The reverse proxies whose X-Forwarded-For is believed (empty: none, the default). */
export type TrustedProxies = readonly Network[];

export const noTrustedProxies: TrustedProxies = [];

/** The 4 or 16 bytes of an IP address (IPv4-mapped IPv6 gives the IPv4 bytes), or null. */
export function addressBytes(text: string): Uint8Array | null {
  if (isIPv4(text)) return Uint8Array.from(text.split(".").map(Number));
  const zone = text.indexOf("%");
  const address = zone === -1 ? text : text.slice(0, zone);
  if (!isIPv6(address)) return null;
  const bytes = new Uint8Array(16);
  let head = address;
  let tailIpv4: number[] = [];
  // A dotted IPv4 tail ("::ffff:192.0.2.1") fills the last 32 bits.
  const lastColon = head.lastIndexOf(":");
  if (head.slice(lastColon + 1).includes(".")) {
    tailIpv4 = head
      .slice(lastColon + 1)
      .split(".")
      .map(Number);
    head = `${head.slice(0, lastColon + 1)}0:0`;
  }
  const [left = "", right] = head.split("::");
  const leftGroups = left === "" ? [] : left.split(":");
  const rightGroups = right === undefined || right === "" ? [] : right.split(":");
  const groups = [...leftGroups, ...Array<string>(8 - leftGroups.length - rightGroups.length).fill("0"), ...rightGroups];
  groups.forEach((group, i) => {
    const value = Number.parseInt(group, 16);
    bytes[2 * i] = value >> 8;
    bytes[2 * i + 1] = value & 0xff;
  });
  if (tailIpv4.length === 4) bytes.set(tailIpv4, 12);
  // ::ffff:a.b.c.d is an IPv4 client of a dual-stack socket: the same client as a.b.c.d.
  if (bytes.subarray(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff) return bytes.slice(12);
  return bytes;
}

/** The text of 4 or 16 address bytes: dotted IPv4, or IPv6 as RFC 5952 writes it (lower case, longest zero run as ::). */
export function formatAddress(bytes: Uint8Array): string {
  if (bytes.length === 4) return bytes.join(".");
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i] ?? 0) << 8) | (bytes[i + 1] ?? 0));
  // RFC 5952 section 4.2: the longest run of two or more zero groups (the first of equals) becomes "::".
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart === -1) return hex.join(":");
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLength).join(":")}`;
}

/** The canonical text of an address (so one client is one key however it was written), or null when it is not one. */
export function canonicalAddress(text: string): string | null {
  const bytes = addressBytes(text);
  return bytes === null ? null : formatAddress(bytes);
}

/**
 * Parses TRUSTED_PROXIES: comma-separated IPv4 and IPv6 networks
 * (`10.0.0.0/8`, `2001:db8::/32`) or single addresses (`192.0.2.7`, `::1`).
 * Lists every entry that is not one, as the other settings do.
 */
export function parseTrustedProxies(raw: string | undefined): { proxies: TrustedProxies; problems: string[] } {
  const proxies: Network[] = [];
  const problems: string[] = [];
  for (const part of (raw ?? "").split(",")) {
    const entry = part.trim();
    if (entry === "") continue;
    const slash = entry.indexOf("/");
    const bytes = addressBytes(slash === -1 ? entry : entry.slice(0, slash));
    const prefixText = slash === -1 ? undefined : entry.slice(slash + 1);
    if (bytes === null || (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText))) {
      problems.push(`"${entry}" is not an IP address or network (e.g. 10.0.0.0/8, 192.0.2.7 or 2001:db8::/32)`);
      continue;
    }
    const bits = bytes.length * 8;
    // An IPv4-mapped network (::ffff:10.0.0.0/104) means the IPv4 network it maps.
    const mappedShift = bytes.length === 4 && slash !== -1 && isIPv6(entry.slice(0, slash)) ? 96 : 0;
    const prefix = prefixText === undefined ? bits : Number(prefixText) - mappedShift;
    if (prefix < 0 || prefix > bits) {
      problems.push(`"${entry}": the prefix length must be 0 to ${bits + mappedShift}`);
      continue;
    }
    const network = { bytes, prefix };
    if (!hostBitsZero(network)) {
      problems.push(`"${entry}": the bits after the prefix must be zero (did you mean ${formatAddress(maskOf(network))}/${prefixText}?)`);
      continue;
    }
    proxies.push(network);
  }
  return { proxies, problems };
}

function maskOf(network: Network): Uint8Array {
  return network.bytes.map((byte, i) => {
    const kept = Math.max(0, Math.min(8, network.prefix - 8 * i));
    return byte & ((0xff << (8 - kept)) & 0xff);
  });
}

function hostBitsZero(network: Network): boolean {
  const masked = maskOf(network);
  return masked.every((byte, i) => byte === network.bytes[i]);
}

function contains(network: Network, bytes: Uint8Array): boolean {
  if (network.bytes.length !== bytes.length) return false;
  let bits = network.prefix;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if (((network.bytes[i] ?? 0) & mask) !== ((bytes[i] ?? 0) & mask)) return false;
  }
  return true;
}

/** Whether an address lies in one of the trusted networks. */
export function isTrustedProxy(address: string, trusted: TrustedProxies): boolean {
  const bytes = addressBytes(address);
  return bytes !== null && trusted.some((network) => contains(network, bytes));
}

/** An X-Forwarded-For entry: a bare address, `[v6]`, `[v6]:port` or `v4:port`; null when it is none of those. */
function forwardedAddress(entry: string): string | null {
  let text = entry.trim();
  if (text.startsWith("[")) {
    const end = text.indexOf("]");
    if (end === -1) return null;
    text = text.slice(1, end);
  } else if (/^[0-9.]+:\d+$/.test(text)) {
    text = text.slice(0, text.indexOf(":"));
  }
  return canonicalAddress(text);
}

/** The most X-Forwarded-For entries read: a real chain of proxies is a handful long. */
const maxForwardedHops = 32;

/**
 * The client's address: the TCP peer's, unless the peer is a trusted proxy;
 * then the rightmost X-Forwarded-For address that is not itself a trusted
 * proxy (or, when every listed address is one, the leftmost of them). An
 * entry that is not an address ends the walk at the hop right of it, which a
 * trusted proxy wrote.
 */
export function clientAddressOf(
  peer: string | undefined,
  forwardedFor: string | string[] | undefined,
  trusted: TrustedProxies,
): string | undefined {
  // No proxy trusted (the default): the peer, as the socket gave it.
  if (trusted.length === 0 || peer === undefined) return peer;
  const peerAddress = canonicalAddress(peer) ?? peer;
  if (forwardedFor === undefined || !isTrustedProxy(peerAddress, trusted)) return peerAddress;
  const entries = (Array.isArray(forwardedFor) ? forwardedFor.join(",") : forwardedFor).split(",");
  let client = peerAddress;
  for (let i = entries.length - 1, hops = 0; i >= 0 && hops < maxForwardedHops; i--, hops++) {
    const address = forwardedAddress(entries[i] ?? "");
    if (address === null) break;
    client = address;
    if (!isTrustedProxy(address, trusted)) break;
  }
  return client;
}

/**
 * The key under which limits and lockout count a client address. An IPv4
 * address is itself; an IPv6 address counts as its /64, because one host
 * (one home or one virtual machine) usually holds a whole /64 and could
 * otherwise pick a fresh address for every attempt (RFC 4291 section 2.5.1:
 * interface identifiers are 64 bits). Anything else (no address, a test
 * double) is kept as it is.
 */
export function clientBucketOf(address: string | undefined): string {
  if (address === undefined || address === "") return "unknown";
  const bytes = addressBytes(address);
  if (bytes === null) return address;
  if (bytes.length === 4) return formatAddress(bytes);
  const prefix = new Uint8Array(16);
  prefix.set(bytes.subarray(0, 8));
  return `${formatAddress(prefix)}/64`;
}
