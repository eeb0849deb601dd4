import type { MasterKeyring } from "../../crypto/envelope.js";
import { type MasterKeyStore, type WrappedRow, wrappedKinds } from "./master-key-store.js";
import { checkMasterKeys } from "./check-master-keys.js";
import { purposesOf } from "./wrapped-purposes.js";

export interface RotateMasterKeyDeps {
  /** Reads outside a transaction. */
  store: Pick<MasterKeyStore, "countWrapped" | "listNotUnder" | "sampleUnrecorded">;
  /** Runs fn in one transaction: one batch's rewrites commit together or not at all. */
  transaction<T>(fn: (store: Pick<MasterKeyStore, "rewrap">) => Promise<T>): Promise<T>;
  keyring: MasterKeyring;
  /** Rows per batch (transaction). */
  batchSize: number;
  /** Called after each batch: values done so far of the total counted at the start. */
  onProgress?(progress: { done: number; total: number }): void;
  /**
   * After each batch, let the write lock go for twice as long as the batch
   * held it, and at least 10 ms (SQLite: one writer at a time, so the servers'
   * own writes would otherwise queue behind a stream of batches). The rotation
   * holds the lock a third of the time at most.
   */
  yieldBetweenBatches?: boolean;
}

export interface MasterKeyRotated {
  /** The current master key: every wrapped value is under it now, unless `remaining`. */
  currentId: string;
  /** Values wrapped again by this run. */
  rewrapped: number;
  /** Values another writer replaced between their read and their rewrite (left as that writer made them, then checked again). */
  changedMeanwhile: number;
  /** Values still under another key after the last pass (written meanwhile by an instance whose current key is an old one). */
  remaining: number;
  /** Keys of the ring that wrap nothing any more: they can be removed from the configuration. */
  retirable: string[];
}

/**
 * Wraps again, under the ring's current master key, every value wrapped under
 * another one (docs/secrets.md, "Rotating the master key"): the organisations'
 * sealing and data keys, session signing keys and wrapped system values. Secret
 * values are not touched: they are encrypted under the data keys, which keep
 * their bytes, so a value's ciphertext and the associated data that binds it to
 * its organisation, environment, name and version stay as they were.
 *
 * Batches: rows are read outside any transaction, unwrapped and wrapped again
 * in this process, and written in one short transaction per batch, each row
 * only if it still holds what was read. So the rotation holds locks only for
 * the writes; a crash (SIGKILL included) loses at most the batch in flight,
 * and a new run takes up what is left (what is under an old key is the
 * progress). Servers keep serving throughout: they unwrap with any key of
 * their ring and wrap with the current one.
 */
export async function rotateMasterKey(deps: RotateMasterKeyDeps): Promise<MasterKeyRotated> {
  const { keyring } = deps;
  // A value under a key this process lacks could not be wrapped again: refuse before writing anything.
  const before = await checkMasterKeys(deps);
  const pending = () => pendingValues(deps, keyring.currentId);
  const total = before.keys.filter((key) => key.masterKeyId !== keyring.currentId).reduce((sum, key) => sum + key.values, 0);
  let rewrapped = 0;
  let changedMeanwhile = 0;
  let done = 0;
  deps.onProgress?.({ done, total });
  let remaining = total;
  // A second and third pass take up rows written under an old key during the first (a lagging instance).
  for (let pass = 0; pass < 3 && remaining > 0; pass++) {
    for (const kind of wrappedKinds) {
      let after: string[] | undefined;
      for (;;) {
        const rows = await deps.store.listNotUnder(kind, keyring.currentId, deps.batchSize, after);
        if (rows.length === 0) break;
        after = rows.at(-1)?.key;
        const rewrites = rows.map((row) => ({ row, values: wrapAgain(keyring, row) }));
        const held = performance.now();
        const written = await deps.transaction(async (store) => {
          let count = 0;
          for (const { row, values } of rewrites) if (await store.rewrap(row, values, keyring.currentId)) count++;
          return count;
        });
        if (deps.yieldBetweenBatches) await new Promise((resolve) => setTimeout(resolve, Math.max(10, 2 * (performance.now() - held))));
        const values = rows.reduce((sum, row) => sum + Object.keys(row.values).length, 0);
        const perRow = values / rows.length;
        rewrapped += written * perRow;
        changedMeanwhile += (rows.length - written) * perRow;
        done = Math.min(total, done + values);
        deps.onProgress?.({ done, total });
      }
    }
    remaining = await pending();
  }
  const after = await checkMasterKeys(deps);
  return {
    currentId: keyring.currentId,
    rewrapped,
    changedMeanwhile,
    remaining,
    retirable: after.keys.filter((key) => key.state === "previous" && key.values === 0).map((key) => key.masterKeyId as string),
  };
}

/** The row's values unwrapped with the key they are under and wrapped with the current one; plaintext never outlives the call. */
function wrapAgain(keyring: MasterKeyring, row: WrappedRow): Record<string, Buffer> {
  const purposes = purposesOf(row.kind, row.key, row.context);
  const values: Record<string, Buffer> = {};
  for (const [column, sealed] of Object.entries(row.values)) {
    const purpose = purposes[column] ?? "";
    const plaintext = keyring.unwrap(sealed, purpose, row.masterKeyId);
    try {
      values[column] = keyring.wrap(plaintext, purpose);
    } finally {
      plaintext.fill(0);
    }
  }
  return values;
}

async function pendingValues(deps: Pick<RotateMasterKeyDeps, "store">, currentId: string): Promise<number> {
  return (await deps.store.countWrapped()).filter((count) => count.masterKeyId !== currentId).reduce((sum, count) => sum + count.values, 0);
}
