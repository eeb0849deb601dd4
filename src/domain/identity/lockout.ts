import { DomainError } from "../errors.js";

/**
 * The lockout rule for password sign-ins, end users and operators alike, with
 * which an attacker who knows an identifier cannot keep its owner out (OWASP
 * Authentication Cheat Sheet, "Account Lockout": lock on the combination of
 * account and source, and prefer growing delays to a hard lock):
 *
 * - Per (identifier, client address): after `threshold` failures within the
 *   window, that pair is locked until the oldest of those failures leaves the
 *   window, even with the right password (docs/identity.md, "Brute-force
 *   protection"). It is counted per client: the client that failed is
 *   refused; the owner elsewhere is not.
 * - Per identifier, across addresses: once it has `threshold` failures within
 *   the window, every further attempt from any address waits a delay after
 *   the newest failure, doubling with each failure beyond the threshold (1 s,
 *   2 s, 4 s, ...) up to `maxBackoffSeconds`. That bounds guessing spread over
 *   many addresses to one attempt per delay, without a hard lock from anywhere.
 *
 * Refused attempts are not failures, so being refused never extends anything.
 */
export interface LockoutPolicy {
  threshold: number;
  windowSeconds: number;
}

/** The first delay once an identifier reaches the threshold, and the longest. */
export const backoff = { firstSeconds: 1, maxSeconds: 300 } as const;

/** Failures of the window, newest first: of the identifier from this client, and of the identifier from anywhere. */
export interface FailureHistory {
  /** At most `threshold` (the newest), from this client. */
  pair: readonly Date[];
  /** At most identifierFailureLimit(threshold) (the newest), from any client. */
  identifier: readonly Date[];
}

/** How many of an identifier's newest failures decide its delay: past this many it is at the cap. */
export function identifierFailureLimit(threshold: number): number {
  return threshold + Math.ceil(Math.log2(backoff.maxSeconds / backoff.firstSeconds)) + 1;
}

/** The delay after the newest failure, for `failures` failures within the window (0 below the threshold). */
export function backoffSeconds(failures: number, threshold: number): number {
  if (failures < threshold) return 0;
  return Math.min(backoff.maxSeconds, backoff.firstSeconds * 2 ** (failures - threshold));
}

function secondsUntil(untilMs: number, nowMs: number): number {
  return Math.max(1, Math.ceil((untilMs - nowMs) / 1000));
}

/**
 * Null when a password attempt may be checked, else the 429 to answer:
 * `login_locked` (this client, for this identifier) or `login_throttled`
 * (this identifier, from anywhere, for a while). `what` names the identifier
 * in messages ("identifier", "e-mail address").
 */
export function lockoutRefusal(policy: LockoutPolicy, history: FailureHistory, now: Date, what: string): DomainError | null {
  const nowMs = now.getTime();
  const windowMs = policy.windowSeconds * 1000;
  const pairThreshold = history.pair[policy.threshold - 1];
  if (pairThreshold !== undefined && pairThreshold.getTime() + windowMs > nowMs) {
    const seconds = secondsUntil(pairThreshold.getTime() + windowMs, nowMs);
    return new DomainError(
      "resource_exhausted",
      "login_locked",
      `too many failed sign-ins for this ${what} from this address (${policy.threshold} within ${policy.windowSeconds} s); try again in ${seconds} s, or sign in with a passkey or a one-time link`,
      [],
      seconds,
    );
  }
  const newest = history.identifier[0];
  const delay = backoffSeconds(history.identifier.length, policy.threshold);
  if (newest !== undefined && delay > 0 && newest.getTime() + delay * 1000 > nowMs) {
    const seconds = secondsUntil(newest.getTime() + delay * 1000, nowMs);
    return new DomainError(
      "resource_exhausted",
      "login_throttled",
      `this ${what} had ${history.identifier.length} failed sign-ins within ${policy.windowSeconds} s; its password can be tried again in ${seconds} s (a passkey or a one-time link works now)`,
      [],
      seconds,
    );
  }
  return null;
}

/**
 * Runs one password attempt per key at a time on this instance, so each sees
 * the failures of the ones before it: a burst of parallel guesses gets no
 * more checks than the rule allows (per instance; failures are recorded in
 * the database and count on every instance).
 */
export function createKeyedSerializer() {
  const tails = new Map<string, Promise<void>>();
  return async <T>(key: string, fn: () => Promise<T>): Promise<T> => {
    const previous = tails.get(key) ?? Promise.resolve();
    let done = () => {};
    const current = new Promise<void>((resolve) => {
      done = resolve;
    });
    const tail = previous.then(() => current);
    tails.set(key, tail);
    await previous;
    try {
      return await fn();
    } finally {
      done();
      if (tails.get(key) === tail) tails.delete(key);
    }
  };
}
