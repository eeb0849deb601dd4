import {
  resourceKinds,
  type CanonicalResource,
  type ConfigDocument,
  type DomainResource,
  type PluginResource,
  type RouteResource,
  type RuleResource,
  type UpstreamResource,
} from "../domain/config/config-document.js";
import { headerKey } from "../domain/config/forwarding-headers.js";
import { readRequestPath } from "../domain/config/request-path.js";
import { compileCertificates, type DomainCertificate } from "./certificates.js";
import { answers, type GatewayAnswer } from "./gateway-answer.js";
import type { RouteMetrics } from "./gateway-metrics.js";
import type { GatewayState } from "./gateway-state.js";
import { gatewayPlugins } from "./plugins/index.js";
import type { CorsPolicy } from "./plugins/cors.js";
import type { GatewayPlugin, RouteAssembly, Step } from "./plugins/plugin.js";
import { stages } from "./plugins/plugin.js";
import { alwaysDropped, type HeaderPolicy, type HeaderRewrite } from "./proxy/upstream-headers.js";
import { createRouteTable, methodMaskOf, type RoutableRoute, type RouteTable } from "./route-table.js";
import { compileRule, rulesStep, type CompiledRule } from "./rules.js";
import { createSessionVerifier, type SessionVerifier } from "./session-verifier.js";
import { poolOfUpstream, poolOfUrl, type PoolOptions, type UpstreamPool } from "./upstreams/upstream-pool.js";

/** A route with everything a request needs, computed once per revision. */
export interface CompiledRoute extends RoutableRoute, HeaderPolicy {
  /** Where its requests go: an upstreams entry, or its URL as a pool of one. */
  readonly upstream: UpstreamPool;
  /** How long its upstream may take to answer (the route's timeout_ms, else the upstream's). */
  readonly timeoutMs: number;
  /** A larger request body is 413 (undefined: no limit). */
  readonly maxBodyBytes: number | undefined;
  /** Set when the route cannot be served (an unresolved secret, a rule that cannot run): its 503. */
  readonly closed: GatewayAnswer | undefined;
  /** Its CORS policy: a preflight for the route is answered by the first step. */
  readonly cors: CorsPolicy | undefined;
  /** The pipeline in the plugins' fixed order (plugins/plugin.ts, stages); empty: forwarded at once. */
  readonly steps: readonly Step[];
  /** Filled on the route's first request. */
  metrics: RouteMetrics | undefined;
}

/** What depends only on the document and the secret values. */
export interface CompiledRouting {
  readonly document: ConfigDocument;
  readonly secrets: ReadonlyMap<string, string>;
  readonly table: RouteTable<CompiledRoute>;
  readonly routes: readonly CompiledRoute[];
  /** Every upstream the routes use, once each. */
  readonly pools: readonly UpstreamPool[];
  /** TLS contexts by domain name (certificates.ts). */
  readonly certificates: ReadonlyMap<string, DomainCertificate>;
  /**
   * Whether each domain redirects plain HTTP to https (`redirect_http`), by
   * name; empty when none does.
   */
  readonly redirects: ReadonlyMap<string, boolean>;
  /** What plugins keep across revisions (rate-limit counts), by their key. */
  readonly carried: ReadonlyMap<string, unknown>;
}

/** A GatewayState ready to serve: swapped in whole, one per request. */
export interface CompiledGatewayState {
  readonly state: GatewayState;
  readonly routing: CompiledRouting;
  readonly sessions: SessionVerifier;
  /** Requests being handled with this state (it may be retired meanwhile). */
  inFlight: number;
}

export interface CompileOptions {
  /** The state served so far: its route table is kept when only credentials changed, its rate-limit counts always. */
  previous?: CompiledGatewayState | undefined;
  /** Connection pools and target health, shared by every revision. */
  pools: Omit<PoolOptions, "defaultResponseTimeoutMs" | "defaultConnectTimeoutMs">;
  /** GATEWAY_UPSTREAM_TIMEOUT_MS: how long a route's URL upstream may take to answer. */
  upstreamTimeoutMs: number;
  /** Problems that close a route (never a secret value). */
  warn?(message: string, fields: Record<string, unknown>): void;
  maxClientsPerLimiter?: number;
  /** Whether the gateway keeps cluster-wide rate limits (GATEWAY_REDIS_URL is set). */
  clusterRateLimits?: boolean;
  /** Facts about the configuration, logged once per revision (default: warn). */
  notice?(message: string, fields: Record<string, unknown>): void;
  sessionLeewaySeconds?: number;
  sessionCacheSize?: number;
}

/**
 * The empty list every route without rules or plugins of a kind shares: ten
 * thousand plain routes would otherwise hold sixty thousand empty arrays
 * (about 2 MB).
 */
const none: readonly never[] = Object.freeze([]);
const listOrNone = <T>(list: readonly T[]): readonly T[] => (list.length === 0 ? none : list);
const noNames: ReadonlyMap<string, string> = new Map();

/**
 * Compiles a GatewayState once: the route table, rules, plugin instances,
 * resolved header values, answers. A request then does no parsing of the
 * configuration. A state that differs from `previous` only in credentials
 * (consumers, revocations, keys) keeps the previous route table.
 */
export function compileGatewayState(state: GatewayState, options: CompileOptions): CompiledGatewayState {
  const previous = options.previous;
  const routing =
    previous &&
    sameDocument(previous.routing.document, state.document, previous.state.revision === state.revision) &&
    sameSecrets(previous.routing.secrets, state.secrets)
      ? previous.routing
      : compileRouting(state, options);
  const sessions =
    previous?.sessions.serves(state.jwks, state.issuer, state.audience) === true ? previous.sessions : compileSessions(state, options);
  return { state, routing, sessions, inFlight: 0 };
}

function compileSessions(state: GatewayState, options: CompileOptions): SessionVerifier {
  try {
    return createSessionVerifier({
      jwks: state.jwks,
      issuer: state.issuer,
      audience: state.audience,
      ...(options.sessionLeewaySeconds !== undefined ? { leewaySeconds: options.sessionLeewaySeconds } : {}),
      ...(options.sessionCacheSize !== undefined ? { cacheSize: options.sessionCacheSize } : {}),
    });
  } catch (error) {
    // A key set jose cannot read verifies nothing: every session is refused until a usable one arrives.
    options.warn?.("the session key set cannot be used: every session token is refused", { err: error });
    return createSessionVerifier({ jwks: { keys: [] }, issuer: state.issuer, audience: state.audience });
  }
}

function sameDocument(a: ConfigDocument, b: ConfigDocument, sameRevision: boolean): boolean {
  if (a === b) return true;
  if (!sameRevision) return false;
  for (const kind of resourceKinds) {
    // A cache file written before a kind existed has none of it.
    const x = a[kind] ?? [];
    const y = b[kind] ?? [];
    if (x.length !== y.length) return false;
    for (let i = 0; i < x.length; i++) if (x[i]!.spec !== y[i]!.spec) return false;
  }
  return true;
}

function sameSecrets(a: ReadonlyMap<string, string>, b: ReadonlyMap<string, string>): boolean {
  if (a === b) return true;
  if (a.size !== b.size) return false;
  for (const [key, value] of a) if (b.get(key) !== value) return false;
  return true;
}

function specOf<T>(resource: { spec: string; value?: unknown }): T {
  return (resource.value ?? JSON.parse(resource.spec)) as T;
}

/** One plugin of the document, compiled once and shared by the routes that list it. */
interface CompiledPlugin {
  readonly plugin: GatewayPlugin<unknown>;
  readonly instance: unknown;
}

function compileRouting(state: GatewayState, options: CompileOptions): CompiledRouting {
  const document = state.document;
  const warn = options.warn ?? (() => {});
  const previousCarried = options.previous?.routing.carried;

  const rules = new Map<string, CompiledRule | { problem: string }>();
  const actions = new Map<string, RuleResource["action"]>();
  for (const resource of document.rules) {
    const rule = specOf<RuleResource>(resource);
    const compiled = compileRule(rule);
    if ("problem" in compiled)
      warn("a rule cannot be evaluated: routes that use it answer 503", { rule: rule.name, problem: compiled.problem });
    rules.set(rule.name, compiled);
    actions.set(rule.name, rule.action);
  }

  const plugins = new Map<string, CompiledPlugin>();
  for (const resource of document.plugins) {
    const spec = specOf<PluginResource>(resource);
    const plugin = gatewayPlugins[spec.type] as GatewayPlugin<unknown> | undefined;
    if (plugin === undefined) continue; // validation knows every type; a stored document of a newer version is not served half
    plugins.set(spec.name, {
      plugin,
      instance: plugin.compile(spec.config, { name: spec.name, secrets: state.secrets, warn }),
    });
  }

  const poolOptions: PoolOptions = {
    ...options.pools,
    defaultResponseTimeoutMs: options.upstreamTimeoutMs,
    defaultConnectTimeoutMs: options.upstreamTimeoutMs,
  };
  const named = new Map<string, UpstreamResource>();
  for (const resource of upstreamsOf(document)) {
    const upstream = specOf<UpstreamResource>(resource);
    named.set(upstream.name, upstream);
  }
  const pools = new Map<string, UpstreamPool>();
  const poolFor = (upstream: string): UpstreamPool => {
    let pool = pools.get(upstream);
    if (pool === undefined) {
      const entry = named.get(upstream);
      pool = entry !== undefined ? poolOfUpstream(entry, poolOptions) : poolOfUrl(upstream, poolOptions);
      pools.set(upstream, pool);
    }
    return pool;
  };
  const carried = new Map<string, unknown>();
  const noticed = new Set<string>();
  const routes: CompiledRoute[] = [];

  for (const resource of document.routes) {
    const route = specOf<RouteResource>(resource);
    const exact = !route.path.endsWith("/*");
    const rawBase = exact ? route.path : route.path.slice(0, -2);
    let base = rawBase === "" ? "" : readRequestPath(rawBase)?.match;
    if (base === undefined) {
      warn("a route's path cannot be matched: the route is left out", { route: route.name });
      continue;
    }
    // `/a//*` and `/a/*` are one prefix once runs of slashes count as one.
    if (!exact) base = base.replace(/\/+$/, "");

    const upstream = poolFor(route.upstream);

    const assembly = assembleRoute(route, {
      carried: (key, create) => {
        let value = carried.get(key) ?? previousCarried?.get(key);
        if (value === undefined) value = create();
        carried.set(key, value);
        return value as never;
      },
      maxClientsPerLimiter: options.maxClientsPerLimiter,
      clusterRateLimits: options.clusterRateLimits === true,
      notice: (message, fields) => {
        // Once per revision and message.
        if (noticed.has(message)) return;
        noticed.add(message);
        (options.notice ?? warn)(message, fields);
      },
    });

    const deny: CompiledRule[] = [];
    const allow: CompiledRule[] = [];
    for (const name of route.rules ?? []) {
      const rule = rules.get(name);
      if (rule === undefined) continue; // references are checked at import; a stale one matches nothing
      if ("problem" in rule) {
        assembly.close(answers.ruleUnavailable);
        continue;
      }
      (actions.get(name) === "allow" ? allow : deny).push(rule);
    }
    if (deny.length + allow.length > 0) assembly.addStep(stages.rules, rulesStep(listOrNone(deny), listOrNone(allow)));

    // Each plugin type attaches the route's instances of it, in the order the route lists them.
    const byType = new Map<GatewayPlugin<unknown>, unknown[]>();
    for (const name of route.plugins ?? []) {
      const compiled = plugins.get(name);
      if (compiled === undefined) continue;
      const list = byType.get(compiled.plugin);
      if (list === undefined) byType.set(compiled.plugin, [compiled.instance]);
      else list.push(compiled.instance);
    }
    for (const [plugin, instances] of byType) plugin.attach(instances, assembly);

    routes.push(
      assembly.build({
        exact,
        base,
        upstream,
        timeoutMs: route.timeout_ms ?? upstream.responseTimeoutMs,
        maxBodyBytes: route.max_body_bytes,
      }),
    );
  }

  const domains = document.domains.map((resource) => specOf<DomainResource>(resource));
  return {
    document,
    secrets: state.secrets,
    table: createRouteTable(routes),
    routes,
    pools: [...pools.values()],
    carried,
    certificates: compileCertificates(domains, state.secrets, warn, options.previous?.routing.certificates),
    redirects: domains.some((domain) => domain.redirect_http === true)
      ? new Map(domains.map((domain) => [domain.name, domain.redirect_http === true]))
      : new Map(),
  };
}

/** Collects what a route's rules and plugins add, then builds the compiled route. */
function assembleRoute(
  route: RouteResource,
  shared: Pick<RouteAssembly, "carried" | "maxClientsPerLimiter" | "clusterRateLimits" | "notice">,
): RouteAssembly & {
  build(fields: {
    exact: boolean;
    base: string;
    upstream: UpstreamPool;
    timeoutMs: number;
    maxBodyBytes: number | undefined;
  }): CompiledRoute;
} {
  const steps: { stage: number; step: Step }[] = [];
  let closed: GatewayAnswer | undefined;
  let cors: CorsPolicy | undefined;
  const owned: string[] = [];
  const added: string[] = [];
  const identityHeaders: string[] = [];
  const rewrites: HeaderRewrite[] = [];
  return {
    route,
    maxClientsPerLimiter: shared.maxClientsPerLimiter,
    carried: shared.carried,
    clusterRateLimits: shared.clusterRateLimits,
    notice: shared.notice,
    addStep: (stage, step) => steps.push({ stage, step }),
    close: (answer) => {
      closed ??= answer;
    },
    setCors: (policy) => {
      cors ??= policy;
    },
    ownHeader: (name) => owned.push(headerKey(name)),
    addedHeader: (name) => added.push(name),
    identityHeader: (name) => identityHeaders.push(name),
    rewrite: (rewrite) => rewrites.push(rewrite),
    build({ exact, base, upstream, timeoutMs, maxBodyBytes }) {
      // A stable sort: steps of one stage keep the order they were added in.
      steps.sort((a, b) => a.stage - b.stage);
      return {
        name: route.name,
        exact,
        base,
        methodMask: methodMaskOf(route.methods),
        domains: route.domains,
        upstream,
        timeoutMs,
        maxBodyBytes,
        closed,
        cors,
        steps: closed !== undefined ? none : listOrNone(steps.map((s) => s.step)),
        dropHeaders: owned.length === 0 ? alwaysDropped : new Set([...alwaysDropped, ...owned]),
        addedHeaders: added.length === 0 ? noNames : new Map(added.map((name) => [headerKey(name), name])),
        restrictsMethods: route.methods !== undefined,
        identityHeaders: listOrNone(identityHeaders),
        rewrites: listOrNone(rewrites),
        metrics: undefined,
      };
    },
  };
}

/** The document's upstreams entries (a document from before the kind existed has none). */
function upstreamsOf(document: ConfigDocument): readonly CanonicalResource[] {
  // A cache file written before the kind existed has none.
  return document.upstreams ?? [];
}
