import type { Publish } from "../domain/changes/topic.js";
import { createEventLog } from "../domain/events/record-events.js";
import type { EventLog } from "../domain/events/event-log.js";
import type { Tx } from "../storage/database.js";
import { createWebhookStore } from "../storage/webhook-store.js";
import type { Platform } from "./platform.js";

/** What one transaction gives a composition function to bind stores to. */
export interface Scope {
  tx: Tx;
  /** Notifications sent at commit (the change feed). */
  publish: Publish;
  /** The events outbox, in this transaction (docs/events.md "Guarantees"). */
  events: EventLog;
}

/**
 * Runs fn in one transaction of the platform's database: what it publishes
 * reaches every instance once, and only if, it commits, and so do the events
 * it records (they are rows of the same transaction).
 */
export function transact<T>(platform: Pick<Platform, "feed" | "database" | "clock">, fn: (scope: Scope) => Promise<T>): Promise<T> {
  return platform.feed.transaction(async (tx, publish) => {
    const events = createEventLog({ store: createWebhookStore(tx, platform.database.provider), publish, clock: platform.clock });
    const result = await fn({ tx, publish, events });
    // Last, in the same transaction: the change's events are written if, and only if, it commits.
    await events.flush();
    return result;
  });
}
