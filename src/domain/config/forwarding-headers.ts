/**
 * Request headers by which the servers behind a proxy decide who the client
 * is or where a request goes (docs/security.md, "The gateway"). The gateway
 * sets the standard ones itself and passes none of these from a client,
 * unless the client is a trusted proxy; a member of an organisation may not
 * aim a secret-bearing request with the destination ones.
 */

/** Headers that choose the site or path a request reaches behind an upstream (ingresses, CDNs, frameworks). */
export const destinationHeaders: ReadonlySet<string> = new Set([
  "forwarded",
  "x-original-host",
  "x-host",
  "x-forwarded-server",
  "x-http-host-override",
  "x-original-url",
  "x-original-uri",
  "x-rewrite-url",
  "x-override-url",
  "x-envoy-original-path",
]);

/** Headers that claim the client's address, read first by many libraries. */
const clientAddressHeaders: ReadonlySet<string> = new Set([
  "x-real-ip",
  "x-client-ip",
  "true-client-ip",
  "cf-connecting-ip",
  "x-cluster-client-ip",
  "fastly-client-ip",
  "x-forwarded",
  "forwarded-for",
  "x-original-forwarded-for",
  "x-proxyuser-ip",
]);

/** A header name as CGI-style servers read it: lower case, `_` as `-`. */
export function headerKey(name: string): string {
  const lower = name.toLowerCase();
  return lower.includes("_") ? lower.replaceAll("_", "-") : lower;
}

/** Whether a header selects where a request goes behind an upstream. */
export function isDestinationHeader(name: string): boolean {
  return destinationHeaders.has(headerKey(name));
}

/**
 * Whether a header says where the request came from or what it first asked
 * for: X-Forwarded-*, Forwarded (RFC 7239), the client-address headers, and
 * the destination headers. From a client these are forgeries.
 */
export function isForwardingHeader(name: string): boolean {
  const key = headerKey(name);
  return key.startsWith("x-forwarded-") || destinationHeaders.has(key) || clientAddressHeaders.has(key);
}
