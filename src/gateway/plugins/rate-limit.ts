import type { PluginSchema } from "../../domain/config/plugin-fields.js";
import { rateLimitedAnswer } from "../gateway-answer.js";
import type { Exchange } from "../gateway-handler.js";
import { createRateLimiter, type RateDecision, type RateLimiter } from "../rate-limit/local-limiter.js";
import { stages, type GatewayPlugin } from "./plugin.js";

const schema: PluginSchema = {
  fields: [
    {
      name: "requests",
      field: { type: "integer", min: 1, max: 1_000_000_000 },
      required: true,
      about: "requests allowed per window, per client",
    },
    { name: "window_seconds", field: { type: "integer", min: 1, max: 86_400 }, required: true, about: "length of the window in seconds" },
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

/** The client a limit counts: the consumer when a key authenticated it, else the identity, else the peer address. */
export function rateClientOf(exchange: Exchange): string {
  return exchange.consumerId !== undefined
    ? `c:${exchange.consumerId}`
    : exchange.identityId !== undefined
      ? `i:${exchange.identityId}`
      : `a:${exchange.peer}`;
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

/**
 * `rate-limit`: at most `requests` in any window of `window_seconds`
 * (sliding), per route, per client; beyond, 429 with Retry-After. Every limit
 * the route lists is one step: a refusal by one gives back what the others
 * counted, and the headers report the tightest.
 */
function rateLimitStep(limits: readonly RouteLimit[]) {
  return {
    run(exchange: Exchange): boolean {
      const now = exchange.now === 0 ? exchange.deps.clock() : exchange.now;
      const client = rateClientOf(exchange);
      let limit = 0;
      let remaining = Number.POSITIVE_INFINITY;
      let reset = 0;
      for (let i = 0; i < limits.length; i++) {
        const rate = limits[i]!;
        rate.local.take(client, now, rate.config.requests, decision);
        if (!decision.allowed) {
          for (let j = 0; j < i; j++) limits[j]!.local.refund(client, now);
          return refuse(exchange, decision);
        }
        if (decision.remaining < remaining) {
          remaining = decision.remaining;
          limit = decision.limit;
          reset = decision.resetSeconds;
        }
      }
      report(exchange, limit, remaining, reset);
      return true;
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
    route.addStep(stages.rateLimit, rateLimitStep(limits));
  },
};
