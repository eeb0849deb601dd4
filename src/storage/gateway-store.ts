import type { Db, Tx } from "./database.js";
import { uniquely } from "./errors.js";

import type { GatewayKeyPrincipalRecord, GatewayStore } from "../domain/gateway/gateway-store.js";
export type {
  GatewayKeyRecord,
  GatewayKeyPrincipalRecord,
  ConsumerKeyRecord,
  LiveConsumerRecord,
  GatewayConnectionRecord,
  GatewayStore,
} from "../domain/gateway/gateway-store.js";

const keyColumns = {
  id: true,
  organizationId: true,
  name: true,
  prefix: true,
  createdAt: true,
  lastUsedAt: true,
  revokedAt: true,
} as const;

const consumerColumns = { id: true, organizationId: true, name: true, prefix: true, createdAt: true, revokedAt: true } as const;

/** Secrets read per statement (each is one OR branch). */
const secretChunk = 200;

export function createGatewayStore(db: Db | Tx): GatewayStore {
  return {
    async organizationExists(organizationId) {
      return (await db.organization.findUnique({ where: { id: organizationId }, select: { id: true } })) !== null;
    },

    async createGatewayKey(key) {
      await uniquely(() => db.gatewayKey.create({ data: key }), "key_collision", "a key with this hash exists; create the key again");
    },
    async findGatewayKeyByHash(hash) {
      // Plain SQL: it runs on every gateway-key request that misses the credential cache.
      const rows = await db.$queryRaw<GatewayKeyPrincipalRecord[]>`
        SELECT "id", "organizationId", "name", "prefix", "hash", "createdAt", "lastUsedAt", "revokedAt"
        FROM "GatewayKey" WHERE "hash" = ${hash}`;
      return rows[0] ?? null;
    },
    findGatewayKey: (organizationId, id) => db.gatewayKey.findFirst({ where: { id, organizationId }, select: keyColumns }),
    listGatewayKeys: (organizationId, { includeRevoked }) =>
      db.gatewayKey.findMany({
        where: { organizationId, ...(includeRevoked ? {} : { revokedAt: null }) },
        select: keyColumns,
        orderBy: [{ createdAt: "desc" }, { id: "asc" }],
      }),
    async revokeGatewayKey(organizationId, id, at) {
      const { count } = await db.gatewayKey.updateMany({ where: { id, organizationId, revokedAt: null }, data: { revokedAt: at } });
      return count === 1;
    },
    async touchGatewayKey(id, at) {
      await db.gatewayKey.updateMany({ where: { id }, data: { lastUsedAt: at } });
    },

    async createConsumerKey(key) {
      await uniquely(() => db.consumerKey.create({ data: key }), "key_collision", "a key with this hash exists; create the key again");
    },
    listConsumerKeys: (organizationId, { includeRevoked }) =>
      db.consumerKey.findMany({
        where: { organizationId, ...(includeRevoked ? {} : { revokedAt: null }) },
        select: consumerColumns,
        orderBy: [{ createdAt: "desc" }, { id: "asc" }],
      }),
    liveConsumers: (organizationId) =>
      db.consumerKey.findMany({
        where: { organizationId, revokedAt: null },
        select: { id: true, name: true, hash: true },
        orderBy: { id: "asc" },
      }),
    findConsumerKey: (organizationId, id) => db.consumerKey.findFirst({ where: { id, organizationId }, select: consumerColumns }),
    async revokeConsumerKey(organizationId, id, at) {
      const { count } = await db.consumerKey.updateMany({ where: { id, organizationId, revokedAt: null }, data: { revokedAt: at } });
      return count === 1;
    },

    async listSecretHolders(organizationId) {
      const rows = await db.$queryRaw<{ kind: string; name: string; spec: string }[]>`
        SELECT "kind", "name", "spec" FROM "ConfigResource"
        WHERE "organizationId" = ${organizationId} AND "kind" IN ('plugins', 'domains')`;
      return rows.map((row) => ({ kind: row.kind === "domains" ? "domains" : "plugins", name: row.name, spec: row.spec }));
    },
    liveRevocations: (organizationId, now) =>
      db.identitySession.findMany({
        where: { organizationId, revokedAt: { not: null }, expiresAt: { gt: now } },
        select: { id: true, expiresAt: true },
        orderBy: { id: "asc" },
      }),
    async secretVersions(organizationId, secrets) {
      const versions = new Map<string, number>();
      for (let i = 0; i < secrets.length; i += secretChunk) {
        const chunk = secrets.slice(i, i + secretChunk);
        const rows = await db.secret.findMany({
          where: { organizationId, OR: chunk.map(({ environment, name }) => ({ environment, name })) },
          select: { environment: true, name: true, version: true },
        });
        for (const row of rows) versions.set(`${row.environment}/${row.name}`, row.version);
      }
      return versions;
    },

    async saveConnection(connection) {
      const { organizationId, gatewayId, ...rest } = connection;
      await db.gatewayConnection.upsert({
        where: { organizationId_gatewayId: { organizationId, gatewayId } },
        create: { organizationId, gatewayId, ...rest, disconnectedAt: null },
        update: { ...rest, disconnectedAt: null },
      });
    },
    async touchConnection(organizationId, gatewayId, update) {
      await db.gatewayConnection.updateMany({ where: { organizationId, gatewayId }, data: { ...update, disconnectedAt: null } });
    },
    async endConnection(organizationId, gatewayId, connectedAt, at) {
      await db.gatewayConnection.updateMany({
        where: { organizationId, gatewayId, connectedAt },
        data: { lastSeenAt: at, disconnectedAt: at },
      });
    },
    listConnections: (organizationId, since) =>
      db.gatewayConnection.findMany({
        where: { organizationId, lastSeenAt: { gte: since } },
        orderBy: [{ lastSeenAt: "desc" }, { gatewayId: "asc" }],
      }),
    async pruneConnections(before) {
      const { count } = await db.gatewayConnection.deleteMany({ where: { lastSeenAt: { lt: before } } });
      return count;
    },
  };
}
