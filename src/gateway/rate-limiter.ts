/**
 * The counts behind a `rate-limit` plugin on one route, per client: at most
 * `requests` admitted in any window of `window_seconds`, counted by this
 * gateway instance for itself (CONTRACT.md "Gateway").
 *
 * Algorithm: a sliding window over sub-windows. The window is cut into
 * `subWindows` slices; each client keeps one count per slice. A request at
 * time t is admitted when the admissions of every slice that overlaps
 * [t - window, t] number fewer than `requests`. Since that set covers the
 * whole window before t, no window of the configured length ever holds more
 * than `requests` admissions (the guarantee is exact, never approximate);
 * the price is that an old slice is let go only once all of it has left the
 * window, so a client at its limit may wait up to one slice (a tenth of the
 * window) longer than a perfect sliding log would make it wait. Memory is a
 * fixed 11 numbers per client, whatever `requests` is (a log would keep one
 * timestamp per admitted request).
 *
 * Clients whose slices have all expired are dropped by a sweep; beyond
 * `maxClients` the longest-known client is dropped, so a flood of new
 * addresses bounds the memory instead of growing it.
 */
export const subWindows = 10;
const slots = subWindows + 1;

interface ClientWindow {
  /** Admissions per slice, a ring indexed by slice number modulo `slots`. */
  counts: number[];
  /** The newest slice counted. */
  head: number;
  total: number;
}

/** What a take decided, with the values of the RateLimit headers; reused by the caller. */
export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until every counted request has left the window. */
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

  function advance(window: ClientWindow, slice: number): void {
    if (slice <= window.head) return;
    if (slice - window.head >= slots) {
      window.counts.fill(0);
      window.total = 0;
    } else {
      for (let s = window.head + 1; s <= slice; s++) {
        const i = s % slots;
        window.total -= window.counts[i] as number;
        window.counts[i] = 0;
      }
    }
    window.head = slice;
  }

  /** Drops clients whose every slice has left the window; then, if still full, the longest-known ones. */
  function makeRoom(slice: number): void {
    if (slice >= sweepAt) {
      sweepAt = slice + subWindows;
      for (const [client, window] of clients) if (slice - window.head >= slots) clients.delete(client);
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
        if (clients.size >= maxClients || (clients.size > 1024 && slice >= sweepAt)) makeRoom(slice);
        window = { counts: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], head: slice, total: 0 };
        clients.set(client, window);
      } else {
        advance(window, slice);
      }
      out.limit = requests;
      if (window.total < requests) {
        window.counts[slice % slots] = (window.counts[slice % slots] as number) + 1;
        window.total++;
        out.allowed = true;
        out.retryAfterSeconds = 0;
      } else {
        out.allowed = false;
        // The first slice whose departure brings the count under the limit.
        let left = window.total;
        let at = slice;
        for (let s = slice - subWindows; s <= slice; s++) {
          left -= window.counts[((s % slots) + slots) % slots] as number;
          if (left < requests) {
            at = s;
            break;
          }
        }
        out.retryAfterSeconds = Math.max(1, Math.ceil(((at + 1) * sliceMs + windowMs - now) / 1000));
      }
      out.remaining = Math.max(0, requests - window.total);
      out.resetSeconds = window.total === 0 ? 0 : Math.max(1, Math.ceil(((slice + 1) * sliceMs + windowMs - now) / 1000));
    },
    refund(client, now) {
      const window = clients.get(client);
      if (window === undefined) return;
      const slice = Math.floor(now / sliceMs);
      const i = slice % slots;
      if (slice === window.head && (window.counts[i] as number) > 0) {
        window.counts[i] = (window.counts[i] as number) - 1;
        window.total--;
      }
    },
  };
}
