import type { Balancer } from "../../domain/config/config-document.js";
import type { TargetHealth } from "./target-health.js";

/** What a balancer knows of a target. */
export interface BalancedTarget {
  readonly weight: number;
  readonly health: TargetHealth;
}

/** Picks a target for one try; `tried` are the targets this request already tried (retries go elsewhere when they can). */
export interface TargetPicker<T extends BalancedTarget> {
  pick(now: number, key: string | undefined, tried: readonly T[] | undefined): T | undefined;
}

function usable<T extends BalancedTarget>(target: T, now: number, tried: readonly T[] | undefined): boolean {
  return target.weight > 0 && target.health.available(now) && (tried === undefined || !tried.includes(target));
}

/**
 * Weighted round-robin, smooth (the interleaving nginx uses): each pick adds
 * every usable target's weight to its credit, takes the target with the most
 * and charges it the total. Over any run of picks each target's share stays
 * within one pick of its weight's share, and equal weights alternate.
 */
function roundRobin<T extends BalancedTarget>(targets: readonly T[]): TargetPicker<T> {
  const credit = new Float64Array(targets.length);
  return {
    pick(now, _key, tried) {
      let total = 0;
      let best = -1;
      for (let i = 0; i < targets.length; i++) {
        const target = targets[i]!;
        if (!usable(target, now, tried)) continue;
        credit[i]! += target.weight;
        total += target.weight;
        if (best === -1 || credit[i]! > credit[best]!) best = i;
      }
      if (best === -1) return undefined;
      credit[best]! -= total;
      return targets[best];
    },
  };
}

/**
 * Least requests: the usable target with the fewest requests in flight for
 * its weight; ties go round in turn, so an idle pool still spreads.
 */
function leastRequests<T extends BalancedTarget>(targets: readonly T[]): TargetPicker<T> {
  let turn = 0;
  return {
    pick(now, _key, tried) {
      let best: T | undefined;
      let bestLoad = Number.POSITIVE_INFINITY;
      const n = targets.length;
      turn = (turn + 1) % n;
      for (let k = 0; k < n; k++) {
        const target = targets[(turn + k) % n]!;
        if (!usable(target, now, tried)) continue;
        const load = (target.health.inFlight + 1) / target.weight;
        if (load < bestLoad) {
          best = target;
          bestLoad = load;
        }
      }
      return best;
    },
  };
}

/** FNV-1a, 32 bits: a fast, well-spread hash for ring points and keys (not a security boundary). */
export function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  // A final avalanche (murmur3's fmix32): FNV alone clusters keys that differ only at the end.
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  return hash >>> 0;
}

/** Ring points per 100 of weight. */
const pointsPerHundred = 100;

/**
 * Consistent hashing on a ring (Karger et al.): each target holds points in
 * proportion to its weight, a key goes to the first point at or after its
 * hash. A target that leaves (unhealthy, drained) is skipped: its keys move
 * to the next point's target, and no other key moves. The points of a target
 * come from its URL, so they are the same on every gateway and every revision.
 */
function consistentHash<T extends BalancedTarget & { readonly url: string }>(targets: readonly T[]): TargetPicker<T> {
  const points: { at: number; target: number }[] = [];
  targets.forEach((target, index) => {
    const count = target.weight === 0 ? 0 : Math.max(1, Math.round((target.weight * pointsPerHundred) / 100));
    for (let i = 0; i < count; i++) points.push({ at: fnv1a(`${target.url}#${i}`), target: index });
  });
  points.sort((a, b) => a.at - b.at || a.target - b.target);
  const at = Uint32Array.from(points, (p) => p.at);
  const owner = Uint16Array.from(points, (p) => p.target);
  const fallback = roundRobin(targets);
  return {
    pick(now, key, tried) {
      if (at.length === 0) return undefined;
      if (key === undefined) return fallback.pick(now, key, tried);
      const hash = fnv1a(key);
      // The first point at or after the hash (binary search), wrapping around.
      let low = 0;
      let high = at.length;
      while (low < high) {
        const mid = (low + high) >>> 1;
        if (at[mid]! < hash) low = mid + 1;
        else high = mid;
      }
      for (let k = 0; k < at.length; k++) {
        const target = targets[owner[(low + k) % at.length]!]!;
        if (usable(target, now, tried)) return target;
      }
      return undefined;
    },
  };
}

export function createPicker<T extends BalancedTarget & { readonly url: string }>(
  balancer: Balancer,
  targets: readonly T[],
): TargetPicker<T> {
  switch (balancer) {
    case "least-requests":
      return leastRequests(targets);
    case "consistent-hash":
      return consistentHash(targets);
    default:
      return roundRobin(targets);
  }
}
