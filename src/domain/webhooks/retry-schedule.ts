// When a failed attempt is tried again (docs/events.md, "Delivery"): after about 5 s, 5 min, 30 min, 2 h, 5 h,
// 10 h and 10 h, each with up to 10% jitter either way so that a receiver coming back is not hit by every
// delivery at once; then the delivery has failed. A 429 or 503 with Retry-After (RFC 9110 §10.2.3) sets the
// delay instead, within [1 s, 24 h].

const second = 1000;
const minute = 60 * second;
const hour = 60 * minute;

/** The delays after the 1st, 2nd, ... failed attempt; after the last, the delivery has failed. */
export const retryDelaysMs: readonly number[] = [5 * second, 5 * minute, 30 * minute, 2 * hour, 5 * hour, 10 * hour, 10 * hour];

/** Attempts of one round: the first and one per delay. */
export const maxAttempts = retryDelaysMs.length + 1;

const jitter = 0.1;
const minRetryAfterMs = second;
const maxRetryAfterMs = 24 * hour;

/**
 * The delay before the next attempt after `attempt` (1-based) failed, or null
 * when it was the last. `unit` is a number in [0, 1) (the randomness seam).
 */
export function nextDelayMs(attempt: number, unit: number, retryAfterMs?: number): number | null {
  if (attempt >= maxAttempts) return null;
  if (retryAfterMs !== undefined) return Math.min(maxRetryAfterMs, Math.max(minRetryAfterMs, retryAfterMs));
  const base = retryDelaysMs[attempt - 1] as number;
  return Math.round(base * (1 - jitter + 2 * jitter * unit));
}

/**
 * Retry-After (RFC 9110 §10.2.3): delay-seconds or an HTTP-date, in
 * milliseconds from `now`; undefined when absent or unreadable.
 */
export function readRetryAfter(value: string | undefined, now: Date): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d{1,10}$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  if (Number.isNaN(at) || !/[A-Za-z]/.test(text)) return undefined;
  return Math.max(0, at - now.getTime());
}
