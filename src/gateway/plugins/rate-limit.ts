import type { PluginSchema } from "../../domain/config/plugin-fields.js";
import { clientBucketOf } from "../../server/client-address.js";
import { rateLimitedAnswer } from "../gateway-answer.js";
import type { Exchange } from "../gateway-handler.js";
import { createRateLimiter, type RateDecision, type RateLimiter } from "../rate-limit/local-limiter.js";
import { stages, type GatewayPlugin, type Step } from "./plugin.js";

const schema: PluginSchema = {
  fields: [
    {
      name: "requests",
      field: { type: "integer", min: 1, max: 1_000_000_000 },
      required: true,
      about: "requests allowed per window, per client",
    },
    { name: "window_seconds", field: { type: "integer", min: 1, max: 86_400 }, required: true, about: "length of the window in seconds" },
    {
      name: "scope",
      field: {
        type: "string",
        check: (value) =>
          value === "instance" || value === "cluster"
            ? undefined
            : `${JSON.stringify(value)} is not a scope: use "instance" (each gateway counts for itself, the default) or "cluster" (one count across gateways, in Redis)`,
      },
      about: "instance (default: each gateway counts for itself) or cluster (one count across gateways, kept in Redis)",
    },
  ],
};

export interface RateLimitConfig {
  readonly name: string;
  readonly requests: number;
  readonly windowSeconds: number;
  readonly scope: "instance" | "cluster";
}

export interface RouteLimit {
  readonly config: RateLimitConfig;
  /** This gateway's own counts (scope instance, and cluster's fallback while Redis does not answer). */
  readonly local: RateLimiter;
}

/** Scratch space for decisions: each is filled and read within one synchronous step. */
const decision: RateDecision = { allowed: true, limit: 0, remaining: 0, resetSeconds: 0, retryAfterSeconds: 0 };

/**
 * The client a limit counts: the consumer when a key authenticated it, else
 * the identity, else the peer address, an IPv6 peer by its /64 (one host
 * usually holds a whole /64 and could otherwise take a fresh address per
 * request; RFC 4291 section 2.5.1).
 */
export function rateClientOf(exchange: Exchange): string {
  return exchange.consumerId !== undefined
    ? `c:${exchange.consumerId}`
    : exchange.identityId !== undefined
      ? `i:${exchange.identityId}`
      : `a:${exchange.peer.includes(":") ? clientBucketOf(exchange.peer) : exchange.peer}`;
}

/** Adds the RateLimit headers (the tightest limit's) to the route's answers. */
function report(exchange: Exchange, limit: number, remaining: number, reset: number): void {
  exchange.extra ??= [];
  exchange.extra.push("ratelimit-limit", String(limit), "ratelimit-remaining", String(remaining), "ratelimit-reset", String(reset));
}

/** The 429, with RateLimit headers of the limit that refused and Retry-After. */
export function refuse(exchange: Exchange, refused: RateDecision): false {
  exchange.metrics!.rateLimited++;
  report(exchange, refused.limit, 0, refused.resetSeconds);
  exchange.answer(rateLimitedAnswer(exchange.route!.name, refused.retryAfterSeconds), ["retry-after", String(refused.retryAfterSeconds)]);
  return false;
}

/** What the headers report: the tightest limit that let the request through. */
interface Tightest {
  limit: number;
  remaining: number;
  reset: number;
}

/** Takes a request from each limit's own counts; on a refusal gives back what the others took. */
function takeLocally(limits: readonly RouteLimit[], client: string, now: number, tightest: Tightest): RateDecision | undefined {
  for (let i = 0; i < limits.length; i++) {
    const rate = limits[i]!;
    rate.local.take(client, now, rate.config.requests, decision);
    if (!decision.allowed) {
      for (let j = 0; j < i; j++) limits[j]!.local.refund(client, now);
      return decision;
    }
    if (decision.remaining < tightest.remaining) {
      tightest.remaining = decision.remaining;
      tightest.limit = decision.limit;
      tightest.reset = decision.resetSeconds;
    }
  }
  return undefined;
}

/**
 * `rate-limit`: at most `requests` in any window of `window_seconds`
 * (sliding), per route, per client; beyond, 429 with Retry-After. Every limit
 * the route lists is one step: a refusal by one gives back what the others
 * counted, and the headers report the tightest. Limits of `scope: cluster`
 * are checked and counted in Redis, all of a request's in one atomic step
 * (rate-limit/redis-store.ts), after the instance ones; while Redis does not
 * answer in time the gateway counts them itself, and counts that it did.
 */
function rateLimitStep(instance: readonly RouteLimit[], cluster: readonly RouteLimit[], route: string): Step {
  const all = [...instance, ...cluster];
  return {
    kind: "rate-limit",
    run(exchange: Exchange): boolean | Promise<boolean> {
      const now = exchange.now === 0 ? exchange.deps.clock() : exchange.now;
      const client = rateClientOf(exchange);
      const tightest: Tightest = { limit: 0, remaining: Number.POSITIVE_INFINITY, reset: 0 };
      const store = exchange.deps.clusterRates;
      if (cluster.length === 0 || store === undefined || !store.usable()) {
        if (cluster.length > 0 && store !== undefined) exchange.deps.metrics.rateLimitStoreFallback();
        const refused = takeLocally(all, client, now, tightest);
        if (refused !== undefined) return refuse(exchange, refused);
        report(exchange, tightest.limit, tightest.remaining, tightest.reset);
        return true;
      }
      const refused = takeLocally(instance, client, now, tightest);
      if (refused !== undefined) return refuse(exchange, refused);
      const organization = exchange.compiled!.state.organizationId;
      const keys = cluster.map((rate) => ({
        key: `gatehouse:rl:${organization}:${route}:${rate.config.name}:${rate.config.windowSeconds}:${client}`,
        requests: rate.config.requests,
        windowMs: rate.config.windowSeconds * 1000,
      }));
      return store.take(keys).then(
        (verdict) => {
          if (!verdict.allowed) {
            for (const rate of instance) rate.local.refund(client, now);
            const limit = cluster[verdict.refusedBy]!.config.requests;
            return refuse(exchange, {
              allowed: false,
              limit,
              remaining: 0,
              resetSeconds: Math.max(1, Math.ceil(verdict.resetMs / 1000)),
              retryAfterSeconds: Math.max(1, Math.ceil(verdict.retryAfterMs / 1000)),
            });
          }
          verdict.remaining.forEach((remaining, i) => {
            if (remaining < tightest.remaining) {
              tightest.remaining = remaining;
              tightest.limit = cluster[i]!.config.requests;
              tightest.reset = Math.max(1, Math.ceil(verdict.resetMs[i]! / 1000));
            }
          });
          report(exchange, tightest.limit, tightest.remaining, tightest.reset);
          return true;
        },
        () => {
          // Redis did not answer in time: this gateway counts the cluster limits itself, this once.
          exchange.deps.metrics.rateLimitStoreFallback();
          const fallback = takeLocally(cluster, client, now, tightest);
          if (fallback !== undefined) {
            for (const rate of instance) rate.local.refund(client, now);
            return refuse(exchange, fallback);
          }
          report(exchange, tightest.limit, tightest.remaining, tightest.reset);
          return true;
        },
      );
    },
  };
}

export const rateLimit: GatewayPlugin<RateLimitConfig> = {
  type: "rate-limit",
  schema,
  compile: (config, context) => ({
    name: context.name,
    requests: config.requests as number,
    windowSeconds: config.window_seconds as number,
    scope: config.scope === "cluster" ? "cluster" : "instance",
  }),
  attach(instances, route) {
    const limits = instances.map((config) => ({
      config,
      // Counts survive a new revision unless the route, the plugin or its window changed identity.
      local: route.carried(`rate-limit\u0000${route.route.name}\u0000${config.name}\u0000${config.windowSeconds}`, () =>
        createRateLimiter({
          windowSeconds: config.windowSeconds,
          ...(route.maxClientsPerLimiter !== undefined ? { maxClients: route.maxClientsPerLimiter } : {}),
        }),
      ),
    }));
    const cluster = limits.filter((rate) => rate.config.scope === "cluster");
    if (cluster.length > 0 && !route.clusterRateLimits) {
      route.notice("rate-limit plugins of scope cluster are counted by each gateway for itself: this gateway has no GATEWAY_REDIS_URL", {
        plugins: cluster.map((rate) => rate.config.name),
      });
    }
    const shared = route.clusterRateLimits ? cluster : [];
    route.addStep(
      stages.rateLimit,
      rateLimitStep(
        limits.filter((rate) => !shared.includes(rate)),
        shared,
        route.route.name,
      ),
    );
  },
};
