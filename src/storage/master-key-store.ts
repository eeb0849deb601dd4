import { empty, join, raw, sqltag as sql, type Sql } from "@prisma/client/runtime/client";
import type { WrappedCount, WrappedKind, MasterKeyStore, WrappedRow } from "../domain/master-key/master-key-store.js";
import { wrappedKinds } from "../domain/master-key/master-key-store.js";
import type { Db, Tx } from "./database.js";

export type { WrappedCount, WrappedKind, MasterKeyStore, WrappedRow } from "../domain/master-key/master-key-store.js";
export { wrappedKinds } from "../domain/master-key/master-key-store.js";

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
  webhook_endpoint: { table: "WebhookEndpoint", key: ["id"], context: ["organizationId"], columns: ["secretsEnc"] },
  system_value: {
    table: "SystemState",
    key: ["key"],
    columns: ["value"],
    where: sql`"key" IN (${join([...wrappedSystemValues])})`,
    text: true,
  },
};

const quoted = (name: string) => raw(`"${name}"`);
const list = (names: string[]) => raw(names.map((name) => `"${name}"`).join(", "));

/** masterKeyId equals `id`, or both are null: the same on SQLite and PostgreSQL. */
function sameMasterKey(id: string | null): Sql {
  return id === null ? sql`"masterKeyId" IS NULL` : sql`"masterKeyId" = ${id}`;
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
