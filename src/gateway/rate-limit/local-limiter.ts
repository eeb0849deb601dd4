/**
 * The counts behind a `rate-limit` plugin on one route, per client: at most
 * `requests` admitted in any window of `window_seconds`, counted by this
 * gateway instance for itself (docs/gateway.md, "rate-limit").
 *
 * Algorithm: a sliding window over sub-windows. The window is cut into
 * `subWindows` slices; each client keeps, per slice, the admissions and the
 * time of the last of them. A slice's admissions are released together once
 * its last admission has left the window (last + window <= now), so every
 * admission is counted for at least a whole window after it happened: no
 * window of the configured length ever holds more than `requests`
 * admissions (the guarantee is exact, never approximate). The price is that
 * the earlier admissions of a slice are released a little late, at most one
 * slice (a tenth of the window). Memory is a fixed 22 numbers per client,
 * whatever `requests` is (a log would keep one timestamp per admission).
 *
 * Because a slice is released at its last admission plus the window, the
 * time until everything counted is released (RateLimit-Reset) is never more
 * than the window, and the time until the next admission (Retry-After) is
 * exact for these counts.
 *
 * Clients whose slices have all been released are dropped by a sweep; beyond
 * `maxClients` the longest-known client is dropped, so a flood of new
 * addresses bounds the memory instead of growing it.
 */
export const subWindows = 10;
const slots = subWindows + 1;

interface ClientWindow {
  /** Per slot (slice number modulo `slots`): admissions at [i], time of the last of them (epoch ms) at [slots + i]. */
  readonly slices: Float64Array;
  /** The newest slice number an admission was counted in. */
  head: number;
  /** Admissions not yet released. */
  total: number;
}

/** What a take decided, with the values of the RateLimit headers; reused by the caller. */
export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until every counted request has left the window (at most the window). */
  resetSeconds: number;
  /** When refused: seconds until a request would be admitted. */
  retryAfterSeconds: number;
}

export interface RateLimiter {
  readonly windowSeconds: number;
  /** Counts a request of `client` at `now` (epoch ms) if `requests` allow it; fills `out`. */
  take(client: string, now: number, requests: number, out: RateDecision): void;
  /** Gives back a request taken at `now` (another limiter of the route refused it). */
  refund(client: string, now: number): void;
  /** Clients known (for tests and metrics). */
  readonly size: number;
}

export interface RateLimiterOptions {
  windowSeconds: number;
  /** Most clients remembered at once (default 100,000). */
  maxClients?: number;
}

export function createRateLimiter(options: RateLimiterOptions): RateLimiter {
  const windowMs = options.windowSeconds * 1000;
  const sliceMs = windowMs / subWindows;
  const maxClients = options.maxClients ?? 100_000;
  const clients = new Map<string, ClientWindow>();
  let sweepAt = 0;

  /** Releases every slice whose last admission has left the window. */
  function release(window: ClientWindow, now: number): void {
    if (window.total === 0) return;
    const slices = window.slices;
    for (let i = 0; i < slots; i++) {
      const count = slices[i]!;
      if (count > 0 && slices[slots + i]! + windowMs <= now) {
        window.total -= count;
        slices[i] = 0;
      }
    }
  }

  /** Drops clients with nothing counted; then, if still full, the longest-known ones. */
  function makeRoom(slice: number, now: number): void {
    if (slice >= sweepAt) {
      sweepAt = slice + subWindows;
      for (const [client, window] of clients) {
        release(window, now);
        if (window.total === 0) clients.delete(client);
      }
    }
    while (clients.size >= maxClients) {
      const oldest = clients.keys().next();
      if (oldest.done) break;
      clients.delete(oldest.value);
    }
  }

  return {
    windowSeconds: options.windowSeconds,
    get size() {
      return clients.size;
    },
    take(client, now, requests, out) {
      const slice = Math.floor(now / sliceMs);
      let window = clients.get(client);
      if (window === undefined) {
        if (clients.size >= maxClients || (clients.size > 1024 && slice >= sweepAt)) makeRoom(slice, now);
        window = { slices: new Float64Array(2 * slots), head: slice, total: 0 };
        clients.set(client, window);
      } else {
        release(window, now);
      }
      const slices = window.slices;
      out.limit = requests;
      if (window.total < requests) {
        const i = slice % slots;
        // A slot still holding an older slice has been released (its last admission is over a window old).
        slices[i] = slices[i]! + 1;
        slices[slots + i] = now;
        window.head = slice;
        window.total++;
        out.allowed = true;
        out.retryAfterSeconds = 0;
      } else {
        out.allowed = false;
        // The first release (oldest slice first) that brings the count under the limit.
        let left = window.total;
        let at = now + windowMs;
        for (let s = window.head - subWindows; s <= window.head; s++) {
          const i = ((s % slots) + slots) % slots;
          if (slices[i] === 0) continue;
          left -= slices[i]!;
          if (left < requests) {
            at = slices[slots + i]! + windowMs;
            break;
          }
        }
        out.retryAfterSeconds = Math.max(1, Math.ceil((at - now) / 1000));
      }
      out.remaining = Math.max(0, requests - window.total);
      let newest = 0;
      for (let i = 0; i < slots; i++) if (slices[i]! > 0 && slices[slots + i]! > newest) newest = slices[slots + i]!;
      out.resetSeconds = window.total === 0 ? 0 : Math.max(1, Math.ceil((newest + windowMs - now) / 1000));
    },
    refund(client, now) {
      const window = clients.get(client);
      if (window === undefined) return;
      const slice = Math.floor(now / sliceMs);
      const i = slice % slots;
      if (slice === window.head && window.slices[i]! > 0) {
        window.slices[i] = window.slices[i]! - 1;
        window.total--;
      }
    },
  };
}
