import type {
  AttemptRecord,
  ClaimedDelivery,
  DeliveryRecord,
  DeliveryStatus,
  WebhookEndpointRecord,
  WebhookStore,
} from "../domain/webhooks/webhook-store.js";
import { join, sqltag as sql } from "@prisma/client/runtime/client";
import type { Database, Db, Tx } from "./database.js";
import type { Sql, SqlValue } from "./sql.js";

export type { WebhookStore } from "../domain/webhooks/webhook-store.js";

type Provider = Database["provider"];
/** Events removed per transaction when pruning. */
const pruneBatch = 1000;
/** Runs fn in one transaction (the worker's writes that span rows); absent when the store is a transaction's already. */
type Transact = <T>(fn: (tx: Tx) => Promise<T>) => Promise<T>;

function asDate(value: Date | string | number): Date {
  return value instanceof Date ? value : new Date(value);
}

function parseTypes(json: string): string[] {
  const value: unknown = JSON.parse(json);
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];
}

type EndpointRow = Omit<WebhookEndpointRecord, "eventTypes" | "secretsEnc"> & { eventTypes: string; secretsEnc: Uint8Array };

function toEndpoint(row: EndpointRow): WebhookEndpointRecord {
  return { ...row, eventTypes: parseTypes(row.eventTypes), secretsEnc: Buffer.from(row.secretsEnc) };
}

type AttemptRow = Omit<AttemptRecord, never>;

/** Attempts leave the store as records (the organisation column stays behind). */
function toAttempt(row: AttemptRow & { organizationId?: string }): AttemptRecord {
  return {
    id: row.id,
    deliveryId: row.deliveryId,
    number: row.number,
    attemptedAt: row.attemptedAt,
    durationMs: row.durationMs,
    statusCode: row.statusCode,
    error: row.error,
  };
}

/**
 * Webhook endpoints, the events outbox, deliveries and attempts over Prisma.
 * `transact` runs multi-row changes in one transaction (omit it for a store
 * bound to a transaction already). The delivery workers' statements (claims,
 * leases, outcomes) run on every commit and every attempt: with `sql` (outside
 * transactions) they are plain SQL on the driver (sql.ts), skipping Prisma's
 * client pipeline, whose CPU would compete with the requests the instance serves.
 */
export function createWebhookStore(db: Db | Tx, provider: Provider, options: { transact?: Transact; sql?: Sql } = {}): WebhookStore {
  const { transact } = options;
  const inTransaction = <T>(fn: (store: Db | Tx) => Promise<T>) => (transact ? transact((tx) => fn(tx)) : fn(db));
  const raw: Pick<Sql, "query" | "execute"> = options.sql ?? {
    query: <T extends object[]>(strings: TemplateStringsArray, ...values: SqlValue[]) => db.$queryRaw<T>(strings, ...values),
    execute: (strings: TemplateStringsArray, ...values: SqlValue[]) => db.$executeRaw(strings, ...values),
  };
  const postgres = provider === "postgresql";

  async function deliveriesWithAttempts(
    rows: (Omit<DeliveryRecord, "status" | "eventType" | "lastAttempt"> & { status: string; event: { type: string } })[],
  ): Promise<DeliveryRecord[]> {
    const attempts =
      rows.length === 0
        ? []
        : await db.webhookAttempt.findMany({
            where: { deliveryId: { in: rows.map((row) => row.id) } },
            orderBy: [{ attemptedAt: "desc" }, { number: "desc" }],
          });
    const last = new Map<string, AttemptRecord>();
    for (const attempt of attempts) if (!last.has(attempt.deliveryId)) last.set(attempt.deliveryId, toAttempt(attempt));
    return rows.map(({ event, ...row }) => ({
      ...row,
      status: row.status as DeliveryStatus,
      eventType: event.type,
      lastAttempt: last.get(row.id) ?? null,
    }));
  }

  const deliverySelect = {
    id: true,
    organizationId: true,
    endpointId: true,
    eventId: true,
    status: true,
    attempts: true,
    nextAttemptAt: true,
    createdAt: true,
    updatedAt: true,
    event: { select: { type: true } },
  } as const;

  return {
    async insertEvent(event) {
      await db.event.create({ data: event });
    },
    // The outbox's statements run in the transaction of every change: multi-row raw INSERTs, a fraction of
    // createMany's cost (see secrets-store.ts, insertAuditEvents), with the same stored forms.
    async insertEvents(events) {
      if (events.length === 0) return;
      const rows = events.map((e) => sql`(${e.id}, ${e.organizationId}, ${e.type}, ${e.payload}, ${e.createdAt})`);
      await db.$executeRaw`INSERT INTO "Event" ("id", "organizationId", "type", "payload", "createdAt") VALUES ${join(rows)}`;
    },
    async enabledEndpoints(organizationId) {
      const rows = await db.$queryRaw<{ id: string; eventTypes: string }[]>`
        SELECT "id", "eventTypes" FROM "WebhookEndpoint" WHERE "organizationId" = ${organizationId} AND "enabled" = ${true}`;
      return rows.map((row) => ({ id: row.id, eventTypes: parseTypes(row.eventTypes) }));
    },
    async insertDeliveries(deliveries) {
      if (deliveries.length === 0) return;
      const rows = deliveries.map(
        (d) => sql`(${d.id}, ${d.organizationId}, ${d.endpointId}, ${d.eventId}, 'pending', 0, ${d.at}, ${d.at}, ${d.at})`,
      );
      await db.$executeRaw`
        INSERT INTO "WebhookDelivery" ("id", "organizationId", "endpointId", "eventId", "status", "attempts", "nextAttemptAt", "createdAt", "updatedAt")
        VALUES ${join(rows)}`;
    },

    async lockOrganization(organizationId) {
      // An UPDATE that changes nothing still takes the row lock (PostgreSQL) and the write lock (SQLite).
      const rows = await db.$queryRaw<{ id: string }[]>`
        UPDATE "Organization" SET "name" = "name" WHERE "id" = ${organizationId} RETURNING "id"`;
      return rows.length === 1;
    },
    countEndpoints: (organizationId) => db.webhookEndpoint.count({ where: { organizationId } }),
    async createEndpoint(endpoint) {
      await db.webhookEndpoint.create({
        data: { ...endpoint, eventTypes: JSON.stringify(endpoint.eventTypes), secretsEnc: new Uint8Array(endpoint.secretsEnc) },
      });
    },
    async findEndpoint(organizationId, id) {
      const row = await db.webhookEndpoint.findFirst({ where: { organizationId, id } });
      return row ? toEndpoint(row) : null;
    },
    async listEndpoints(organizationId) {
      const rows = await db.webhookEndpoint.findMany({ where: { organizationId }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
      return rows.map(toEndpoint);
    },
    async updateEndpoint(organizationId, id, patch, at) {
      const { eventTypes, secretsEnc, ...rest } = patch;
      const { count } = await db.webhookEndpoint.updateMany({
        where: { organizationId, id },
        data: {
          ...rest,
          ...(eventTypes !== undefined ? { eventTypes: JSON.stringify(eventTypes) } : {}),
          ...(secretsEnc !== undefined ? { secretsEnc: new Uint8Array(secretsEnc) } : {}),
          updatedAt: at,
        },
      });
      return count === 1;
    },
    deleteEndpoint: (organizationId, id) =>
      inTransaction(async (store) => {
        // Explicit, rather than relying on ON DELETE CASCADE, which SQLite applies only with foreign_keys on.
        const deliveries = { organizationId, endpointId: id };
        await store.webhookAttempt.deleteMany({ where: { organizationId, delivery: deliveries } });
        await store.webhookDelivery.deleteMany({ where: deliveries });
        const { count } = await store.webhookEndpoint.deleteMany({ where: { organizationId, id } });
        return count === 1;
      }),
    async listDeliveries(organizationId, endpointId, limit, after) {
      const rows = await db.webhookDelivery.findMany({
        where: {
          organizationId,
          endpointId,
          ...(after ? { OR: [{ createdAt: { lt: after.createdAt } }, { createdAt: after.createdAt, id: { gt: after.id } }] } : {}),
        },
        orderBy: [{ createdAt: "desc" }, { id: "asc" }],
        take: limit,
        select: deliverySelect,
      });
      return deliveriesWithAttempts(rows);
    },
    async findDelivery(organizationId, id) {
      const row = await db.webhookDelivery.findFirst({ where: { organizationId, id }, select: deliverySelect });
      return row ? ((await deliveriesWithAttempts([row]))[0] ?? null) : null;
    },
    async listAttempts(organizationId, deliveryId) {
      const rows = await db.webhookAttempt.findMany({
        where: { organizationId, deliveryId },
        orderBy: [{ attemptedAt: "asc" }, { number: "asc" }],
      });
      return rows.map(toAttempt);
    },
    async requeueDelivery(organizationId, id, at) {
      const { count } = await db.webhookDelivery.updateMany({
        where: { organizationId, id },
        data: { status: "pending", attempts: 0, nextAttemptAt: at, leaseOwner: null, leaseUntil: null, updatedAt: at },
      });
      return count === 1;
    },

    async claimDue(owner, now, leaseUntil, limit, skipEndpoints) {
      // Lists travel as one JSON text: the statements' texts stay fixed (and prepared once).
      const skip = JSON.stringify(skipEndpoints);
      // One statement claims: on PostgreSQL rows another worker is claiming are skipped, not waited for
      // (FOR UPDATE SKIP LOCKED); SQLite runs one writing statement at a time.
      const claimed = postgres
        ? await raw.query<{ id: string }[]>`
            WITH due AS (
              SELECT d."id" FROM "WebhookDelivery" d JOIN "WebhookEndpoint" e ON e."id" = d."endpointId"
              WHERE d."status" = 'pending' AND e."enabled" = ${true} AND d."nextAttemptAt" <= ${now}
                AND (d."leaseUntil" IS NULL OR d."leaseUntil" < ${now})
                AND d."endpointId" NOT IN (SELECT jsonb_array_elements_text(${skip}::jsonb))
              ORDER BY d."nextAttemptAt" LIMIT ${limit}
              FOR UPDATE OF d SKIP LOCKED)
            UPDATE "WebhookDelivery" w SET "leaseOwner" = ${owner}, "leaseUntil" = ${leaseUntil}
            FROM due WHERE w."id" = due."id" RETURNING w."id"`
        : await raw.query<{ id: string }[]>`
            UPDATE "WebhookDelivery" SET "leaseOwner" = ${owner}, "leaseUntil" = ${leaseUntil}
            WHERE "id" IN (
              SELECT d."id" FROM "WebhookDelivery" d JOIN "WebhookEndpoint" e ON e."id" = d."endpointId"
              WHERE d."status" = 'pending' AND e."enabled" = ${true} AND d."nextAttemptAt" <= ${now}
                AND (d."leaseUntil" IS NULL OR d."leaseUntil" < ${now})
                AND d."endpointId" NOT IN (SELECT "value" FROM json_each(${skip}))
              ORDER BY d."nextAttemptAt" LIMIT ${limit})
            RETURNING "id"`;
      if (claimed.length === 0) return [];
      const ids = JSON.stringify(claimed.map((row) => row.id));
      type ClaimedRow = {
        id: string;
        organizationId: string;
        endpointId: string;
        eventId: string;
        attempts: number | bigint;
        payload: string;
        eventCreatedAt: Date | string;
        url: string;
        secretsEnc: Uint8Array;
        masterKeyId: string | null;
        previousSecretUntil: Date | string | null;
      };
      // One statement for what the attempts need (the client's nested reads would be three).
      const rows = postgres
        ? await raw.query<ClaimedRow[]>`
            SELECT d."id", d."organizationId", d."endpointId", d."eventId", d."attempts", e."payload", e."createdAt" AS "eventCreatedAt",
                   w."url", w."secretsEnc", w."masterKeyId", w."previousSecretUntil"
            FROM "WebhookDelivery" d JOIN "Event" e ON e."id" = d."eventId" JOIN "WebhookEndpoint" w ON w."id" = d."endpointId"
            WHERE d."id" IN (SELECT jsonb_array_elements_text(${ids}::jsonb)) AND d."leaseOwner" = ${owner}
            ORDER BY d."nextAttemptAt"`
        : await raw.query<ClaimedRow[]>`
            SELECT d."id", d."organizationId", d."endpointId", d."eventId", d."attempts", e."payload", e."createdAt" AS "eventCreatedAt",
                   w."url", w."secretsEnc", w."masterKeyId", w."previousSecretUntil"
            FROM "WebhookDelivery" d JOIN "Event" e ON e."id" = d."eventId" JOIN "WebhookEndpoint" w ON w."id" = d."endpointId"
            WHERE d."id" IN (SELECT "value" FROM json_each(${ids})) AND d."leaseOwner" = ${owner}
            ORDER BY d."nextAttemptAt"`;
      return rows.map(
        (row): ClaimedDelivery => ({
          id: row.id,
          organizationId: row.organizationId,
          endpointId: row.endpointId,
          eventId: row.eventId,
          attempts: Number(row.attempts),
          payload: row.payload,
          eventCreatedAt: asDate(row.eventCreatedAt),
          endpoint: {
            url: row.url,
            secretsEnc: Buffer.from(row.secretsEnc),
            masterKeyId: row.masterKeyId,
            previousSecretUntil: row.previousSecretUntil === null ? null : asDate(row.previousSecretUntil),
          },
        }),
      );
    },
    async renewLeases(owner, ids, leaseUntil) {
      const list = JSON.stringify(ids);
      if (postgres) {
        await raw.execute`
          UPDATE "WebhookDelivery" SET "leaseUntil" = ${leaseUntil}
          WHERE "id" IN (SELECT jsonb_array_elements_text(${list}::jsonb)) AND "leaseOwner" = ${owner} AND "status" = 'pending'`;
      } else {
        await raw.execute`
          UPDATE "WebhookDelivery" SET "leaseUntil" = ${leaseUntil}
          WHERE "id" IN (SELECT "value" FROM json_each(${list})) AND "leaseOwner" = ${owner} AND "status" = 'pending'`;
      }
    },
    async completeAttempts(owner, outcomes, at) {
      // Not one transaction: the attempts are written first, then what they did. A crash in between leaves
      // a delivery still leased, attempted again when the lease runs out (at least once, docs/events.md).
      const attempts = outcomes.map(
        ({ attempt: a, organizationId, deliveryId }) =>
          sql`(${a.id}, ${organizationId}, ${deliveryId}, ${a.number}, ${a.attemptedAt}, ${a.durationMs}, ${a.statusCode}, ${a.error})`,
      );
      await db.$executeRaw`
        INSERT INTO "WebhookAttempt" ("id", "organizationId", "deliveryId", "number", "attemptedAt", "durationMs", "statusCode", "error")
        VALUES ${join(attempts)}`;
      // Deliveries that succeeded (most of them): one statement.
      const delivered = JSON.stringify(outcomes.filter((o) => o.status === "delivered").map((o) => o.deliveryId));
      if (delivered !== "[]") {
        if (postgres) {
          await raw.execute`
            UPDATE "WebhookDelivery" SET "status" = 'delivered', "attempts" = "attempts" + 1, "leaseOwner" = NULL, "leaseUntil" = NULL, "updatedAt" = ${at}
            WHERE "id" IN (SELECT jsonb_array_elements_text(${delivered}::jsonb)) AND "leaseOwner" = ${owner}`;
        } else {
          await raw.execute`
            UPDATE "WebhookDelivery" SET "status" = 'delivered', "attempts" = "attempts" + 1, "leaseOwner" = NULL, "leaseUntil" = NULL, "updatedAt" = ${at}
            WHERE "id" IN (SELECT "value" FROM json_each(${delivered})) AND "leaseOwner" = ${owner}`;
        }
      }
      for (const outcome of outcomes.filter((o) => o.status !== "delivered")) {
        await raw.execute`
          UPDATE "WebhookDelivery" SET "status" = ${outcome.status}, "attempts" = ${outcome.attempt.number}, "nextAttemptAt" = ${outcome.nextAttemptAt},
            "leaseOwner" = NULL, "leaseUntil" = NULL, "updatedAt" = ${at}
          WHERE "id" = ${outcome.deliveryId} AND "leaseOwner" = ${owner}`;
        if (outcome.disableEndpoint) {
          await raw.execute`
            UPDATE "WebhookEndpoint" SET "enabled" = ${false}, "disabledReason" = 'gone', "updatedAt" = ${at}
            WHERE "organizationId" = ${outcome.organizationId} AND "id" = ${outcome.endpointId}`;
        }
      }
    },
    async nextClaimableAt() {
      const rows = await raw.query<{ at: Date | string | null }[]>`
        SELECT MIN(CASE WHEN d."leaseUntil" IS NOT NULL AND d."leaseUntil" > d."nextAttemptAt" THEN d."leaseUntil" ELSE d."nextAttemptAt" END) AS "at"
        FROM "WebhookDelivery" d JOIN "WebhookEndpoint" e ON e."id" = d."endpointId"
        WHERE d."status" = 'pending' AND e."enabled" = ${true}`;
      const at = rows[0]?.at;
      return at === null || at === undefined ? null : asDate(at);
    },
    async prune(attemptsBefore, eventsBefore) {
      await db.webhookAttempt.deleteMany({ where: { attemptedAt: { lt: attemptsBefore } } });
      // Every event past the retention goes, in batches of a short transaction each: one batch an hour
      // would let a platform with more than that many events an hour grow its outbox without end.
      for (;;) {
        const removed = await inTransaction(async (store) => {
          const old = await store.event.findMany({
            where: { createdAt: { lt: eventsBefore }, deliveries: { none: { status: "pending" } } },
            select: { id: true },
            take: pruneBatch,
          });
          if (old.length === 0) return 0;
          const ids = old.map((row) => row.id);
          await store.webhookAttempt.deleteMany({ where: { delivery: { eventId: { in: ids } } } });
          await store.webhookDelivery.deleteMany({ where: { eventId: { in: ids } } });
          await store.event.deleteMany({ where: { id: { in: ids } } });
          return old.length;
        });
        if (removed < pruneBatch) return;
      }
    },
  };
}
