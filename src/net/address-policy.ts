import { addressBytes, contains, type Network } from "./ip-address.js";

// Where a webhook may be delivered (docs/security.md, "Events (webhooks)"): to public addresses only, unless
// WEBHOOKS_ALLOW_PRIVATE_NETWORKS=true. Special-purpose ranges per the IANA registries (RFC 6890 and its
// updates): none of them is a public receiver, and several reach the platform's own network or a cloud
// provider's metadata service (169.254.169.254).

function network(text: string, prefix: number): Network {
  const bytes = addressBytes(text);
  if (bytes === null) throw new Error(`not an address: ${text}`);
  return { bytes, prefix };
}

/** Loopback, private and link-local: reachable with WEBHOOKS_ALLOW_PRIVATE_NETWORKS=true. */
const privateNetworks: readonly Network[] = [
  network("10.0.0.0", 8), // RFC 1918
  network("172.16.0.0", 12), // RFC 1918
  network("192.168.0.0", 16), // RFC 1918
  network("100.64.0.0", 10), // RFC 6598, shared address space (carrier-grade NAT)
  network("127.0.0.0", 8), // RFC 1122, loopback
  network("169.254.0.0", 16), // RFC 3927, link-local (cloud metadata services live here)
  network("::1", 128), // RFC 4291, loopback
  network("fc00::", 7), // RFC 4193, unique local
  network("fe80::", 10), // RFC 4291, link-local
  network("fec0::", 10), // RFC 3879, site-local (deprecated, still routed inside some networks)
];

/** Never a receiver, whatever the setting: unspecified, "this network", multicast, reserved, documentation, translation. */
const forbiddenNetworks: readonly Network[] = [
  network("0.0.0.0", 8), // RFC 1122, "this network"
  network("192.0.0.0", 24), // RFC 6890, IETF protocol assignments
  network("192.0.2.0", 24), // RFC 5737, documentation
  network("192.88.99.0", 24), // RFC 7526, 6to4 relay anycast (deprecated)
  network("198.18.0.0", 15), // RFC 2544, benchmarking
  network("198.51.100.0", 24), // RFC 5737, documentation
  network("203.0.113.0", 24), // RFC 5737, documentation
  network("224.0.0.0", 4), // RFC 5771, multicast
  network("240.0.0.0", 4), // RFC 1112, reserved (and 255.255.255.255, broadcast)
  network("::", 128), // RFC 4291, unspecified
  // IPv6 forms that carry an IPv4 address in their last 32 bits: where a host, a tunnel or a translator
  // honours them, they reach that IPv4 address, private or loopback ones included.
  network("::", 96), // RFC 4291 2.5.5.1, IPv4-compatible (::a.b.c.d, deprecated); ::1 is loopback, above
  network("::ffff:0:0:0", 96), // RFC 2765, IPv4-translated (::ffff:0:a.b.c.d)
  network("64:ff9b::", 96), // RFC 6052, IPv4/IPv6 translation (would reach any IPv4 address, private ones too)
  network("64:ff9b:1::", 48), // RFC 8215, local-use translation
  network("100::", 64), // RFC 6666, discard
  network("2001::", 32), // RFC 4380, Teredo (embeds the IPv4 addresses of its server and client)
  network("2001:db8::", 32), // RFC 3849, documentation
  network("2002::", 16), // RFC 3056, 6to4 (embeds any IPv4 address)
  network("ff00::", 8), // RFC 4291, multicast
];

/** ::1 lies in ::/96 (IPv4-compatible) but is loopback: a private address, not a special one. */
const ipv6Loopback = network("::1", 128);

/** Why an address may not receive a webhook, or null when it may. */
export function refusedAddress(address: string, allowPrivate: boolean): string | null {
  const bytes = addressBytes(address);
  if (bytes === null) return `${address} is not an IP address`;
  if (!contains(ipv6Loopback, bytes) && forbiddenNetworks.some((net) => contains(net, bytes)))
    return `${address} is a special-purpose address that never receives webhooks`;
  if (!allowPrivate && privateNetworks.some((net) => contains(net, bytes))) {
    return `${address} is a loopback, private or link-local address (allowed only with WEBHOOKS_ALLOW_PRIVATE_NETWORKS=true)`;
  }
  return null;
}
