import type { ResourceKind } from "../domain/config/config-document.js";
import type { Database, Db, Tx } from "./database.js";

type Provider = Database["provider"];

import type { RevisionSummaryRecord, RevisionRecord, ConfigStore } from "../domain/config/config-store.js";
export type { RevisionSummaryRecord, RevisionRecord, ConfigStore } from "../domain/config/config-store.js";

/**
 * Rows per INSERT or DELETE statement: well under SQLite's 32,766 and
 * PostgreSQL's 65,535 bound parameters, and small enough that Prisma's debug
 * history (which keeps the arguments of the last 100 queries, logging on or
 * off) holds a few megabytes rather than tens.
 */
const chunkSize = 500;

export function createConfigStore(db: Db | Tx, provider: Provider): ConfigStore {
  return {
    async lockConfiguration(organizationId) {
      // An UPDATE that changes nothing still takes the row lock (PostgreSQL) and the write lock (SQLite).
      const rows = await db.$queryRaw<{ configRevision: number | bigint }[]>`
        UPDATE "Organization" SET "configRevision" = "configRevision" WHERE "id" = ${organizationId} RETURNING "configRevision"`;
      const row = rows[0];
      return row ? Number(row.configRevision) : null;
    },
    async currentRevision(organizationId) {
      // Raw: this runs on every export, and is several times cheaper than the model API.
      const rows = await db.$queryRaw<{ configRevision: number | bigint }[]>`
        SELECT "configRevision" FROM "Organization" WHERE "id" = ${organizationId}`;
      const row = rows[0];
      return row ? Number(row.configRevision) : null;
    },
    async listResources(organizationId) {
      // Raw: tens of thousands of rows, read on every import; the model API costs several times the time and memory.
      const rows = await db.$queryRaw<{ kind: string; name: string; spec: string }[]>`
        SELECT "kind", "name", "spec" FROM "ConfigResource" WHERE "organizationId" = ${organizationId}`;
      return rows.map((row) => ({ kind: row.kind as ResourceKind, name: row.name, spec: row.spec }));
    },
    async replaceResources(organizationId, { remove, insert }, at) {
      // Plain multi-row statements: an order of magnitude faster than createMany
      // and deleteMany for thousands of rows, and one round trip per chunk.
      const byKind = new Map<ResourceKind, string[]>();
      for (const { kind, name } of remove) {
        const names = byKind.get(kind) ?? [];
        names.push(name);
        byKind.set(kind, names);
      }
      for (const [kind, names] of byKind) {
        for (let i = 0; i < names.length; i += chunkSize) {
          const chunk = names.slice(i, i + chunkSize);
          const marks = placeholders(provider, 3, chunk.length, 1);
          await db.$executeRawUnsafe(
            `DELETE FROM "ConfigResource" WHERE "organizationId" = ${mark(provider, 1)} AND "kind" = ${mark(provider, 2)} AND "name" IN (${marks})`,
            organizationId,
            kind,
            ...chunk,
          );
        }
      }
      // The organisation and the time are bound once per statement, the rows as (kind, name, spec).
      const insertInto = `INSERT INTO "ConfigResource" ("organizationId", "kind", "name", "spec", "updatedAt")`;
      const timestamp = provider === "postgresql" ? at.toISOString() : sqliteTimestamp(at);
      for (let i = 0; i < insert.length; i += chunkSize) {
        const chunk = insert.slice(i, i + chunkSize);
        const rows = placeholders(provider, 3, chunk.length, 3);
        const params: unknown[] = [organizationId, timestamp];
        for (const r of chunk) params.push(r.kind, r.name, r.spec);
        await db.$executeRawUnsafe(
          provider === "postgresql"
            ? `${insertInto} SELECT $1, v.kind, v.name, v.spec, $2::timestamp(3) FROM (VALUES ${rows}) AS v(kind, name, spec)`
            : `${insertInto} SELECT ?, "column1", "column2", "column3", ? FROM (VALUES ${rows})`,
          ...params,
        );
      }
    },
    async recordRevision(organizationId, record) {
      await db.configRevision.create({
        data: {
          organizationId,
          revision: record.revision,
          actor: record.actor,
          source: record.source,
          created: JSON.stringify(record.created),
          updated: JSON.stringify(record.updated),
          deleted: JSON.stringify(record.deleted),
          document: record.document,
          createdAt: record.createdAt,
        },
      });
      await db.organization.update({ where: { id: organizationId }, data: { configRevision: record.revision } });
    },
    async latestRevision(organizationId) {
      const row = await db.configRevision.findFirst({ where: { organizationId }, orderBy: { revision: "desc" } });
      return row ? toRecord(row) : null;
    },
    async findRevision(organizationId, revision) {
      const row = await db.configRevision.findUnique({ where: { organizationId_revision: { organizationId, revision } } });
      return row ? toRecord(row) : null;
    },
    async listRevisions(organizationId, { before, limit }) {
      const rows = await db.configRevision.findMany({
        where: { organizationId, ...(before !== undefined ? { revision: { lt: before } } : {}) },
        orderBy: { revision: "desc" },
        take: limit,
        select: { revision: true, actor: true, source: true, created: true, updated: true, deleted: true, createdAt: true },
      });
      return rows.map(toSummary);
    },
    async revisionsAfter(organizationId, after, limit) {
      const rows = await db.configRevision.findMany({
        where: { organizationId, revision: { gt: after } },
        orderBy: { revision: "asc" },
        take: limit,
      });
      return rows.map(toRecord);
    },
  };
}

interface RevisionRow {
  revision: number;
  actor: string;
  source: string;
  created: string;
  updated: string;
  deleted: string;
  createdAt: Date;
}

function toSummary(row: RevisionRow): RevisionSummaryRecord {
  return {
    revision: row.revision,
    actor: row.actor,
    source: row.source,
    created: JSON.parse(row.created) as string[],
    updated: JSON.parse(row.updated) as string[],
    deleted: JSON.parse(row.deleted) as string[],
    createdAt: row.createdAt,
  };
}

function toRecord(row: RevisionRow & { document: string }): RevisionRecord {
  return { ...toSummary(row), document: row.document };
}

/** The n-th bound parameter (1-based) in the provider's syntax. */
function mark(provider: Provider, n: number): string {
  return provider === "postgresql" ? `$${n}` : "?";
}

/** Placeholder lists already built: every full chunk of an import uses the same one. */
const placeholderLists = new Map<string, string>();

/**
 * `count` groups of `width` parameters, numbered from `first`, joined with
 * ", ": "(?, ?), (?, ?)" or "($3, $4), ($5, $6)"; width 1 gives bare marks.
 */
function placeholders(provider: Provider, first: number, count: number, width: number): string {
  const key = `${provider} ${first} ${count} ${width}`;
  let list = placeholderLists.get(key);
  if (list === undefined) {
    const out: string[] = [];
    let n = first;
    for (let i = 0; i < count; i++) {
      const group: string[] = [];
      for (let j = 0; j < width; j++) group.push(mark(provider, n++));
      out.push(width === 1 ? (group[0] as string) : `(${group.join(", ")})`);
    }
    list = out.join(", ");
    // Bounded: chunk sizes repeat, only the last chunk of an import varies.
    if (placeholderLists.size >= 64) placeholderLists.clear();
    placeholderLists.set(key, list);
  }
  return list;
}

/** A time as Prisma writes DateTime columns on SQLite (ISO 8601 with an explicit +00:00), so that it reads them back. */
function sqliteTimestamp(at: Date): string {
  return at.toISOString().replace("Z", "+00:00");
}
