import { empty, join, raw, sqltag as sql, type Sql } from "@prisma/client/runtime/client";
import type { Db, Tx } from "./database.js";

/** The kinds of rows that hold values wrapped by the master key. */
export type WrappedKind = "secret_keyring" | "previous_sealing_key" | "session_signing_key" | "legacy_signing_key" | "system_value";

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

interface WrappedTable {
  table: string;
  key: string[];
  context?: string[];
  columns: string[];
  /** Rows of the table that hold wrapped values (SystemState holds plain ones too). */
  where?: Sql;
  /** The column holds base64 text rather than bytes. */
  text?: boolean;
}

/** The SystemState keys whose values are wrapped (docs/secrets.md, "Rotating the master key"). */
export const wrappedSystemValues = ["passkey-decoy-secret"] as const;

const tables: Record<WrappedKind, WrappedTable> = {
  secret_keyring: { table: "SecretKeyring", key: ["organizationId"], columns: ["privateKeyEnc", "dataKeyEnc"] },
  previous_sealing_key: { table: "PreviousSealingKey", key: ["organizationId", "keyId"], columns: ["privateKeyEnc"] },
  session_signing_key: { table: "SessionSigningKey", key: ["id"], context: ["organizationId"], columns: ["privateKeyEnc"] },
  legacy_signing_key: { table: "SigningKey", key: ["id"], columns: ["privateKeyEnc"] },
  system_value: {
    table: "SystemState",
    key: ["key"],
    columns: ["value"],
    where: sql`"key" IN (${join([...wrappedSystemValues])})`,
    text: true,
  },
};

export const wrappedKinds = Object.keys(tables) as WrappedKind[];

const quoted = (name: string) => raw(`"${name}"`);
const list = (names: string[]) => raw(names.map((name) => `"${name}"`).join(", "));

/** masterKeyId equals `id`, or both are null: the same on SQLite and PostgreSQL. */
function sameMasterKey(id: string | null): Sql {
  return id === null ? sql`"masterKeyId" IS NULL` : sql`"masterKeyId" = ${id}`;
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

export function createMasterKeyStore(db: Db | Tx): MasterKeyStore {
  const toRow = (kind: WrappedKind, record: Record<string, unknown>): WrappedRow => {
    const spec = tables[kind];
    const values: Record<string, Buffer> = {};
    for (const column of spec.columns) {
      const value = record[column];
      values[column] = spec.text ? Buffer.from(String(value), "base64") : Buffer.from(value as Uint8Array);
    }
    return {
      kind,
      key: spec.key.map((column) => String(record[column])),
      context: (spec.context ?? []).map((column) => String(record[column])),
      masterKeyId: (record.masterKeyId as string | null) ?? null,
      values,
    };
  };

  return {
    async countWrapped() {
      const counts: WrappedCount[] = [];
      for (const kind of wrappedKinds) {
        const spec = tables[kind];
        const rows = await db.$queryRaw<{ masterKeyId: string | null; n: number | bigint }[]>`
          SELECT "masterKeyId", COUNT(*) AS "n" FROM ${quoted(spec.table)} ${spec.where ? sql`WHERE ${spec.where}` : empty}
          GROUP BY "masterKeyId"`;
        for (const row of rows) {
          const n = Number(row.n);
          counts.push({ kind, masterKeyId: row.masterKeyId, rows: n, values: n * spec.columns.length });
        }
      }
      return counts;
    },

    async listNotUnder(kind, currentId, limit, after) {
      const spec = tables[kind];
      const conditions = [sql`("masterKeyId" IS NULL OR "masterKeyId" <> ${currentId})`];
      if (spec.where) conditions.push(spec.where);
      if (after) conditions.push(sql`(${list(spec.key)}) > (${join(after)})`);
      const rows = await db.$queryRaw<Record<string, unknown>[]>`
        SELECT ${list([...spec.key, ...(spec.context ?? []), ...spec.columns, "masterKeyId"])} FROM ${quoted(spec.table)}
        WHERE ${join(conditions, " AND ")} ORDER BY ${list(spec.key)} LIMIT ${limit}`;
      return rows.map((row) => toRow(kind, row));
    },

    async sampleUnrecorded(kind) {
      const spec = tables[kind];
      const rows = await db.$queryRaw<Record<string, unknown>[]>`
        SELECT ${list([...spec.key, ...(spec.context ?? []), ...spec.columns, "masterKeyId"])} FROM ${quoted(spec.table)}
        WHERE "masterKeyId" IS NULL ${spec.where ? sql`AND ${spec.where}` : empty} LIMIT 1`;
      const row = rows[0];
      return row ? toRow(kind, row) : null;
    },

    async rewrap(row, values, masterKeyId) {
      const spec = tables[row.kind];
      const assignments = spec.columns.map((column) => {
        const value = values[column];
        if (!value) throw new Error(`a rewrap of ${spec.table} lacks ${column}`);
        return sql`${quoted(column)} = ${spec.text ? value.toString("base64") : new Uint8Array(value)}`;
      });
      const keyMatches = spec.key.map((column, i) => sql`${quoted(column)} = ${row.key[i]}`);
      // Still the bytes that were read, not only the same key id: a row another writer replaced (a sealing-key
      // rotation) is never overwritten with the old contents.
      const unchanged = spec.columns.map((column) => {
        const value = row.values[column] as Buffer;
        return sql`${quoted(column)} = ${spec.text ? value.toString("base64") : new Uint8Array(value)}`;
      });
      const changed = await db.$executeRaw`
        UPDATE ${quoted(spec.table)} SET ${join(assignments)}, "masterKeyId" = ${masterKeyId}
        WHERE ${join([...keyMatches, ...unchanged], " AND ")} AND ${sameMasterKey(row.masterKeyId)}`;
      return changed === 1;
    },
  };
}
