import { isIPv4, isIPv6 } from "node:net";

// IP addresses as bytes: parsing, canonical text, networks and the per-client bucket. Pure functions, no I/O;
// shared by the server (client addresses), the domain (limits) and outbound requests (webhook address checks).

/** One IPv4 or IPv6 network: 4 or 16 bytes and a prefix length. */
export interface Network {
  readonly bytes: Uint8Array;
  readonly prefix: number;
}

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

/** Whether `bytes` lies in `network` (same family). */
export function contains(network: Network, bytes: Uint8Array): boolean {
  if (network.bytes.length !== bytes.length) return false;
  let bits = network.prefix;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if (((network.bytes[i] ?? 0) & mask) !== ((bytes[i] ?? 0) & mask)) return false;
  }
  return true;
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
