/**
 * The gateway configuration, format version 1 (CONTRACT.md "Configuration API"):
 * four kinds of resources, each keyed by `name`. A resource is held in its
 * canonical form: fields in a fixed order, optional fields absent rather than
 * empty, so that two resources are equal exactly when their canonical JSON is.
 */

/** The kinds in the order of the document format: definitions before their uses. */
export const resourceKinds = ["domains", "plugins", "rules", "routes"] as const;
export type ResourceKind = (typeof resourceKinds)[number];

export const pluginTypes = ["rate-limit", "cors", "session-auth", "api-key-auth", "request-headers"] as const;
export type PluginType = (typeof pluginTypes)[number];

export const httpMethods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;

export interface DomainResource {
  name: string;
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
  upstream: string;
  plugins?: string[];
  rules?: string[];
}

export type Resource = DomainResource | PluginResource | RuleResource | RouteResource;

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

const kindRank: Record<string, number> = { domains: 0, plugins: 1, rules: 2, routes: 3 };

/** Orders resources by kind (document order of the kinds), then by name in byte order. */
export function compareResources(a: { kind: ResourceKind; name: string }, b: { kind: ResourceKind; name: string }): number {
  const byKind = (kindRank[a.kind] ?? 0) - (kindRank[b.kind] ?? 0);
  if (byKind !== 0) return byKind;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

export function emptyDocument(): ConfigDocument {
  return { domains: [], plugins: [], rules: [], routes: [] };
}
