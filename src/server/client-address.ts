import { isIPv6 } from "node:net";
import { addressBytes, canonicalAddress, contains, formatAddress, type Network } from "../net/ip-address.js";

export { addressBytes, canonicalAddress, clientBucketOf, formatAddress, type Network } from "../net/ip-address.js";

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

/** The reverse proxies whose X-Forwarded-For is believed (empty: none, the default). */
export type TrustedProxies = readonly Network[];

export const noTrustedProxies: TrustedProxies = [];

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
