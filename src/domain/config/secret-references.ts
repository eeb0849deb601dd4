import { DomainError } from "../errors.js";
import { destinationHeaders, isDestinationHeader } from "./forwarding-headers.js";
import { namePattern } from "./config-checks.js";
import type { CanonicalResource, DomainResource, PluginResource, RouteResource, UpstreamResource } from "./config-document.js";
import type { PathViolation } from "./path-violations.js";
import { configError, placeViolations, type Locate } from "./read-config-document.js";
import type { ValidatedDocument } from "./validate-config-document.js";

/**
 * Secret references in a configuration (docs/gateway.md, "Secret references"):
 * a `request-headers` value may hold `${secret:<environment>/<name>}`, which
 * the gateway replaces with the secret's value. Environment and name follow
 * the secrets API's patterns.
 */
export interface SecretReference {
  environment: string;
  name: string;
}

/**
 * A reference and where it stands: a request-headers plugin (`set` or `add`,
 * the header, the whole value) or a domain's TLS (`certificate` or
 * `private_key`).
 */
export interface PlacedReference extends SecretReference {
  /** `plugins` or `domains`. */
  holderKind: "plugins" | "domains";
  /** The plugin's or the domain's name. */
  plugin: string;
  field: "set" | "add" | "certificate" | "private_key";
  header: string;
  value: string;
}

const opening = "${secret:";
/** One whole reference, read where an opening was found. */
const referenceAt = /\$\{secret:([a-z0-9][a-z0-9_-]{0,63})\/([A-Za-z_][A-Za-z0-9_.-]{0,127})\}/y;
const referenceFields = ["set", "add"] as const;

/** `<environment>/<name>`: how a reference is keyed (neither part can hold "/"). */
export function secretKey(reference: SecretReference): string {
  return `${reference.environment}/${reference.name}`;
}

/** The references a header value holds; undefined when it holds a malformed one. */
export function readReferences(value: string): SecretReference[] | undefined {
  const found: SecretReference[] = [];
  for (let at = value.indexOf(opening); at !== -1; at = value.indexOf(opening, at + 1)) {
    referenceAt.lastIndex = at;
    const match = referenceAt.exec(value);
    if (!match) return undefined;
    found.push({ environment: match[1] as string, name: match[2] as string });
  }
  return found;
}

function parsed<T>(resource: CanonicalResource): T {
  return (resource.value ?? JSON.parse(resource.spec)) as T;
}

/** Every reference of a set of resources (malformed values, which validation refuses, are skipped). */
export function placedReferences(resources: readonly CanonicalResource[]): PlacedReference[] {
  const placed: PlacedReference[] = [];
  for (const resource of resources) {
    if (resource.kind === "domains") {
      const tls = parsed<DomainResource>(resource).tls;
      if (tls === undefined) continue;
      for (const field of ["certificate", "private_key"] as const) {
        for (const reference of readReferences(tls[field]) ?? [])
          placed.push({ ...reference, holderKind: "domains", plugin: resource.name, field, header: "", value: tls[field] });
      }
      continue;
    }
    if (resource.kind !== "plugins") continue;
    const plugin = parsed<PluginResource>(resource);
    if (plugin.type !== "request-headers") continue;
    for (const field of referenceFields) {
      const headers = plugin.config[field];
      if (!headers || typeof headers !== "object" || Array.isArray(headers)) continue;
      for (const [header, value] of Object.entries(headers)) {
        if (typeof value !== "string" || !value.includes(opening)) continue;
        for (const reference of readReferences(value) ?? [])
          placed.push({ ...reference, holderKind: "plugins", plugin: plugin.name, field, header, value });
      }
    }
  }
  return placed;
}

/** The distinct secrets a configuration references, sorted by `<environment>/<name>`. */
export function referencedSecrets(resources: readonly CanonicalResource[]): SecretReference[] {
  const unique = new Map<string, SecretReference>();
  for (const { environment, name } of placedReferences(resources)) unique.set(secretKey({ environment, name }), { environment, name });
  return [...unique.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, reference]) => reference);
}

/** What references a secret, as `plugins/<name>` and `domains/<name>`, sorted. */
export function pluginsReferencing(resources: readonly CanonicalResource[], secret: SecretReference): string[] {
  const key = secretKey(secret);
  return [
    ...new Set(
      placedReferences(resources)
        .filter((p) => secretKey(p) === key)
        .map((p) => `${p.holderKind}/${p.plugin}`),
    ),
  ].sort();
}

/**
 * What a configuration does with secrets, as facts a member may keep but not
 * add: each value that references a secret, where it stands; each destination
 * a referenced secret is sent to (through any route that uses the plugin);
 * and, for each route that sends one, what its request-headers plugins do to
 * the headers that select the site or path behind an upstream. So a member can
 * neither write a new reference nor send an existing one anywhere else: not
 * by pointing a route elsewhere, not by editing the targets of the upstream
 * it names, not by adding the plugin to another route, and not by such a
 * header (a shared ingress or CDN routes by them; docs/security.md, "The
 * gateway"); nor widen which requests carry it (the route's path, domains,
 * methods, rules and credential checks), nor give the plugin to another route.
 * Other headers, and how an upstream balances, retries and times out, stay a
 * member's to change.
 */
function secretFacts(resources: readonly CanonicalResource[]): Map<string, string> {
  const facts = new Map<string, string>();
  const placed = placedReferences(resources);
  if (placed.length === 0) return facts;
  const byPlugin = new Map<string, PlacedReference[]>();
  for (const p of placed) {
    facts.set(
      JSON.stringify(["value", p.holderKind, p.plugin, p.field, p.header, p.value]),
      p.holderKind === "domains"
        ? `domain "${p.plugin}" would use secret "${secretKey(p)}" as its TLS ${p.field === "certificate" ? "certificate" : "private key"}`
        : `plugin "${p.plugin}" would put secret "${secretKey(p)}" in its ${p.field} header "${p.header}"`,
    );
    if (p.holderKind === "domains") continue;
    byPlugin.set(p.plugin, [...(byPlugin.get(p.plugin) ?? []), p]);
  }
  const destinationOf = destinations(resources);
  /** Specs of rules, and of the plugins that decide who may use a route (api-key-auth, session-auth), by name. */
  const ruleSpecs = new Map<string, string>();
  const checkSpecs = new Map<string, string>();
  for (const resource of resources) {
    if (resource.kind === "rules") ruleSpecs.set(resource.name, resource.spec);
    if (resource.kind === "plugins") {
      const type = parsed<PluginResource>(resource).type;
      if (type === "api-key-auth" || type === "session-auth") checkSpecs.set(resource.name, resource.spec);
    }
  }
  /** Per request-headers plugin, what it does to headers that choose where a request lands. */
  const redirects = new Map<string, [string, string, unknown][]>();
  for (const resource of resources) {
    if (resource.kind !== "plugins") continue;
    const plugin = parsed<PluginResource>(resource);
    if (plugin.type !== "request-headers") continue;
    const changes: [string, string, unknown][] = [];
    for (const field of ["set", "add"] as const) {
      const headers = plugin.config[field];
      if (!headers || typeof headers !== "object" || Array.isArray(headers)) continue;
      for (const [header, value] of Object.entries(headers))
        if (selectsDestination(header)) changes.push([field, header.toLowerCase(), value]);
    }
    const removed = plugin.config.remove;
    if (Array.isArray(removed))
      for (const header of removed)
        if (typeof header === "string" && selectsDestination(header)) changes.push(["remove", header.toLowerCase(), null]);
    redirects.set(plugin.name, changes);
  }
  for (const resource of resources) {
    if (resource.kind !== "routes") continue;
    const route = parsed<RouteResource>(resource);
    const secrets = new Set<string>();
    let destination: string | undefined;
    for (const plugin of route.plugins ?? []) {
      for (const p of byPlugin.get(plugin) ?? []) {
        secrets.add(secretKey(p));
        destination ??= destinationOf(route.upstream);
        facts.set(
          JSON.stringify(["upstream", destination, secretKey(p)]),
          `route "${route.name}" would send secret "${secretKey(p)}" (plugin "${plugin}") to ${describeUpstream(route.upstream)}`,
        );
      }
    }
    if (secrets.size === 0 || destination === undefined) continue;
    // Which requests the route sends the secret with: its path, domains and methods, its rules and its
    // credential checks. A member may not widen that (nor give the plugin to another route).
    const gate = JSON.stringify({
      path: route.path,
      domains: route.domains ?? null,
      methods: route.methods ?? null,
      rules: (route.rules ?? []).map((name) => [name, ruleSpecs.get(name) ?? null]),
      checks: (route.plugins ?? []).filter((name) => checkSpecs.has(name)).map((name) => [name, checkSpecs.get(name)]),
    });
    for (const secret of secrets) {
      facts.set(
        JSON.stringify(["gate", route.name, secret, gate]),
        `route "${route.name}" would send secret "${secret}" with other requests than before (its path, domains, methods, rules or credential plugins differ)`,
      );
    }
    // What the route's plugins do to destination-selecting headers, in the order they apply.
    const changes = (route.plugins ?? []).flatMap((name) => redirects.get(name) ?? []);
    for (const secret of secrets) {
      facts.set(
        JSON.stringify(["redirect", destination, secret, changes]),
        `route "${route.name}" would send secret "${secret}" to its upstream with other values of headers that select the site or path behind it (${[...destinationHeaders].join(", ")})`,
      );
    }
  }
  return facts;
}

/** How a message names where a route sends its requests. */
function describeUpstream(upstream: string): string {
  return namePattern.test(upstream) ? `the targets of upstream "${upstream}" (their URLs or health-check path)` : "its upstream";
}

/**
 * Where a route's requests go, as one comparable string per route upstream:
 * the set of target URLs and the active health check's path. A URL is one
 * target without a probe; an upstream's name stands for its entry's targets,
 * so a route is judged by where its requests land, not by the name it uses
 * (pointing it at another entry, or renaming the entry, with the same targets
 * moves nothing; editing a target, adding one or changing the probed path
 * does). Order and weights of targets do not count: they only spread the
 * requests over the same destinations.
 */
function destinations(resources: readonly CanonicalResource[]): (upstream: string) => string {
  const upstreams = new Map<string, CanonicalResource>();
  for (const resource of resources) if (resource.kind === "upstreams") upstreams.set(resource.name, resource);
  const known = new Map<string, string>();
  return (upstream) => {
    let destination = known.get(upstream);
    if (destination !== undefined) return destination;
    if (!namePattern.test(upstream)) destination = JSON.stringify([[upstream], null]);
    else {
      const entry = upstreams.get(upstream);
      // References are checked before this: an entry that is missing here is one no state holds.
      if (entry === undefined) destination = JSON.stringify(["missing", upstream]);
      else {
        const value = parsed<UpstreamResource>(entry);
        const urls = [...new Set(value.targets.map((target) => target.url))].sort();
        destination = JSON.stringify([urls, value.health_check?.active?.path ?? null]);
      }
    }
    known.set(upstream, destination);
    return destination;
  };
}

function selectsDestination(header: string): boolean {
  return isDestinationHeader(header);
}

export interface SecretReferenceCheck {
  organizationId: string;
  /** The document being applied, and where its values stand. */
  document: ValidatedDocument;
  locate: Locate;
  /** The configuration before and after the change. */
  before: readonly CanonicalResource[];
  after: readonly CanonicalResource[];
  /** The caller's role in the organisation. */
  role: "admin" | "member" | undefined;
  /** Of the given secrets, the keys (`<environment>/<name>`) of those that exist. */
  existing(secrets: readonly SecretReference[]): Promise<Set<string>>;
}

/**
 * The rules of docs/gateway.md, "Secret references", checked inside the
 * import's transaction (so that a secret cannot be deleted between the check
 * and the commit: deleting one takes the same configuration lock). In order:
 * a malformed reference is 400; adding or changing a reference without the
 * admin role is 403 (before the existence check, so a member learns nothing
 * about which secrets exist); a reference to a secret that does not exist is
 * 400 with the YAML line.
 */
export async function checkSecretReferences(input: SecretReferenceCheck): Promise<void> {
  const malformed: PathViolation[] = [];
  const inDocument: { reference: SecretReference; path: PathViolation["path"] }[] = [];
  for (const resource of input.document.plugins) {
    const plugin = resource.value as PluginResource;
    if (plugin.type !== "request-headers") continue;
    for (const field of referenceFields) {
      const headers = plugin.config[field];
      if (!headers || typeof headers !== "object" || Array.isArray(headers)) continue;
      for (const [header, value] of Object.entries(headers)) {
        if (typeof value !== "string" || !value.includes(opening)) continue;
        const path = ["plugins", resource.index, "config", field, header];
        const references = readReferences(value);
        if (!references) {
          malformed.push({
            path,
            description: `holds a malformed secret reference: write \${secret:<environment>/<name>} (e.g. "Bearer \${secret:production/UPSTREAM_TOKEN}"), with the environment and name of a stored secret`,
            at: "value",
          });
          continue;
        }
        for (const reference of references) inDocument.push({ reference, path });
      }
    }
  }
  // A domain's certificate and key are each one whole reference (validation checked the form).
  for (const resource of input.document.domains) {
    const tls = (resource.value as DomainResource).tls;
    if (tls === undefined) continue;
    for (const field of ["certificate", "private_key"] as const) {
      for (const reference of readReferences(tls[field]) ?? [])
        inDocument.push({ reference, path: ["domains", resource.index, "tls", field] });
    }
  }
  if (malformed.length > 0) throw configError(placeViolations(malformed, input.locate));

  if (input.role !== "admin") {
    const before = secretFacts(input.before);
    for (const [fact, description] of secretFacts(input.after)) {
      if (before.has(fact)) continue;
      throw new DomainError(
        "permission_denied",
        "secret_reference_needs_admin",
        `this change adds or changes a secret reference, which needs the admin role (secret references are as privileged as the secrets): ${description}; nothing was applied`,
      );
    }
  }

  if (inDocument.length === 0) return;
  const asked = new Map(inDocument.map(({ reference }) => [secretKey(reference), reference]));
  const existing = await input.existing([...asked.values()]);
  const missing: PathViolation[] = [];
  for (const { reference, path } of inDocument) {
    if (existing.has(secretKey(reference))) continue;
    missing.push({
      path,
      description: `references secret "${reference.name}" in environment "${reference.environment}", which does not exist: store it first (PUT /organization/${input.organizationId}/secrets) or correct the reference`,
      at: "value",
    });
  }
  if (missing.length > 0) throw configError(placeViolations(missing, input.locate));
}

/** 409 (aborted: the state conflicts with the request) for deleting a secret the current configuration references. */
/** `plugins/x` as `plugin "x"`, `domains/y` as `domain "y"`. */
function describeHolder(holder: string): string {
  const slash = holder.indexOf("/");
  return `${holder.startsWith("domains/") ? "domain" : "plugin"} "${holder.slice(slash + 1)}"`;
}

/** The 409 of deleting a secret that `holders` (`plugins/<name>`, `domains/<name>`) reference. */
export function secretInUse(secret: SecretReference, holders: readonly string[]): DomainError {
  return new DomainError(
    "aborted",
    "secret_in_use",
    `secret "${secret.name}" in environment "${secret.environment}" is referenced by ${holders.map(describeHolder).join(", ")} of the current configuration: remove the reference first, then delete the secret`,
    holders.map((holder) => ({ field: holder, description: `references \${secret:${secretKey(secret)}}` })),
  );
}
