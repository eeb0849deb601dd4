/**
 * The gateway configuration, format version 1 (docs/gateway.md, "The document"):
 * five kinds of resources, each keyed by `name`. A resource is held in its
 * canonical form: fields in a fixed order, optional fields absent rather than
 * empty, so that two resources are equal exactly when their canonical JSON is.
 */

/** The kinds in the order of the document format: definitions before their uses. */
export const resourceKinds = ["domains", "upstreams", "plugins", "rules", "routes"] as const;
export type ResourceKind = (typeof resourceKinds)[number];

export const pluginTypes = ["rate-limit", "cors", "session-auth", "api-key-auth", "request-headers"] as const;
export type PluginType = (typeof pluginTypes)[number];

export const httpMethods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;

/**
 * A domain: a hostname, or `*.` and a hostname for every name one label
 * below it. With `tls`, the gateway serves it over TLS with that certificate
 * and key, each a secret reference (`${secret:<environment>/<name>}`: PEM, the
 * certificate chain leaf first); `redirect_http` answers its plain-HTTP
 * requests with 308 to https (docs/gateway.md, "TLS, HTTP/2 and gRPC").
 */
export interface DomainResource {
  name: string;
  tls?: { certificate: string; private_key: string };
  redirect_http?: boolean;
}

/** A JSON value of a plugin's `config` (validated per plugin type). */
export type ConfigValue = string | number | boolean | ConfigValue[] | { [key: string]: ConfigValue };

export interface PluginResource {
  name: string;
  type: PluginType;
  config: { [key: string]: ConfigValue };
}

export type RuleMatch = { header: string; regex: string; ignore_case?: boolean } | { path_prefix: string } | { ip_cidr: string };

export interface RuleResource {
  name: string;
  match: RuleMatch;
  action: "deny" | "allow";
}

export interface RouteResource {
  name: string;
  /** Absent: every domain. */
  domains?: string[];
  path: string;
  /** Absent: every method. */
  methods?: string[];
  /** An http(s) URL, or the name of an `upstreams` entry. */
  upstream: string;
  plugins?: string[];
  rules?: string[];
  /** Overrides the upstream's `timeouts.response_ms` for this route. */
  timeout_ms?: number;
  /** A larger request body is 413. */
  max_body_bytes?: number;
}

/** One target of an upstream: weight 0 to 1000 (absent: 100; 0: drained). */
export interface UpstreamTargetSpec {
  url: string;
  weight?: number;
}

export type Balancer = "round-robin" | "least-requests" | "consistent-hash";

/**
 * A named pool of targets that routes name as their `upstream` (docs/gateway.md,
 * "Upstreams"). Absent optional fields take their defaults: balancer
 * round-robin; hash_on client (consistent-hash only); active checks off,
 * passive checks off; retries 1; timeouts connect 5000 ms, response 30000 ms.
 */
export interface UpstreamResource {
  name: string;
  /** 1 to 64 targets. */
  targets: UpstreamTargetSpec[];
  balancer?: Balancer;
  /** `client`, `header:<name>` or `cookie:<name>`; consistent-hash only. */
  hash_on?: string;
  health_check?: {
    /** Absent fields: interval 5 s, timeout 1000 ms, healthy after 2, unhealthy after 3. */
    active?: { path: string; interval_seconds?: number; timeout_ms?: number; healthy_after?: number; unhealthy_after?: number };
    /** Absent fields: unhealthy after 5, recover after 30 s. */
    passive?: { unhealthy_after?: number; recover_after_seconds?: number };
  };
  /** Further tries on another target, 0 to 5. */
  retries?: number;
  timeouts?: { connect_ms?: number; response_ms?: number };
}

export type Resource = DomainResource | UpstreamResource | PluginResource | RuleResource | RouteResource;

/** One resource of a document, with its canonical JSON (what is stored and compared). */
export interface CanonicalResource {
  kind: ResourceKind;
  name: string;
  /** JSON.stringify of the canonical resource (field order fixed by the validator). */
  spec: string;
  /** The parsed spec, when at hand (spares parsing it again). */
  value?: unknown;
}

/** A validated document: its resources per kind, in document order. */
export type ConfigDocument = Record<ResourceKind, CanonicalResource[]>;

/** "routes/create-plant": how plans and history name a resource. */
export function resourceKey(kind: ResourceKind, name: string): string {
  return `${kind}/${name}`;
}

const kindRank: Record<string, number> = { domains: 0, upstreams: 1, plugins: 2, rules: 3, routes: 4 };

/** Orders resources by kind (document order of the kinds), then by name in byte order. */
export function compareResources(a: { kind: ResourceKind; name: string }, b: { kind: ResourceKind; name: string }): number {
  const byKind = (kindRank[a.kind] ?? 0) - (kindRank[b.kind] ?? 0);
  if (byKind !== 0) return byKind;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

export function emptyDocument(): ConfigDocument {
  return { domains: [], upstreams: [], plugins: [], rules: [], routes: [] };
}
