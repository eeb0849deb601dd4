import type { Clock } from "../domain/clock.js";
import type { ChangeAnnouncer, ChangeSubscriptions } from "../domain/changes/topic.js";
import { credentialChanges } from "../domain/changes/topics.js";

/**
 * What authentication read from the database about a credential, kept briefly
 * so that a request does not pay a query to learn what the previous one did.
 *
 * Staleness is bounded two ways. Every write that can take access away (key
 * revocation or rotation, role change, membership removal, account disabled)
 * calls changed(): this instance forgets everything at once, and every other
 * instance sharing the database forgets on the change feed's notification
 * (PostgreSQL NOTIFY; in-process on SQLite), or on a feed gap. Writes that
 * cannot reach the feed (an operator command in another process on SQLite) are
 * covered by the time to live. Only credentials that authenticated are kept:
 * unknown keys and keys without a membership are read again every time, so a
 * key or membership created a moment ago is never hidden.
 */
export interface CredentialCache {
  /** The cached value for key, or what load() returns (kept when keep(value) holds). */
  lookup<T extends object>(key: string, load: () => Promise<T | null>, keep: (value: T) => boolean): Promise<T | null>;
  /** Forget everything here and tell every other instance to forget too. */
  changed(): Promise<void>;
  close(): void;
}

export interface CredentialCacheOptions {
  clock: Clock;
  /** How long an entry is trusted without a notification; 0 disables caching. */
  ttlMs: number;
  maxEntries: number;
  feed?: ChangeSubscriptions & ChangeAnnouncer;
}

export function createCredentialCache(options: CredentialCacheOptions): CredentialCache {
  const entries = new Map<string, { value: object; expiresAt: number }>();
  // Bumped on every change: a load that started before a change must not store its stale result.
  let generation = 0;
  const forget = () => {
    generation++;
    entries.clear();
  };
  const subscription = options.feed?.subscribe(credentialChanges, forget);

  return {
    async lookup<T extends object>(key: string, load: () => Promise<T | null>, keep: (value: T) => boolean) {
      const now = options.clock().getTime();
      const hit = entries.get(key);
      if (hit && hit.expiresAt > now) return hit.value as T;
      if (hit) entries.delete(key);
      const started = generation;
      const value = await load();
      if (value && options.ttlMs > 0 && started === generation && keep(value)) {
        if (entries.size >= options.maxEntries) {
          // Maps iterate in insertion order: drop the oldest entry.
          const oldest = entries.keys().next();
          if (!oldest.done) entries.delete(oldest.value);
        }
        entries.set(key, { value, expiresAt: now + options.ttlMs });
      }
      return value;
    },
    async changed() {
      forget();
      if (options.feed) await announceCredentialsChanged(options.feed);
    },
    close() {
      subscription?.close();
      entries.clear();
    },
  };
}

/**
 * Tells every instance sharing the database to forget what it cached about
 * credentials: what changed() does, for a process that keeps no cache (an
 * operator command that revoked a key).
 */
export async function announceCredentialsChanged(feed: ChangeAnnouncer): Promise<void> {
  await feed.announce(credentialChanges, "changed");
}
