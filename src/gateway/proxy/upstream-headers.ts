import type { IncomingHttpHeaders } from "node:http";
import { isForwardingHeader } from "../../domain/config/forwarding-headers.js";

export { isForwardingHeader };

/**
 * The headers of the request the upstream receives (docs/gateway.md,
 * "Headers towards the upstream"; docs/security.md, "The gateway"): the
 * client's, less what belongs to this hop or could make the upstream read a
 * different request than the one the plugins judged, plus what the gateway
 * and its plugins set.
 */

/**
 * Request headers never forwarded as the client sent them: hop-by-hop fields
 * (RFC 9110 section 7.6.1; Proxy-Authorization is meant for this hop too),
 * the framing and expectation fields the gateway's own server consumed, and
 * the fields the gateway sets itself.
 */
export const alwaysDropped: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "http2-settings",
  "expect",
  "host",
  "x-request-id",
]);

/**
 * Headers that ask a framework to treat the request as another method
 * (Express method-override, Symfony, ASP.NET): on a route that serves some
 * methods only, they would let a POST act as a DELETE the route refuses.
 */
const methodOverrides: ReadonlySet<string> = new Set(["x-http-method-override", "x-http-method", "x-method-override"]);

/** What the route decides about the upstream request's headers, compiled once per revision. */
export interface HeaderPolicy {
  /** Names never forwarded as sent (lower case, `_` as `-`): alwaysDropped plus those a plugin sets, removes or reads as a credential to hide. */
  readonly dropHeaders: ReadonlySet<string>;
  /** Names a plugin adds to, by their key (`_` as `-`): the client's own value is kept only under the very name the plugin adds. */
  readonly addedHeaders: ReadonlyMap<string, string>;
  /** Whether the route serves some methods only (method-override headers are then dropped). */
  readonly restrictsMethods: boolean;
  /** Headers that carry the identity id of a verified session. */
  readonly identityHeaders: readonly string[];
  readonly rewrites: readonly HeaderRewrite[];
}

/** One request-headers plugin with its secret references resolved: what to do to the upstream request. */
export interface HeaderRewrite {
  readonly remove: readonly string[];
  /** [name, value, name, value, ...] */
  readonly set: readonly string[];
  readonly add: readonly string[];
}

/** Facts of the exchange that the forwarding headers carry. */
export interface ForwardingFacts {
  /** The TCP peer address. */
  readonly peer: string;
  /** Whether the peer is a proxy the operator trusts (TRUSTED_PROXIES): its forwarding headers are kept. */
  readonly trustedPeer: boolean;
  readonly proto: "http" | "https";
  /** The authority the request was routed by (Host, or an absolute-form target's). */
  readonly authority: string | undefined;
  readonly requestId: string;
  /** `1.1 gatehouse`, `1.0 gatehouse` or `2 gatehouse`: the protocol the request arrived with (RFC 9110 section 7.6.3). */
  readonly via: string;
  readonly identityId: string | undefined;
}

/**
 * Field names a Connection header lists as hop-by-hop (RFC 9110 section
 * 7.6.1), besides the usual "keep-alive" and "close" that name no field.
 */
export function connectionOptions(value: string | string[] | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  const text = Array.isArray(value) ? value.join(",") : value;
  if (text.length <= 10) {
    const lower = text.toLowerCase();
    if (lower === "keep-alive" || lower === "close") return undefined;
  }
  const names: string[] = [];
  for (const part of text.split(",")) {
    const name = part.trim().toLowerCase();
    if (name !== "" && name !== "close" && name !== "keep-alive") names.push(name);
  }
  return names.length === 0 ? undefined : names;
}

function append(out: Record<string, string | string[]>, name: string, value: string): void {
  const existing = out[name];
  out[name] = existing === undefined ? value : Array.isArray(existing) ? [...existing, value] : [existing, value];
}

/**
 * The client's headers as they go upstream, before the gateway's own and the
 * plugins' (header rules judge this view: rules.ts), then completed by
 * `completeHeaders`.
 *
 * A name with `_` is dropped whatever it is (as nginx does by default): WSGI,
 * Rack and PHP read `x_identity_id` as `x-identity-id`, so such a name could
 * stand for any header the gateway owns, or one a rule judged under its other
 * spelling.
 */
export function clientHeaders(source: IncomingHttpHeaders, policy: HeaderPolicy, trusted: boolean): Record<string, string | string[]> {
  const drop = policy.dropHeaders;
  const added = policy.addedHeaders;
  const named = connectionOptions(source.connection);
  const out: Record<string, string | string[]> = {};
  for (const name in source) {
    const value = source[name];
    // HTTP/2 pseudo-header fields (":authority", ...) are of this hop; a name with "_" is never forwarded (below).
    if (value === undefined || name.includes("_") || name.charCodeAt(0) === 58) continue;
    if (drop.has(name) || named?.includes(name)) continue;
    if (!trusted && isForwardingHeader(name)) continue;
    if (policy.restrictsMethods && methodOverrides.has(name)) continue;
    if (added.size > 0) {
      const adds = added.get(name);
      if (adds !== undefined && adds !== name) continue;
    }
    out[name] = value;
  }
  return out;
}

/** Adds the forwarding headers and the plugins' changes to a copy of the client's headers (clientHeaders). */
export function upstreamHeaders(
  client: Record<string, string | string[]>,
  source: IncomingHttpHeaders,
  policy: HeaderPolicy,
  facts: ForwardingFacts,
): Record<string, string | string[]> {
  const trusted = facts.trustedPeer;
  const out: Record<string, string | string[]> = { ...client };
  const forwardedFor = trusted ? source["x-forwarded-for"] : undefined;
  out["x-forwarded-for"] = typeof forwardedFor === "string" && forwardedFor !== "" ? `${forwardedFor}, ${facts.peer}` : facts.peer;
  if (!trusted || out["x-forwarded-proto"] === undefined) out["x-forwarded-proto"] = facts.proto;
  if ((!trusted || out["x-forwarded-host"] === undefined) && facts.authority !== undefined) out["x-forwarded-host"] = facts.authority;
  out["x-request-id"] = facts.requestId;
  const via = source.via;
  out.via = typeof via === "string" && via !== "" ? `${via}, ${facts.via}` : facts.via;
  if (facts.identityId !== undefined) for (const name of policy.identityHeaders) out[name] = facts.identityId;
  for (const rewrite of policy.rewrites) {
    for (const name of rewrite.remove) delete out[name];
    const set = rewrite.set;
    for (let i = 0; i < set.length; i += 2) out[set[i]!] = set[i + 1]!;
    const add = rewrite.add;
    for (let i = 0; i < add.length; i += 2) append(out, add[i]!, add[i + 1]!);
  }
  return out;
}

/** Response header names never passed back to the client: hop-by-hop (RFC 9110 section 7.6.1). */
export const droppedResponseHeaders: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "te",
  "transfer-encoding",
  "upgrade",
]);
