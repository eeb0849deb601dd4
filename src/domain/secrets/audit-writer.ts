import type { SecretAuditRecord } from "./secrets-store.js";

/**
 * Records retrieve events with group commit: events recorded in one turn of the
 * event loop, or while a write is in flight, are stored together by the next
 * INSERT. Each caller still waits until its own event is committed (no answer
 * without its audit record, and a failed write fails the retrieves it carried),
 * but under load many retrieves share one INSERT instead of paying one each.
 */
export function createAuditWriter(insert: (events: readonly SecretAuditRecord[]) => Promise<void>, maxBatch = 256) {
  let pending: { event: SecretAuditRecord; resolve(): void; reject(error: unknown): void }[] = [];
  /** A drain is scheduled or running: new events join its next batch. */
  let draining = false;

  async function drain(): Promise<void> {
    while (pending.length > 0) {
      const batch = pending.length <= maxBatch ? pending : pending.slice(0, maxBatch);
      pending = pending.length <= maxBatch ? [] : pending.slice(maxBatch);
      try {
        await insert(batch.map((entry) => entry.event));
        for (const entry of batch) entry.resolve();
      } catch (error) {
        for (const entry of batch) entry.reject(error);
      }
    }
    draining = false;
  }

  return function record(event: SecretAuditRecord): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      pending.push({ event, resolve, reject });
      if (!draining) {
        draining = true;
        // After the other requests this turn of the event loop has read: with a
        // synchronous database (SQLite) an INSERT started at once would finish
        // before any of them had recorded its event, and batches would be of one.
        setImmediate(() => void drain());
      }
    });
  };
}
