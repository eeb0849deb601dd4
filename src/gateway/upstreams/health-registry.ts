import type { Dispatcher } from "undici";
import type { Logger } from "../../server/logger.js";
import { TargetHealth, type ActiveCheck, type PassiveCheck } from "./target-health.js";
import type { HealthRegistry, UpstreamPool } from "./upstream-pool.js";

/**
 * The health of every target this gateway sends to, by upstream and URL. A
 * target that stays in its upstream across revisions keeps its health (and
 * its probe, unless the probe's settings changed); one that left has its
 * probe stopped. A change of state writes one log line.
 */
export function createHealthRegistry(logger: Pick<Logger, "warn">): HealthRegistry & {
  /** Every target's health, for the gauge. */
  all(): Iterable<TargetHealth>;
  close(): void;
} {
  const entries = new Map<string, TargetHealth>();
  const keyOf = (upstream: string, url: string) => `${upstream}\u0000${url}`;
  const changed = (health: TargetHealth, healthy: boolean, reason: string) =>
    logger.warn(
      { upstream: health.upstream, target: health.target, healthy, reason },
      healthy ? "upstream target healthy" : "upstream target unhealthy",
    );
  return {
    healthOf(upstream: string, url: string, active: ActiveCheck | undefined, passive: PassiveCheck | undefined, dispatcher: Dispatcher) {
      const key = keyOf(upstream, url);
      let health = entries.get(key);
      if (health === undefined) {
        health = new TargetHealth(upstream, url, changed);
        entries.set(key, health);
      }
      health.configure(active, passive, dispatcher);
      return health;
    },
    retain(inUse: Iterable<UpstreamPool>) {
      const kept = new Set<TargetHealth>();
      for (const pool of inUse) for (const target of pool.targets) kept.add(target.health);
      for (const [key, health] of entries) {
        if (kept.has(health)) continue;
        health.stop();
        entries.delete(key);
      }
    },
    all: () => entries.values(),
    close() {
      for (const health of entries.values()) health.stop();
      entries.clear();
    },
  };
}
