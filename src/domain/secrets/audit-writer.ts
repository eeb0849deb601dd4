import type { SecretAuditRecord } from "../../storage/secrets-store.js";

/**
 * Records retrieve events with group commit: events arriving while a write is in
 * flight are stored together by the next one. Each caller still waits until its
 * own event is committed (no answer without its audit record), but under load
 * many retrieves share one INSERT instead of paying one each.
 */
export function createAuditWriter(insert: (events: readonly SecretAuditRecord[]) => Promise<void>, maxBatch = 256) {
  let pending: { event: SecretAuditRecord; resolve(): void; reject(error: unknown): void }[] = [];
  let writing = false;

  async function drain(): Promise<void> {
    writing = true;
    while (pending.length > 0) {
      const batch = pending.slice(0, maxBatch);
      pending = pending.slice(batch.length);
      try {
        await insert(batch.map((entry) => entry.event));
        for (const entry of batch) entry.resolve();
      } catch (error) {
        for (const entry of batch) entry.reject(error);
      }
    }
    writing = false;
  }

  return function record(event: SecretAuditRecord): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      pending.push({ event, resolve, reject });
      if (!writing) void drain();
    });
  };
}
