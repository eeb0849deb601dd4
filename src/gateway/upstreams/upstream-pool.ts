import type { Dispatcher } from "undici";
import type { Balancer, UpstreamResource } from "../../domain/config/config-document.js";
import { createPicker, type TargetPicker } from "./balancers.js";
import type { ActiveCheck, PassiveCheck, TargetHealth } from "./target-health.js";

/** One target of an upstream, ready to be sent requests. */
export interface Target {
  /** The URL as the document writes it (the health gauge's label). */
  readonly url: string;
  /** `http://host:port` (the connection pool's key, with the connect timeout). */
  readonly origin: string;
  /** The URL's path without a trailing slash ("" for none): a prefix of every forwarded path. */
  readonly basePath: string;
  readonly hostname: string;
  readonly port: number;
  readonly secure: boolean;
  readonly weight: number;
  readonly dispatcher: Dispatcher;
  readonly health: TargetHealth;
}

/** Where a route's requests go: an `upstreams` entry, or a route's own URL as a pool of one. */
export interface UpstreamPool {
  /** The upstream's name, or the route's URL. */
  readonly name: string;
  readonly targets: readonly Target[];
  /** Further tries on another target (0 for a URL upstream). */
  readonly retries: number;
  readonly connectTimeoutMs: number;
  readonly responseTimeoutMs: number;
  /** What a consistent-hash key is read from; undefined for other balancers. */
  readonly hashOn: HashOn | undefined;
  readonly picker: TargetPicker<Target>;
}

export type HashOn =
  | { readonly from: "client" }
  | { readonly from: "header"; readonly name: string }
  | { readonly from: "cookie"; readonly name: string };

/** The process's knowledge of targets' health, by upstream and target URL; outlives revisions. */
export interface HealthRegistry {
  /** The health of a target of an upstream, configured with this revision's checks. */
  healthOf(
    upstream: string,
    url: string,
    active: ActiveCheck | undefined,
    passive: PassiveCheck | undefined,
    dispatcher: Dispatcher,
  ): TargetHealth;
  /** Stops the probes of targets no pool of `inUse` holds. */
  retain(inUse: Iterable<UpstreamPool>): void;
}

export interface PoolOptions {
  /** The connection pool of an origin with a connect timeout. */
  dispatcherFor(origin: string, connectTimeoutMs: number): Dispatcher;
  health: HealthRegistry;
  /** The default response timeout (GATEWAY_UPSTREAM_TIMEOUT_MS for a URL upstream). */
  defaultResponseTimeoutMs: number;
  defaultConnectTimeoutMs: number;
}

interface ParsedUrl {
  origin: string;
  basePath: string;
  hostname: string;
  port: number;
  secure: boolean;
}

export function parseUpstreamUrl(upstream: string): ParsedUrl {
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

function readHashOn(value: string | undefined): HashOn {
  if (value?.startsWith("header:")) return { from: "header", name: value.slice(7).toLowerCase() };
  if (value?.startsWith("cookie:")) return { from: "cookie", name: value.slice(7) };
  return { from: "client" };
}

/** A route's own URL: one target, no retries, no health checks. */
export function poolOfUrl(url: string, options: PoolOptions): UpstreamPool {
  const parsed = parseUpstreamUrl(url);
  const dispatcher = options.dispatcherFor(parsed.origin, options.defaultConnectTimeoutMs);
  const target: Target = {
    url,
    ...parsed,
    weight: 100,
    dispatcher,
    health: options.health.healthOf(url, url, undefined, undefined, dispatcher),
  };
  return {
    name: url,
    targets: [target],
    retries: 0,
    connectTimeoutMs: options.defaultConnectTimeoutMs,
    responseTimeoutMs: options.defaultResponseTimeoutMs,
    hashOn: undefined,
    picker: createPicker("round-robin", [target]),
  };
}

/** An `upstreams` entry of the document, with its defaults (docs/gateway.md, "Upstreams"). */
export function poolOfUpstream(upstream: UpstreamResource, options: PoolOptions): UpstreamPool {
  const connectTimeoutMs = upstream.timeouts?.connect_ms ?? 5_000;
  const active = upstream.health_check?.active;
  const activeCheck: ActiveCheck | undefined =
    active === undefined
      ? undefined
      : {
          path: active.path,
          intervalMs: (active.interval_seconds ?? 5) * 1000,
          timeoutMs: active.timeout_ms ?? 1_000,
          healthyAfter: active.healthy_after ?? 2,
          unhealthyAfter: active.unhealthy_after ?? 3,
        };
  const passive = upstream.health_check?.passive;
  const passiveCheck: PassiveCheck | undefined =
    passive === undefined
      ? undefined
      : { unhealthyAfter: passive.unhealthy_after ?? 5, recoverAfterMs: (passive.recover_after_seconds ?? 30) * 1000 };
  const targets: Target[] = upstream.targets.map((spec) => {
    const parsed = parseUpstreamUrl(spec.url);
    const dispatcher = options.dispatcherFor(parsed.origin, connectTimeoutMs);
    // A probe goes to the target's own path prefix, as live requests do.
    const probe = activeCheck === undefined ? undefined : { ...activeCheck, path: parsed.basePath + activeCheck.path };
    return {
      url: spec.url,
      ...parsed,
      weight: spec.weight ?? 100,
      dispatcher,
      health: options.health.healthOf(upstream.name, spec.url, probe, passiveCheck, dispatcher),
    };
  });
  const balancer: Balancer = upstream.balancer ?? "round-robin";
  return {
    name: upstream.name,
    targets,
    retries: upstream.retries ?? 1,
    connectTimeoutMs,
    responseTimeoutMs: upstream.timeouts?.response_ms ?? 30_000,
    hashOn: balancer === "consistent-hash" ? readHashOn(upstream.hash_on) : undefined,
    picker: createPicker(balancer, targets),
  };
}

/** The value of one cookie of a Cookie header (RFC 6265 section 5.4), or undefined. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  for (const pair of header.split(";")) {
    const eq = pair.indexOf("=");
    if (eq !== -1 && pair.slice(0, eq).trim() === name) return pair.slice(eq + 1).trim();
  }
  return undefined;
}
