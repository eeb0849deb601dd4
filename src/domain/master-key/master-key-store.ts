// Rows that hold values wrapped by the master key (a port); src/storage implements it.

/** The kinds of rows that hold values wrapped by the master key. */
export type WrappedKind =
  | "secret_keyring"
  | "previous_sealing_key"
  | "session_signing_key"
  | "legacy_signing_key"
  | "system_value"
  | "webhook_endpoint";

/** Every kind, in the order a rotation goes through them. */
export const wrappedKinds: readonly WrappedKind[] = [
  "secret_keyring",
  "previous_sealing_key",
  "session_signing_key",
  "legacy_signing_key",
  "system_value",
];

/** One row's wrapped values, with what names them in the associated data. */
export interface WrappedRow {
  kind: WrappedKind;
  /** The row's primary key, in the table's key order. */
  key: string[];
  /** Further columns the values' purposes name (a session signing key's organisation). */
  context: string[];
  /** The master key that wrapped the values; null: wrapped before ids were recorded. */
  masterKeyId: string | null;
  /** Each wrapped column's bytes. */
  values: Record<string, Buffer>;
}

/** Rows and wrapped values per kind and master key. */
export interface WrappedCount {
  kind: WrappedKind;
  masterKeyId: string | null;
  rows: number;
  values: number;
}

/**
 * The rows that hold values wrapped by the master key, read and written for a
 * master-key rotation: counted per master key, listed in key order after a
 * cursor (a keyset, so each batch is an index range, not a scan), and each
 * replaced only while it still holds what was read (a compare-and-set, so a
 * row another writer changed meanwhile is left as that writer made it). Identifiers come from the fixed table above, never from input.
 */
export interface MasterKeyStore {
  countWrapped(): Promise<WrappedCount[]>;
  /** Up to `limit` rows of a kind not under `currentId` (under another key or none), after `after` in key order. */
  listNotUnder(kind: WrappedKind, currentId: string, limit: number, after?: string[]): Promise<WrappedRow[]>;
  /** One row of a kind under no recorded key, to check that a key of the ring opens it. */
  sampleUnrecorded(kind: WrappedKind): Promise<WrappedRow | null>;
  /** Replaces the row's values and its master key id, if it still holds what was read; false when it changed meanwhile. */
  rewrap(row: WrappedRow, values: Record<string, Buffer>, masterKeyId: string): Promise<boolean>;
}
