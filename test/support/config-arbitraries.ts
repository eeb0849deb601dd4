import fc from "fast-check";

/**
 * fast-check generators of valid configurations, in canonical form (the form
 * export writes): field values as the validator keeps them, optional fields
 * absent rather than empty. Names come from small pools so that two generated
 * configurations share resources, sometimes identical, sometimes not.
 */

export type Kind = "domains" | "upstreams" | "plugins" | "rules" | "routes";
export type Resource = { name: string } & Record<string, unknown>;
export type State = Record<Kind, Resource[]>;

export const kinds: Kind[] = ["domains", "upstreams", "plugins", "rules", "routes"];

const domainPool = ["a.example.com", "b.example.com", "api.example.org", "x1.test"];
const upstreamPool = ["plants", "pool-b", "legacy", "u3"];
const pluginPool = ["p0", "p1", "rl-default", "cors-web"];
const rulePool = ["block-bots", "r1", "admin-only", "office"];
const routePool = ["create-plant", "list-plants", "route-2", "route-3", "health", "r5"];

const subsetOf = <T>(items: readonly T[]) => fc.subarray([...items]);
const nonEmptySubsetOf = <T>(items: readonly T[]) => fc.subarray([...items], { minLength: 1 });

const headerName = fc.constantFrom("x-request-id", "x-env", "user-agent", "x-api-key", "accept");
/** A header a plugin may own (set, or read as a credential): none the gateway sets itself. */
const ownableHeader = fc.constantFrom("x-identity-id", "x-env", "user-agent", "x-api-key", "accept");
const origin = fc.constantFrom("https://app.example.com", "http://localhost:3000", "https://a.b.example.org");
const method = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

const pluginConfig = fc.oneof(
  fc
    .record({ requests: fc.integer({ min: 1, max: 1_000_000 }), window_seconds: fc.integer({ min: 1, max: 86_400 }) })
    .map((config) => ({ type: "rate-limit", config })),
  fc
    .record(
      {
        allowed_origins: fc
          .oneof(fc.uniqueArray(origin, { minLength: 1, maxLength: 3 }), fc.constant(["*"]))
          .map((list): string[] => [...list]),
        allowed_methods: nonEmptySubsetOf(method),
        allowed_headers: fc.uniqueArray(headerName, { minLength: 1, maxLength: 3 }),
        allow_credentials: fc.boolean(),
        max_age_seconds: fc.integer({ min: 0, max: 86_400 }),
      },
      { requiredKeys: ["allowed_origins"] },
    )
    .map((config) => {
      if (config.allowed_origins.includes("*") && config.allow_credentials === true) config.allow_credentials = false;
      return { type: "cors", config };
    }),
  fc
    .record({ required: fc.boolean(), forward_identity_header: ownableHeader }, { requiredKeys: [] })
    .map((config) => ({ type: "session-auth", config })),
  fc
    .record({ header: ownableHeader, hide_credentials: fc.boolean() }, { requiredKeys: [] })
    .map((config) => ({ type: "api-key-auth", config })),
  fc
    .record(
      {
        set: fc.dictionary(headerName, fc.constantFrom("1", "production", "a b c", "x: y", "#tag", "'quoted'"), { minKeys: 1, maxKeys: 3 }),
        remove: fc.uniqueArray(headerName, { minLength: 1, maxLength: 2 }),
      },
      { requiredKeys: ["set"] },
    )
    .map((config) => ({ type: "request-headers", config: { ...config, set: sortKeys(config.set) } })),
);

function sortKeys(record: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => (a < b ? -1 : 1)));
}

const match = fc.oneof(
  fc
    .record(
      {
        header: headerName,
        regex: fc.constantFrom("bot", "^curl/", "a|b", "x: y", "[0-9]+ #", "\\d{3}", "it's"),
        ignore_case: fc.boolean(),
      },
      { requiredKeys: ["header", "regex"] },
    )
    .map((m) => m as Record<string, unknown>),
  fc.constantFrom("/admin", "/internal/", "/a:b@c").map((path_prefix) => ({ path_prefix })),
  fc.constantFrom("10.0.0.0/8", "192.168.1.0/24", "2001:db8::/32", "0.0.0.0/0").map((ip_cidr) => ({ ip_cidr })),
);

/** An optional field: absent, or a value (fc.option gives null for absent). */
const optional = <T>(arbitrary: fc.Arbitrary<T>) => fc.option(arbitrary, { nil: undefined });

const targetUrl = fc.constantFrom(
  "http://10.0.0.1:8081",
  "http://10.0.0.2:8081",
  "https://backend.internal",
  "http://10.0.0.3:9000/base/",
  "https://[::1]:8443",
);

const upstreamSpec = fc
  .record({
    targets: fc.uniqueArray(fc.record({ url: targetUrl, weight: optional(fc.integer({ min: 0, max: 1000 })) }), {
      selector: (t) => t.url,
      minLength: 1,
      maxLength: 3,
    }),
    balancer: optional(fc.constantFrom("round-robin", "least-requests", "consistent-hash")),
    hash_on: optional(fc.constantFrom("client", "header:x-user-id", "cookie:session")),
    active: optional(
      fc.record({
        path: fc.constantFrom("/healthz", "/", "/status/ready"),
        // With a timeout below 2 s and an interval of 2 s or more, a probe always ends before the next.
        interval_seconds: optional(fc.integer({ min: 2, max: 3600 })),
        timeout_ms: optional(fc.integer({ min: 10, max: 1999 })),
        healthy_after: optional(fc.integer({ min: 1, max: 10 })),
        unhealthy_after: optional(fc.integer({ min: 1, max: 10 })),
      }),
    ),
    passive: optional(
      fc.record({
        unhealthy_after: optional(fc.integer({ min: 1, max: 100 })),
        recover_after_seconds: optional(fc.integer({ min: 1, max: 3600 })),
      }),
    ),
    retries: optional(fc.integer({ min: 0, max: 5 })),
    connect_ms: optional(fc.integer({ min: 10, max: 600_000 })),
    response_ms: optional(fc.integer({ min: 10, max: 600_000 })),
  })
  .map((u) => {
    // Canonical form: fields in the format's order, absent ones left out.
    const out: Record<string, unknown> = {
      targets: u.targets.map((t, i) => {
        // At least one target takes traffic.
        const weight = i === 0 && t.weight === 0 ? 1 : t.weight;
        return weight === undefined ? { url: t.url } : { url: t.url, weight };
      }),
    };
    if (u.balancer) out.balancer = u.balancer;
    if (u.hash_on && u.balancer === "consistent-hash") out.hash_on = u.hash_on;
    if (u.active || u.passive) {
      const health: Record<string, unknown> = {};
      if (u.active) health.active = definedOnly(u.active);
      if (u.passive) health.passive = definedOnly(u.passive);
      out.health_check = health;
    }
    if (u.retries !== undefined) out.retries = u.retries;
    if (u.connect_ms !== undefined || u.response_ms !== undefined) {
      out.timeouts = definedOnly({ connect_ms: u.connect_ms, response_ms: u.response_ms });
    }
    return out;
  });

function definedOnly(record: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(record).filter(([, value]) => value !== undefined));
}

const routePath = fc.constantFrom("/plants", "/plants/*", "/", "/*", "/a/b/c", "/a%20b", "/v1/items:batch", "/@me");
const upstream = fc.constantFrom("http://127.0.0.1:8081", "https://backend.internal", "http://10.0.0.1:9000/base/", "https://[::1]:8443");

/** A configuration whose routes refer only to its own domains, upstreams, plugins and rules. */
export const stateArbitrary: fc.Arbitrary<State> = fc
  .record({
    domains: subsetOf(domainPool),
    upstreams: fc.uniqueArray(fc.tuple(fc.constantFrom(...upstreamPool), upstreamSpec), { selector: ([name]) => name, maxLength: 3 }),
    plugins: fc.uniqueArray(fc.tuple(fc.constantFrom(...pluginPool), pluginConfig), { selector: ([name]) => name, maxLength: 4 }),
    rules: fc.uniqueArray(fc.tuple(fc.constantFrom(...rulePool), match, fc.constantFrom("deny", "allow")), {
      selector: ([name]) => name,
      maxLength: 4,
    }),
  })
  .chain(({ domains, upstreams, plugins, rules }) => {
    const upstreamNames = upstreams.map(([name]) => name);
    const pluginNames = plugins.map(([name]) => name);
    const ruleNames = rules.map(([name]) => name);
    const route = fc.record(
      {
        domains: domains.length > 0 ? nonEmptySubsetOf(domains) : fc.constant(undefined),
        path: routePath,
        methods: nonEmptySubsetOf(method),
        upstream: upstreamNames.length > 0 ? fc.oneof(upstream, fc.constantFrom(...upstreamNames)) : upstream,
        timeout_ms: fc.integer({ min: 10, max: 600_000 }),
        max_body_bytes: fc.oneof(fc.integer({ min: 0, max: 1 << 20 }), fc.constant(10 * 1024 ** 3)),
        plugins: nonEmptySubsetOf(pluginNames.length > 0 ? pluginNames : ["unused"]),
        rules: nonEmptySubsetOf(ruleNames.length > 0 ? ruleNames : ["unused"]),
      },
      { requiredKeys: ["path", "upstream"] },
    );
    return fc.uniqueArray(fc.tuple(fc.constantFrom(...routePool), route), { selector: ([name]) => name, maxLength: 5 }).map((routes) => ({
      domains: domains.map((name) => ({ name })),
      upstreams: upstreams.map(([name, u]) => ({ name, ...u })),
      plugins: plugins.map(([name, p]) => ({ name, ...p })),
      rules: rules.map(([name, m, action]) => ({ name, match: m, action })),
      routes: routes.map(([name, r]) => {
        const out: Resource = { name };
        if (r.domains) out.domains = r.domains;
        out.path = r.path;
        if (r.methods) out.methods = r.methods;
        out.upstream = r.upstream;
        if (r.timeout_ms !== undefined) out.timeout_ms = r.timeout_ms;
        if (r.max_body_bytes !== undefined) out.max_body_bytes = r.max_body_bytes;
        if (r.plugins && pluginNames.length > 0) out.plugins = r.plugins;
        if (r.rules && ruleNames.length > 0) out.rules = r.rules;
        return out;
      }),
    }));
  });

/** Two configurations where the second shares some resources of the first (identical or not). */
export const statePairArbitrary: fc.Arbitrary<[State, State]> = fc
  .tuple(stateArbitrary, stateArbitrary, fc.array(fc.boolean(), { minLength: 32, maxLength: 32 }))
  .map(([s, d, coins]) => {
    let coin = 0;
    const take = () => coins[coin++ % coins.length] === true;
    const mixed: State = {
      domains: [...d.domains],
      upstreams: [...d.upstreams],
      plugins: [...d.plugins],
      rules: [...d.rules],
      routes: [...d.routes],
    };
    for (const kind of ["domains", "upstreams", "plugins", "rules"] as const) {
      for (const resource of s[kind]) if (take()) mixed[kind] = [...mixed[kind].filter((r) => r.name !== resource.name), resource];
    }
    const has = (kind: Kind, name: string) => mixed[kind].some((r) => r.name === name);
    for (const route of s.routes) {
      const refs = [
        ["domains", route.domains],
        ["plugins", route.plugins],
        ["rules", route.rules],
      ] as const;
      const upstreamName = /^[a-z0-9]/.test(route.upstream as string) ? [route.upstream as string] : [];
      const resolvable =
        refs.every(([kind, names]) => ((names as string[] | undefined) ?? []).every((n) => has(kind, n))) &&
        upstreamName.every((n) => has("upstreams", n));
      if (take() && resolvable) mixed.routes = [...mixed.routes.filter((r) => r.name !== route.name), route];
    }
    return [s, mixed];
  });

export function resourceKey(kind: Kind, name: string): string {
  return `${kind}/${name}`;
}

/** The state as export presents it: every kind, each sorted by name. */
export function exported(state: State): Record<string, unknown> {
  const out: Record<string, unknown> = { version: 1 };
  for (const kind of kinds) out[kind] = [...state[kind]].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return out;
}

/** S overridden by D: what a merge import leads to. */
export function overlay(s: State, d: State): State {
  const out = {} as State;
  for (const kind of kinds) {
    const names = new Set(d[kind].map((r) => r.name));
    out[kind] = [...s[kind].filter((r) => !names.has(r.name)), ...d[kind]];
  }
  return out;
}
