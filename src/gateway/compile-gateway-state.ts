import { Code } from "@connectrpc/connect";
import { BlockList, isIPv4 } from "node:net";
import type { Dispatcher } from "undici";
import type { ConfigDocument, ConfigValue, PluginResource, RouteResource, RuleResource } from "../domain/config/config-document.js";
import { answers, gatewayAnswer, type GatewayAnswer } from "./gateway-answer.js";
import type { GatewayState } from "./gateway-state.js";
import { readRequestPath } from "../domain/config/request-path.js";
import { compileRuleRegex, type RuleRegexMatcher } from "../domain/config/rule-regex.js";
import { isForbiddenRewriteHeader } from "../domain/config/plugin-configs.js";
import { createCorsPolicy, type CorsPolicy } from "./cors-policy.js";
import type { RouteMetrics } from "./gateway-metrics.js";
import { createRateLimiter, type RateLimiter } from "./rate-limiter.js";
import { alwaysDropped, type HeaderPolicy, type HeaderRewrite } from "./proxy/upstream-headers.js";
import { createRouteTable, methodMaskOf, type RoutableRoute, type RouteTable } from "./route-table.js";
import { createSessionVerifier, type SessionVerifier } from "./session-verifier.js";

/** Where a route's requests go. */
export interface UpstreamTarget {
  /** `http://host:port` (the connection pool's key). */
  readonly origin: string;
  /** The upstream URL's path without a trailing slash ("" for none): a prefix of every forwarded path. */
  readonly basePath: string;
  readonly hostname: string;
  readonly port: number;
  readonly secure: boolean;
  readonly dispatcher: Dispatcher;
}

export type CompiledRule =
  | {
      readonly name: string;
      readonly kind: "header";
      readonly header: string;
      readonly regex: RuleRegexMatcher;
      readonly denied: GatewayAnswer;
    }
  | { readonly name: string; readonly kind: "path"; readonly prefix: string; readonly denied: GatewayAnswer }
  | { readonly name: string; readonly kind: "ip"; readonly blocks: BlockList; readonly denied: GatewayAnswer };

export interface ApiKeyAuth {
  readonly header: string;
  readonly hide: boolean;
  readonly missing: GatewayAnswer;
  readonly unknown: GatewayAnswer;
}

export interface SessionAuth {
  readonly required: boolean;
  readonly identityHeader: string | undefined;
}

export interface RateLimit {
  readonly limiter: RateLimiter;
  readonly requests: number;
}

/** A route with everything a request needs, computed once per revision. */
export interface CompiledRoute extends RoutableRoute, HeaderPolicy {
  readonly upstream: UpstreamTarget;
  /** Set when the route cannot be served (an unresolved secret, a rule that cannot run): its 503. */
  readonly closed: GatewayAnswer | undefined;
  readonly cors: CorsPolicy | undefined;
  readonly denyRules: readonly CompiledRule[];
  readonly allowRules: readonly CompiledRule[];
  readonly apiKeys: readonly ApiKeyAuth[];
  readonly sessions: readonly SessionAuth[];
  readonly rateLimits: readonly RateLimit[];
  /** Whether any plugin or rule runs before forwarding (a route without is forwarded at once). */
  readonly plain: boolean;
  /** Filled on the route's first request. */
  metrics: RouteMetrics | undefined;
}

/** What depends only on the document and the secret values. */
export interface CompiledRouting {
  readonly document: ConfigDocument;
  readonly secrets: ReadonlyMap<string, string>;
  readonly table: RouteTable<CompiledRoute>;
  readonly routes: readonly CompiledRoute[];
  readonly origins: ReadonlySet<string>;
  /** Rate-limit counts by route, plugin and window: carried into the next revision. */
  readonly limiters: ReadonlyMap<string, RateLimiter>;
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
  /** The connection pool of an upstream origin. */
  dispatcherFor(origin: string): Dispatcher;
  /** Problems that close a route (never a secret value). */
  warn?(message: string, fields: Record<string, unknown>): void;
  maxClientsPerLimiter?: number;
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
const noNames: ReadonlySet<string> = new Set();

const secretReference = /\$\{secret:([a-z0-9][a-z0-9_-]{0,63})\/([A-Za-z_][A-Za-z0-9_.-]{0,127})\}/g;
const safeHeaderValue = /^[\t\x20-\x7e]*$/;

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
  for (const kind of ["domains", "plugins", "rules", "routes"] as const) {
    const x = a[kind];
    const y = b[kind];
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

function compileRouting(state: GatewayState, options: CompileOptions): CompiledRouting {
  const document = state.document;
  const warn = options.warn ?? (() => {});
  const previousLimiters = options.previous?.routing.limiters;

  const rules = new Map<string, CompiledRule | { problem: string }>();
  for (const resource of document.rules) {
    const rule = specOf<RuleResource>(resource);
    const compiled = compileRule(rule);
    if ("problem" in compiled)
      warn("a rule cannot be evaluated: routes that use it answer 503", { rule: rule.name, problem: compiled.problem });
    rules.set(rule.name, compiled);
  }
  const actions = new Map(document.rules.map((r) => [r.name, specOf<RuleResource>(r).action]));

  const plugins = new Map<string, PluginResource>();
  for (const resource of document.plugins) plugins.set(resource.name, specOf<PluginResource>(resource));
  const shared = new Map<string, CorsPolicy | ApiKeyAuth | SessionAuth | HeaderRewrite | { unresolved: true }>();
  const pluginInstance = (plugin: PluginResource) => {
    let instance = shared.get(plugin.name);
    if (instance === undefined) {
      instance = compileSharedPlugin(plugin, state.secrets, warn);
      shared.set(plugin.name, instance);
    }
    return instance;
  };

  const upstreams = new Map<string, Omit<UpstreamTarget, "dispatcher"> & { dispatcher?: Dispatcher }>();
  const limiters = new Map<string, RateLimiter>();
  const routes: CompiledRoute[] = [];
  const origins = new Set<string>();

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

    let target = upstreams.get(route.upstream);
    if (target === undefined) {
      target = parseUpstream(route.upstream);
      upstreams.set(route.upstream, target);
    }
    target.dispatcher ??= options.dispatcherFor(target.origin);
    origins.add(target.origin);

    let closed: GatewayAnswer | undefined;
    const denyRules: CompiledRule[] = [];
    const allowRules: CompiledRule[] = [];
    for (const name of route.rules ?? []) {
      const rule = rules.get(name);
      if (rule === undefined) continue; // references are checked at import; a stale one matches nothing
      if ("problem" in rule) {
        closed ??= answers.ruleUnavailable;
        continue;
      }
      (actions.get(name) === "allow" ? allowRules : denyRules).push(rule);
    }

    let cors: CorsPolicy | undefined;
    const apiKeys: ApiKeyAuth[] = [];
    const sessions: SessionAuth[] = [];
    const rateLimits: RateLimit[] = [];
    const rewrites: HeaderRewrite[] = [];
    const extraDropped: string[] = [];
    const added: string[] = [];
    const identityHeaders: string[] = [];
    for (const name of route.plugins ?? []) {
      const plugin = plugins.get(name);
      if (plugin === undefined) continue;
      if (plugin.type === "rate-limit") {
        const windowSeconds = plugin.config.window_seconds as number;
        // Counts survive a new revision unless the route, the plugin or its window changed identity.
        const key = `${route.name}\u0000${plugin.name}\u0000${windowSeconds}`;
        const limiter =
          limiters.get(key) ??
          previousLimiters?.get(key) ??
          createRateLimiter({
            windowSeconds,
            ...(options.maxClientsPerLimiter !== undefined ? { maxClients: options.maxClientsPerLimiter } : {}),
          });
        limiters.set(key, limiter);
        rateLimits.push({ limiter, requests: plugin.config.requests as number });
        continue;
      }
      const instance = pluginInstance(plugin);
      switch (plugin.type) {
        case "cors":
          // One policy answers for the route: the first listed.
          cors ??= instance as CorsPolicy;
          break;
        case "api-key-auth": {
          const auth = instance as ApiKeyAuth;
          apiKeys.push(auth);
          if (auth.hide) extraDropped.push(auth.header);
          break;
        }
        case "session-auth": {
          const auth = instance as SessionAuth;
          sessions.push(auth);
          // A client-sent identity header is never forwarded, whether or not a session is presented.
          if (auth.identityHeader !== undefined) {
            extraDropped.push(auth.identityHeader);
            identityHeaders.push(auth.identityHeader);
          }
          break;
        }
        case "request-headers":
          if ("unresolved" in instance) closed = answers.unresolvedSecret;
          else {
            const rewrite = instance as HeaderRewrite;
            rewrites.push(rewrite);
            // What a plugin sets or removes is the plugin's, in every spelling; what it adds keeps the client's own value.
            extraDropped.push(...rewrite.remove);
            for (let i = 0; i < rewrite.set.length; i += 2) extraDropped.push(rewrite.set[i]!);
            for (let i = 0; i < rewrite.add.length; i += 2) added.push(rewrite.add[i]!);
          }
          break;
      }
    }

    routes.push({
      name: route.name,
      exact,
      base,
      methodMask: methodMaskOf(route.methods),
      domains: route.domains,
      upstream: target as UpstreamTarget,
      closed,
      cors,
      denyRules: listOrNone(denyRules),
      allowRules: listOrNone(allowRules),
      apiKeys: listOrNone(apiKeys),
      sessions: listOrNone(sessions),
      rateLimits: listOrNone(rateLimits),
      rewrites: listOrNone(rewrites),
      dropHeaders: extraDropped.length === 0 ? alwaysDropped : new Set([...alwaysDropped, ...extraDropped]),
      addedHeaders: added.length === 0 ? noNames : new Set(added),
      restrictsMethods: route.methods !== undefined,
      identityHeaders: listOrNone(identityHeaders),
      plain:
        closed === undefined &&
        cors === undefined &&
        denyRules.length + allowRules.length + apiKeys.length + sessions.length + rateLimits.length + rewrites.length === 0,
      metrics: undefined,
    });
  }

  return { document, secrets: state.secrets, table: createRouteTable(routes), routes, origins, limiters };
}

function parseUpstream(upstream: string): Omit<UpstreamTarget, "dispatcher"> {
  const url = new URL(upstream);
  const secure = url.protocol === "https:";
  return {
    origin: url.origin,
    basePath: url.pathname === "/" ? "" : url.pathname.replace(/\/+$/, ""),
    // URL keeps IPv6 literals in brackets; sockets want them bare.
    hostname: url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname,
    port: url.port === "" ? (secure ? 443 : 80) : Number(url.port),
    secure,
  };
}

function compileRule(rule: RuleResource): CompiledRule | { problem: string } {
  const denied = gatewayAnswer(Code.PermissionDenied, "denied_by_rule", `the request is refused by rule ${rule.name}`);
  const match = rule.match;
  if ("header" in match) {
    // The module validation uses: what an import accepted is exactly what matches here (a stored
    // document from before a rule became stricter answers 503 on its routes rather than guessing).
    const compiled = compileRuleRegex(match.regex, { ignoreCase: match.ignore_case === true });
    if (!compiled.ok) return { problem: compiled.problem };
    return { name: rule.name, kind: "header", header: match.header.toLowerCase(), regex: compiled.matcher, denied };
  }
  if ("path_prefix" in match) {
    const prefix = readRequestPath(match.path_prefix)?.match;
    if (prefix === undefined) return { problem: "the path prefix cannot be matched" };
    return { name: rule.name, kind: "path", prefix, denied };
  }
  const [address = "", bits = "0"] = match.ip_cidr.split("/");
  const blocks = new BlockList();
  try {
    blocks.addSubnet(address, Number(bits), isIPv4(address) ? "ipv4" : "ipv6");
  } catch {
    return { problem: "the CIDR block cannot be read" };
  }
  return { name: rule.name, kind: "ip", blocks, denied };
}

function compileSharedPlugin(
  plugin: PluginResource,
  secrets: ReadonlyMap<string, string>,
  warn: (message: string, fields: Record<string, unknown>) => void,
): CorsPolicy | ApiKeyAuth | SessionAuth | HeaderRewrite | { unresolved: true } {
  const config = plugin.config;
  switch (plugin.type) {
    case "cors":
      return createCorsPolicy(config);
    case "api-key-auth": {
      const header = typeof config.header === "string" ? config.header.toLowerCase() : "x-api-key";
      return {
        header,
        hide: config.hide_credentials === true,
        missing: gatewayAnswer(
          Code.Unauthenticated,
          "consumer_key_missing",
          `this route needs a consumer key (ck_...) in the ${header} header`,
        ),
        unknown: gatewayAnswer(
          Code.Unauthenticated,
          "consumer_key_invalid",
          `the consumer key in the ${header} header is unknown or revoked: use a live consumer key`,
        ),
      };
    }
    case "session-auth":
      return {
        required: config.required !== false,
        identityHeader: typeof config.forward_identity_header === "string" ? config.forward_identity_header.toLowerCase() : undefined,
      };
    case "request-headers": {
      const resolve = (value: string): string | undefined => {
        let missing = false;
        const resolved = value.replace(secretReference, (_, environment: string, name: string) => {
          const secret = secrets.get(`${environment}/${name}`);
          if (secret === undefined || !safeHeaderValue.test(secret)) {
            missing = true;
            warn(
              secret === undefined
                ? "a secret the configuration references is not resolved: routes using the plugin answer 503"
                : "a secret's value cannot travel in a header (line breaks or non-ASCII): routes using the plugin answer 503",
              { plugin: plugin.name, secret: `${environment}/${name}` },
            );
            return "";
          }
          return secret;
        });
        return missing ? undefined : resolved;
      };
      const pairs = (value: ConfigValue | undefined): string[] | undefined => {
        const out: string[] = [];
        if (value === undefined || typeof value !== "object" || Array.isArray(value)) return out;
        for (const [name, raw] of Object.entries(value)) {
          // Refused at import; a document stored before a name became forbidden never gets to use it.
          if (isForbiddenRewriteHeader(name)) {
            warn("a request-headers plugin names a header it may not change: that entry is ignored", { plugin: plugin.name, header: name });
            continue;
          }
          const resolved = resolve(String(raw));
          if (resolved === undefined) return undefined;
          out.push(name.toLowerCase(), resolved);
        }
        return out;
      };
      const set = pairs(config.set);
      const add = pairs(config.add);
      if (set === undefined || add === undefined) return { unresolved: true };
      const remove = Array.isArray(config.remove)
        ? (config.remove as string[]).map((h) => h.toLowerCase()).filter((h) => !isForbiddenRewriteHeader(h))
        : [];
      return { remove, set, add };
    }
    default:
      return { unresolved: true };
  }
}
