import { empty, join, sqltag as sql } from "@prisma/client/runtime/client";
import type { Db, Tx } from "./database.js";
import { isTransientConflict, isUniqueViolation } from "./errors.js";

import type { SecretRecord, SecretAuditAction, SecretsStore } from "../domain/secrets/secrets-store.js";
export type {
  SecretKeyringRecord,
  PreviousSealingKeyRecord,
  SealingKeyRotation,
  SecretRecord,
  SecretVersionRecord,
  SecretAuditAction,
  SecretAuditRecord,
  AuditCursor,
  SecretsStore,
} from "../domain/secrets/secrets-store.js";

export function createSecretsStore(db: Db | Tx): SecretsStore {
  const toSecret = (row: {
    id: string;
    organizationId: string;
    environment: string;
    name: string;
    version: number;
    tags: string;
    updatedAt: Date;
  }): SecretRecord => ({ ...row, tags: parseList(row.tags) });

  return {
    async findKeyring(organizationId) {
      const row = await db.secretKeyring.findUnique({ where: { organizationId } });
      if (!row) return null;
      return {
        organizationId: row.organizationId,
        publicKeyPem: row.publicKeyPem,
        keyId: row.keyId,
        privateKeyEnc: Buffer.from(row.privateKeyEnc),
        dataKeyEnc: Buffer.from(row.dataKeyEnc),
        masterKeyId: row.masterKeyId,
        keyCreatedAt: row.rotatedAt ?? row.createdAt,
      };
    },
    async insertKeyring(keyring) {
      try {
        await db.secretKeyring.create({
          data: {
            organizationId: keyring.organizationId,
            publicKeyPem: keyring.publicKeyPem,
            keyId: keyring.keyId,
            privateKeyEnc: new Uint8Array(keyring.privateKeyEnc),
            dataKeyEnc: new Uint8Array(keyring.dataKeyEnc),
            masterKeyId: keyring.masterKeyId,
            createdAt: keyring.keyCreatedAt,
          },
        });
        return true;
      } catch (error) {
        if (isUniqueViolation(error)) return false;
        throw error;
      }
    },
    async listPreviousSealingKeys(organizationId) {
      const rows = await db.previousSealingKey.findMany({
        where: { organizationId },
        orderBy: [{ retiredAt: "desc" }, { createdAt: "desc" }],
      });
      return rows.map((row) => ({ ...row, privateKeyEnc: Buffer.from(row.privateKeyEnc) }));
    },
    async rotateSealingKey(rotation) {
      const current = await db.secretKeyring.findUnique({ where: { organizationId: rotation.organizationId } });
      if (!current || current.keyId !== rotation.replacedKeyId) return false;
      // The bytes as stored now (a master-key rotation may have wrapped them again since they were read).
      await db.previousSealingKey.create({
        data: {
          organizationId: current.organizationId,
          keyId: current.keyId,
          publicKeyPem: current.publicKeyPem,
          privateKeyEnc: current.privateKeyEnc,
          masterKeyId: current.masterKeyId,
          createdAt: current.rotatedAt ?? current.createdAt,
          retiredAt: rotation.rotatedAt,
        },
      });
      const { count } = await db.secretKeyring.updateMany({
        where: { organizationId: rotation.organizationId, keyId: rotation.replacedKeyId },
        data: {
          publicKeyPem: rotation.publicKeyPem,
          keyId: rotation.keyId,
          privateKeyEnc: new Uint8Array(rotation.privateKeyEnc),
          dataKeyEnc: new Uint8Array(rotation.dataKeyEnc),
          masterKeyId: rotation.masterKeyId,
          rotatedAt: rotation.rotatedAt,
        },
      });
      // Replaced between the read and the update (PostgreSQL, READ COMMITTED): undo the insert with the transaction.
      if (count !== 1) throw new SealingKeyRotationRace();
      return true;
    },
    async deletePreviousSealingKeys(organizationId, retiredBefore) {
      await db.previousSealingKey.deleteMany({ where: { organizationId, retiredAt: { lt: retiredBefore } } });
    },
    async findSealingKeyRotationDays(organizationId) {
      const row = await db.organization.findUnique({ where: { id: organizationId }, select: { sealingKeyRotationDays: true } });
      return row ? row.sealingKeyRotationDays : null;
    },
    async setSealingKeyRotationDays(organizationId, days) {
      const { count } = await db.organization.updateMany({ where: { id: organizationId }, data: { sealingKeyRotationDays: days } });
      return count === 1;
    },
    async findSecret(organizationId, environment, name) {
      const row = await db.secret.findUnique({ where: { organizationId_environment_name: { organizationId, environment, name } } });
      return row ? toSecret(row) : null;
    },
    async createSecret(secret) {
      await db.secret.create({ data: { ...secret, tags: JSON.stringify(secret.tags) } });
    },
    async advanceSecret(key, change) {
      try {
        const row = await db.secret.update({
          where: { organizationId_environment_name: key },
          data: { version: { increment: 1 }, tags: JSON.stringify(change.tags), updatedAt: change.updatedAt },
        });
        return toSecret(row);
      } catch (error) {
        // No such secret (never written, or deleted since): the caller creates it.
        if ((error as { code?: unknown } | null)?.code === "P2025") return null;
        throw error;
      }
    },
    async insertVersion(version) {
      await db.secretVersion.create({
        data: { ...version, ciphertext: new Uint8Array(version.ciphertext), tags: JSON.stringify(version.tags) },
      });
    },
    async pruneVersions(secretId, keepFrom) {
      await db.secretVersion.deleteMany({ where: { secretId, version: { lt: keepFrom } } });
    },
    async listSecrets(organizationId, environment) {
      const rows = await db.secret.findMany({ where: { organizationId, environment } });
      return rows.map(toSecret);
    },
    async listEnvironments(organizationId) {
      const rows = await db.secret.findMany({ where: { organizationId }, distinct: ["environment"], select: { environment: true } });
      return rows.map((row) => row.environment);
    },
    async listCurrentValues(organizationId, environment, names, options = {}) {
      // One join instead of a metadata query and a per-version OR query: the
      // same answer in a third of the time, and one consistent snapshot.
      const byName = names.length > 0 ? sql`AND s."name" IN (${join([...names])})` : empty;
      const limit = options.limit !== undefined ? sql`LIMIT ${options.limit}` : empty;
      const rows = await db.$queryRaw<
        { id: string; name: string; version: number | bigint; tags: string; updatedAt: Date | string; ciphertext: Uint8Array }[]
      >`SELECT s."id", s."name", s."version", s."tags", s."updatedAt", v."ciphertext"
        FROM "Secret" s JOIN "SecretVersion" v ON v."secretId" = s."id" AND v."version" = s."version"
        WHERE s."organizationId" = ${organizationId} AND s."environment" = ${environment} ${byName} ${limit}`;
      return rows.map((row) => ({
        id: row.id,
        organizationId,
        environment,
        name: row.name,
        version: Number(row.version),
        tags: parseList(row.tags),
        updatedAt: row.updatedAt instanceof Date ? row.updatedAt : new Date(row.updatedAt),
        ciphertext: Buffer.from(row.ciphertext),
      }));
    },
    async deleteSecret(organizationId, environment, name) {
      const row = await db.secret.findUnique({
        where: { organizationId_environment_name: { organizationId, environment, name } },
        select: { id: true },
      });
      if (!row) return false;
      // Explicit, rather than relying on ON DELETE CASCADE, which SQLite applies only with foreign_keys on.
      await db.secretVersion.deleteMany({ where: { secretId: row.id } });
      const { count } = await db.secret.deleteMany({ where: { id: row.id, organizationId } });
      return count === 1;
    },
    async listVersions(secretId) {
      const rows = await db.secretVersion.findMany({
        where: { secretId },
        select: { version: true, tags: true, actor: true, createdAt: true },
        orderBy: { version: "desc" },
      });
      return rows.map((row) => ({ ...row, tags: parseList(row.tags) }));
    },
    async insertAuditEvent(event) {
      await db.secretAuditEvent.create({ data: { ...event, names: JSON.stringify(event.names) } });
    },
    async insertAuditEvents(events) {
      if (events.length === 0) return;
      // One multi-row INSERT: a fraction of the cost of createMany (measured on SQLite:
      // 0.7 ms for 10 rows against 3.4 ms), with the same stored forms as create().
      const rows = events.map(
        (e) => sql`(${e.id}, ${e.organizationId}, ${e.action}, ${e.actor}, ${e.environment}, ${JSON.stringify(e.names)}, ${e.createdAt})`,
      );
      await db.$executeRaw`INSERT INTO "SecretAuditEvent" ("id", "organizationId", "action", "actor", "environment", "names", "createdAt") VALUES ${join(rows)}`;
    },
    async listAuditEvents(organizationId, limit, after) {
      const rows = await db.secretAuditEvent.findMany({
        where: {
          organizationId,
          ...(after ? { OR: [{ createdAt: { lt: after.createdAt } }, { createdAt: after.createdAt, id: { lt: after.id } }] } : {}),
        },
        orderBy: [{ createdAt: "desc" }, { id: "desc" }],
        take: limit,
      });
      return rows.map((row) => ({ ...row, action: row.action as SecretAuditAction, names: parseList(row.names) }));
    },
  };
}

/**
 * Runs a transaction, retrying the whole of it when it lost a race: a
 * concurrent first write of the same secret (unique violation, which aborts a
 * PostgreSQL transaction), a serialization conflict, or a sealing-key rotation
 * that another rotation overtook. The transaction re-reads everything it
 * needs, so a retry is safe; what it publishes is delivered once the attempt
 * that commits has committed (the change feed's transaction).
 */
export async function retryingSecretsConflicts<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      if (attempt >= 8 || !(isUniqueViolation(error) || isTransientConflict(error) || error instanceof SealingKeyRotationRace)) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * attempt));
    }
  }
}

/** A rotation that lost a race after its first write: the transaction rolls back and is retried, and then sees the winner. */
class SealingKeyRotationRace extends Error {
  override readonly name = "SealingKeyRotationRace";
  constructor() {
    super("another rotation replaced the sealing key at the same moment");
  }
}

function parseList(json: string): string[] {
  const value: unknown = JSON.parse(json);
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];
}
