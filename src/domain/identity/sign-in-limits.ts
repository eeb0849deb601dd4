import { DomainError } from "../errors.js";

/**
 * Bounds on the work that anyone can cause before authenticating, set per
 * process (README "Configuration"). A password check costs about 22 ms of a
 * core (argon2id at the OWASP minimum), so without bounds a few hundred
 * unauthenticated requests queue every other sign-in behind them.
 */
export interface SignInLimits {
  /** argon2id computations waiting for a hashing thread, in the whole process; beyond it 429 hashing_busy. */
  hashingQueueLimit: number;
  /** Of those, how many one (organisation, client address) may have waiting. */
  hashingQueuePerClient: number;
  /**
   * Unauthenticated sign-in requests (passwords, links, passkeys) one client
   * address may have in progress on one instance; as many again times four
   * wait their turn, further ones are refused at once with 429 before any
   * database or hashing work.
   */
  concurrencyPerClient: number;
  /** Dashboard sign-in, setup, passkey and link requests per client address and minute (counted in the database, across instances). */
  dashboardPerMinute: number;
  /**
   * How long a request refused by a per-address limit waits before its 429
   * (jittered between half and all of it; 0: at once). Brute-force tools keep
   * a fixed number of requests in flight and send the next when one is
   * answered, so the delay bounds their rate, and the server's time goes to others.
   */
  refusalDelayMs: number;
}

export const defaultSignInLimits: SignInLimits = {
  // At about 45 checks per core and second, 64 waiting is at most about 0.7 s of waiting on two cores.
  hashingQueueLimit: 64,
  hashingQueuePerClient: 4,
  concurrencyPerClient: 4,
  dashboardPerMinute: 60,
  refusalDelayMs: 1000,
};

/** The refusals of per-address limits: only a flooding client gets them. */
const perAddressRefusals = new Set(["ip_rate_limited", "too_many_concurrent_sign_ins", "too_many_attempts"]);
/** Refusals held back at once, at most (beyond, they are answered at once: holding them costs a socket each). */
const maxHeldRefusals = 1000;

/**
 * Answers per-address refusals (429 ip_rate_limited, too_many_concurrent_sign_ins,
 * too_many_attempts) after `refusalDelayMs`, jittered so that a flood's
 * answers do not all come back at once. Any other outcome passes at once.
 */
export function createRefusalDelay(limits: Pick<SignInLimits, "refusalDelayMs">) {
  let held = 0;
  return async <T>(work: Promise<T>): Promise<T> => {
    try {
      return await work;
    } catch (error) {
      if (limits.refusalDelayMs > 0 && held < maxHeldRefusals && error instanceof DomainError && perAddressRefusals.has(error.reason)) {
        held++;
        try {
          await new Promise((resolve) => setTimeout(resolve, limits.refusalDelayMs * (0.5 + Math.random() / 2)));
        } finally {
          held--;
        }
      }
      throw error;
    }
  };
}

/** How many requests may wait per client address for each one in progress. */
const waitingPerRunning = 4;

/**
 * The per-address gate in front of every unauthenticated sign-in: at most
 * `concurrencyPerClient` requests of one client address in progress on this
 * instance, a few more waiting in arrival order, the rest refused before they
 * cost a database query or a hash. It is memory only and per instance: it
 * bounds bursts, while the per-minute counters in the database bound rates
 * across instances.
 */
export function createSignInGate(limits: Pick<SignInLimits, "concurrencyPerClient">) {
  const concurrency = limits.concurrencyPerClient;
  const maxWaiting = concurrency * waitingPerRunning;
  const clients = new Map<string, { running: number; waiting: (() => void)[] }>();

  return {
    /** Runs fn when the client has a free slot; a client of no address (a backend) is not gated. */
    async run<T>(client: string | undefined, fn: () => Promise<T>): Promise<T> {
      if (client === undefined) return fn();
      let state = clients.get(client);
      if (!state) {
        state = { running: 0, waiting: [] };
        clients.set(client, state);
      }
      const own = state;
      if (own.running >= concurrency) {
        if (own.waiting.length >= maxWaiting) {
          throw new DomainError(
            "resource_exhausted",
            "too_many_concurrent_sign_ins",
            `too many sign-in requests from this address at once (${concurrency} at a time); try again in 1 s`,
            [],
            1,
          );
        }
        // The request that ends hands its slot over (running stays the same).
        await new Promise<void>((resolve) => own.waiting.push(resolve));
      } else {
        own.running++;
      }
      try {
        return await fn();
      } finally {
        const next = own.waiting.shift();
        if (next) next();
        else if (--own.running === 0) clients.delete(client);
      }
    },
  };
}

export type SignInGate = ReturnType<typeof createSignInGate>;

/** How many refused windows the memo below keeps before it drops the ended ones. */
const memoCapacity = 10_000;

/**
 * Fixed-window counters in the database (shared by every instance) with a
 * memo of the windows this instance has already seen go over their limit:
 * within a window a count only grows, so once a client is over it, its
 * further requests are refused from memory, without a database write each
 * (a flood of refused requests would otherwise cost one write apiece).
 * Returns null when the hit is within the limit, else the seconds until the
 * window ends.
 */
export function createWindowLimiter(hitRateCounter: (key: string, windowStart: Date) => Promise<number>) {
  const overUntil = new Map<string, number>();
  const windowOf = (now: Date, windowMs: number) => {
    const start = Math.floor(now.getTime() / windowMs) * windowMs;
    return { start, seconds: Math.max(1, Math.ceil((start + windowMs - now.getTime()) / 1000)) };
  };
  return {
    /** Counts one hit: null within the limit, else the seconds until the window ends. */
    async hit(key: string, now: Date, windowMs: number, limit: number): Promise<number | null> {
      const window = windowOf(now, windowMs);
      const memo = `${key}@${window.start}`;
      if (overUntil.has(memo)) return window.seconds;
      const count = await hitRateCounter(key, new Date(window.start));
      if (count <= limit) return null;
      if (overUntil.size >= memoCapacity) {
        for (const [entry, until] of overUntil) if (until <= now.getTime()) overUntil.delete(entry);
        if (overUntil.size >= memoCapacity) overUntil.clear();
      }
      overUntil.set(memo, window.start + windowMs);
      return window.seconds;
    },
    /** Without counting: the seconds until the window ends when this instance already saw the key over its limit, else null. */
    knownOver(key: string, now: Date, windowMs: number): number | null {
      const window = windowOf(now, windowMs);
      return overUntil.has(`${key}@${window.start}`) ? window.seconds : null;
    },
  };
}
