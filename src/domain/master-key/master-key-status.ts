import type { MasterKeyring } from "../../crypto/envelope.js";
import type { MasterKeyStore, WrappedKind } from "./master-key-store.js";

/** What one master key wraps. */
export interface MasterKeyUsage {
  /** Null for values wrapped before master key ids were recorded. */
  masterKeyId: string | null;
  /**
   * current: wraps new values; previous: given to this process to unwrap only;
   * unknown: not given to this process; unrecorded: values stored without an id.
   */
  state: "current" | "previous" | "unknown" | "unrecorded";
  /** Wrapped values (a keyring row holds two: its sealing key and its data key). */
  values: number;
  byKind: Partial<Record<WrappedKind, number>>;
}

export interface MasterKeyStatus {
  currentId: string;
  /** Every key of the ring (the current one first, even when it wraps nothing yet), then any other id found in the store. */
  keys: MasterKeyUsage[];
}

/** How many wrapped values each master key holds, for `gatehouse master-key status` and the checks before a start or a rotation. */
export async function masterKeyStatus(deps: {
  store: Pick<MasterKeyStore, "countWrapped">;
  keyring: MasterKeyring;
}): Promise<MasterKeyStatus> {
  const { keyring } = deps;
  const usage = new Map<string | null, MasterKeyUsage>();
  const stateOf = (id: string | null): MasterKeyUsage["state"] =>
    id === null ? "unrecorded" : id === keyring.currentId ? "current" : keyring.ids.includes(id) ? "previous" : "unknown";
  for (const id of keyring.ids) usage.set(id, { masterKeyId: id, state: stateOf(id), values: 0, byKind: {} });
  for (const count of await deps.store.countWrapped()) {
    let entry = usage.get(count.masterKeyId);
    if (!entry) {
      entry = { masterKeyId: count.masterKeyId, state: stateOf(count.masterKeyId), values: 0, byKind: {} };
      usage.set(count.masterKeyId, entry);
    }
    entry.values += count.values;
    entry.byKind[count.kind] = (entry.byKind[count.kind] ?? 0) + count.values;
  }
  return { currentId: keyring.currentId, keys: [...usage.values()] };
}
