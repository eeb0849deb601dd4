import { randomUUID } from "node:crypto";
import { hashToken } from "../../crypto/tokens.js";
import { clientBucketOf } from "../../net/ip-address.js";
import type { FailureQuery as StoredFailureQuery, IdentityStore, RecentFailures } from "./identity-store.js";
import type { Clock } from "../clock.js";
import { DomainError } from "../errors.js";
import { createKeyedSerializer, identifierFailureLimit, lockoutRefusal } from "./lockout.js";
import { defaultSettings, type IdentitySettings } from "./settings.js";
import { createWindowLimiter } from "./sign-in-limits.js";

/** The failures a login looks at, and the window they were asked for. */
export interface FailureQuery extends StoredFailureQuery {
  windowSeconds: number;
}

const defaultLockout = { lockoutThreshold: defaultSettings.lockoutThreshold, lockoutWindowSeconds: defaultSettings.lockoutWindowSeconds };

export type LimitsStore = Pick<
  IdentityStore,
  "recordLoginFailure" | "recentLoginFailures" | "clearLoginFailures" | "hitRateCounter" | "prune"
>;

export interface LimitsDeps {
  store: LimitsStore;
  clock: Clock;
  /** Called when housekeeping fails; it never fails a request. */
  onError?: (error: unknown) => void;
}

/** A password login allowed to check its password. */
export interface LoginAttempt {
  /** Records the failure (it counts towards the lockout on every instance). */
  failed(): Promise<void>;
}

const minuteMs = 60_000;
const ipLimitMessage = "too many identity requests from this address";
const hourMs = 3_600_000;
const pruneEveryMs = 10 * minuteMs;
/** Longer than any window a setting allows (7 days). */
const failureRetentionMs = 8 * 24 * hourMs;

function tooMany(reason: string, message: string, seconds: number): DomainError {
  return new DomainError("resource_exhausted", reason, `${message}; try again in ${seconds} s`, [], seconds);
}

/**
 * Brute-force protection whose state lives in the database, so every instance
 * sees the same counts: the lockout rule of lockout.ts after failed password
 * logins (per identifier and client address, with growing delays per
 * identifier), a per-address limit on client-side identity requests, and a
 * limit on magic links (and reset tokens) issued per identifier.
 */
export function createLimits(deps: LimitsDeps) {
  const housekeeping = createLimitsHousekeeping(deps);
  /** Password logins of one identifier run one at a time on this instance. */
  const serialize = createKeyedSerializer();
  /** The lockout settings each organisation had at its last login here. */
  const lockoutSeen = new Map<string, Pick<IdentitySettings, "lockoutThreshold" | "lockoutWindowSeconds">>();

  const windowLimiter = createWindowLimiter((key, windowStart) => deps.store.hitRateCounter(key, windowStart));

  /** Counts one hit in a fixed window; resource_exhausted with Retry-After past the limit. */
  async function hit(key: string, windowMs: number, limit: number, reason: string, message: string): Promise<void> {
    const now = deps.clock();
    const seconds = await windowLimiter.hit(key, now, windowMs, limit);
    housekeeping(now.getTime());
    if (seconds !== null) throw tooMany(reason, message, seconds);
  }

  return {
    /** The per-address limit of client-side identity requests of one organisation (an IPv6 client counts as its /64). */
    checkClientAddress(organizationId: string, address: string, settings: Pick<IdentitySettings, "ipLimitPerMinute">): Promise<void> {
      return hit(`ip:${organizationId}:${clientBucketOf(address)}`, minuteMs, settings.ipLimitPerMinute, "ip_rate_limited", ipLimitMessage);
    },

    /**
     * The per-address limit again, from memory only: refuses at once a client
     * this instance already saw over its limit in this minute, so a flood
     * from it costs no query at all (before the settings are even read).
     */
    refuseKnownClient(organizationId: string, address: string): void {
      const seconds = windowLimiter.knownOver(`ip:${organizationId}:${clientBucketOf(address)}`, deps.clock(), minuteMs);
      if (seconds !== null) throw tooMany("ip_rate_limited", ipLimitMessage, seconds);
    },

    /** The per-identifier limit on issuing magic links or password-reset tokens. */
    checkIssuance(
      kind: "magic_link" | "password_reset",
      organizationId: string,
      identifier: string,
      settings: Pick<IdentitySettings, "magicLinkLimitPerHour">,
    ): Promise<void> {
      const what = kind === "magic_link" ? "magic links" : "password-reset tokens";
      return hit(
        `${kind}:${organizationId}:${hashToken(identifier)}`,
        hourMs,
        settings.magicLinkLimitPerHour,
        `${kind}_rate_limited`,
        `too many ${what} for this identifier`,
      );
    },

    /**
     * Which failures a login of this identifier from this client must look
     * at, so the login can fetch them in the query that finds the identity.
     * It assumes the organisation's lockout settings seen last (defaults at
     * first); beginLogin checks the assumption.
     */
    failureQuery(organizationId: string, identifier: string, address: string | undefined): FailureQuery {
      const assumed = lockoutSeen.get(organizationId) ?? defaultLockout;
      return {
        identifierHash: hashToken(identifier),
        clientHash: hashToken(clientBucketOf(address)),
        since: new Date(deps.clock().getTime() - assumed.lockoutWindowSeconds * 1000 + 1),
        threshold: assumed.lockoutThreshold,
        identifierLimit: identifierFailureLimit(assumed.lockoutThreshold),
        windowSeconds: assumed.lockoutWindowSeconds,
      };
    },

    /**
     * Runs one password login of an identifier at a time on this instance, so
     * each sees the failures of the ones before it: a burst of parallel guesses
     * gets no more checks than the lockout rule allows (per instance; failures
     * are recorded in the database and count on every instance).
     */
    oneAtATime<T>(organizationId: string, identifier: string, fn: () => Promise<T>): Promise<T> {
      return serialize(`${organizationId}:${identifier}`, fn);
    },

    /**
     * Decides whether a password login may check its password, given the
     * failures `failureQuery` asked for (lockout.ts): refused with 429 and
     * Retry-After, whatever the password, while this client is locked out of
     * the identifier (login_locked) or the identifier waits out its delay
     * (login_throttled). Refusals are not failures.
     */
    async beginLogin(
      organizationId: string,
      settings: Pick<IdentitySettings, "lockoutThreshold" | "lockoutWindowSeconds">,
      seen: { query: FailureQuery; failures: RecentFailures },
    ): Promise<LoginAttempt> {
      const now = deps.clock();
      const policy = { threshold: settings.lockoutThreshold, windowSeconds: settings.lockoutWindowSeconds };
      let { query, failures } = seen;
      if (query.threshold !== policy.threshold || query.windowSeconds !== policy.windowSeconds) {
        // The settings changed since the query was built: look again with the right ones.
        query = {
          ...query,
          since: new Date(now.getTime() - policy.windowSeconds * 1000 + 1),
          threshold: policy.threshold,
          identifierLimit: identifierFailureLimit(policy.threshold),
          windowSeconds: policy.windowSeconds,
        };
        failures = await deps.store.recentLoginFailures(organizationId, query);
      }
      lockoutSeen.set(organizationId, { lockoutThreshold: policy.threshold, lockoutWindowSeconds: policy.windowSeconds });
      const refusal = lockoutRefusal(policy, failures, now, "identifier");
      if (refusal) throw refusal;
      housekeeping(now.getTime());
      const { identifierHash, clientHash } = query;
      return {
        failed: () =>
          deps.store.recordLoginFailure({ id: randomUUID(), organizationId, identifierHash, clientHash, createdAt: deps.clock() }),
      };
    },

    /** Forgets an identifier's failures (after its password was reset). */
    clearFailures(organizationId: string, identifier: string): Promise<void> {
      return deps.store.clearLoginFailures(organizationId, hashToken(identifier));
    },
  };
}

export type Limits = ReturnType<typeof createLimits>;

/**
 * Deletes rate counters and failures too old to matter, at most every 10
 * minutes per instance, in the background (a failure is reported, never
 * thrown). End-user limits and operator sign-in each run one.
 */
export function createLimitsHousekeeping(deps: { store: Pick<IdentityStore, "prune">; onError?: (error: unknown) => void }) {
  let lastPrune = 0;
  return (nowMs: number): void => {
    if (nowMs - lastPrune < pruneEveryMs && nowMs >= lastPrune) return;
    lastPrune = nowMs;
    deps.store.prune(new Date(nowMs - 2 * hourMs), new Date(nowMs - failureRetentionMs)).catch((error: unknown) => deps.onError?.(error));
  };
}
