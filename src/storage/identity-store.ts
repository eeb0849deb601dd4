import type { Db, Tx } from "./database.js";
import { uniquely } from "./errors.js";
import type { Sql, SqlValue } from "./sql.js";

import type {
  IdentitySettingsRecord,
  IdentityRecord,
  RecentFailures,
  SessionMethod,
  SessionRecord,
  OneTimeTokenKind,
  OneTimeTokenRecord,
  SigningKeyRecord,
  IdentityStore,
} from "../domain/identity/identity-store.js";
export type {
  IdentitySettingsRecord,
  IdentitySettingsPatch,
  IdentityRecord,
  FailureQuery,
  RecentFailures,
  LoginContext,
  SessionMethod,
  SessionRecord,
  OneTimeTokenKind,
  OneTimeTokenRecord,
  SigningKeyRecord,
  SessionSigningKeyInfo,
  SessionSigningKeyRecord,
  IdentityStore,
} from "../domain/identity/identity-store.js";

const settingsSelect = {
  passkeys: true,
  magicLinks: true,
  password: true,
  rpId: true,
  origins: true,
  sessionTtlSeconds: true,
  magicLinkTtlSeconds: true,
  lockoutThreshold: true,
  lockoutWindowSeconds: true,
  ipLimitPerMinute: true,
  magicLinkLimitPerHour: true,
  updatedAt: true,
} as const;

type SettingsRow = Omit<IdentitySettingsRecord, "origins"> & { origins: string | null };
type NullableSettingsRow = { [K in keyof SettingsRow]: SettingsRow[K] | null };

function toSettings(row: { origins: string | null } & Omit<IdentitySettingsRecord, "origins">): IdentitySettingsRecord {
  return { ...row, origins: row.origins === null ? null : (JSON.parse(row.origins) as string[]) };
}

/** Failure rows (kind `pair` or `any`, or none) as the two lists, newest first. */
function toRecentFailures(rows: { kind: string | null; createdAt: Date | string | null }[]): RecentFailures {
  const failures: RecentFailures = { pair: [], identifier: [] };
  for (const { kind, createdAt } of rows) {
    if (kind === null || createdAt === null) continue;
    // SQLite may hand a derived table's column back as the stored text.
    const at = createdAt instanceof Date ? createdAt : new Date(createdAt);
    (kind === "pair" ? failures.pair : failures.identifier).push(at);
  }
  failures.pair.sort((a, b) => b.getTime() - a.getTime());
  failures.identifier.sort((a, b) => b.getTime() - a.getTime());
  return failures;
}

function toSession(row: { method: string } & Omit<SessionRecord, "method">): SessionRecord {
  return { ...row, method: row.method as SessionMethod };
}

function toSigningKey(row: Omit<SigningKeyRecord, "privateKeyEnc"> & { privateKeyEnc: Uint8Array }): SigningKeyRecord {
  return { ...row, privateKeyEnc: Buffer.from(row.privateKeyEnc) };
}

const sessionSigningKeyInfo = {
  id: true,
  organizationId: true,
  publicJwk: true,
  createdAt: true,
  retiredAt: true,
  publishedUntil: true,
} as const;

/**
 * The queries on the sign-in paths (settings, limits, the password lookup,
 * sessions) are plain SQL, one text for SQLite and PostgreSQL with parameters
 * bound by the driver: a typed Prisma query costs two to four times the CPU of
 * a raw one, and a raw one through Prisma's client several times what the
 * driver takes, CPU that competes with password hashing on the same cores.
 */
export function createIdentityStore(db: Db | Tx, sql?: Sql): IdentityStore {
  // Outside a transaction the plain statements skip Prisma's client pipeline (sql.ts); inside one they are the transaction's.
  const raw: Pick<Sql, "query" | "execute"> = sql ?? {
    query: <T extends object[]>(strings: TemplateStringsArray, ...values: SqlValue[]) => db.$queryRaw<T>(strings, ...values),
    execute: (strings: TemplateStringsArray, ...values: SqlValue[]) => db.$executeRaw(strings, ...values),
  };
  return {
    async findSettings(organizationId) {
      const rows = await raw.query<SettingsRow[]>`
        SELECT "passkeys", "magicLinks", "password", "rpId", "origins", "sessionTtlSeconds", "magicLinkTtlSeconds",
               "lockoutThreshold", "lockoutWindowSeconds", "ipLimitPerMinute", "magicLinkLimitPerHour", "updatedAt"
        FROM "IdentitySettings" WHERE "organizationId" = ${organizationId}`;
      return rows[0] ? toSettings(rows[0]) : null;
    },
    async saveSettings(organizationId, patch, at) {
      const { origins, ...rest } = patch;
      const data = {
        ...rest,
        ...(origins !== undefined ? { origins: origins === null ? null : JSON.stringify(origins) } : {}),
        updatedAt: at,
      };
      const row = await db.identitySettings.upsert({
        where: { organizationId },
        create: { organizationId, ...data },
        update: data,
        select: settingsSelect,
      });
      return toSettings(row);
    },

    async findIdentityByIdentifier(organizationId, identifier) {
      const rows = await raw.query<IdentityRecord[]>`
        SELECT "id", "organizationId", "identifier", "createdAt" FROM "Identity"
        WHERE "organizationId" = ${organizationId} AND "identifier" = ${identifier}`;
      return rows[0] ?? null;
    },
    findIdentity: (organizationId, id) => db.identity.findFirst({ where: { id, organizationId } }),
    async createIdentity(identity) {
      await uniquely(() => db.identity.create({ data: identity }), "identity_exists", "an identity with this identifier already exists");
    },

    async findPasswordHash(organizationId, identityId) {
      const row = await db.passwordCredential.findFirst({ where: { identityId, organizationId }, select: { hash: true } });
      return row?.hash ?? null;
    },
    async findLoginContext(organizationId, identifier, failures) {
      // One row per recent failure (at most `threshold` from this client and
      // `identifierLimit` from any), or one row when there is none, each with
      // the settings, the identity and its hash: one round trip for everything
      // a login decides on.
      const rows = await raw.query<
        (NullableSettingsRow & {
          settingsOrganizationId: string | null;
          identityId: string | null;
          hash: string | null;
          failureKind: string | null;
          failedAt: Date | string | null;
        })[]
      >`
        SELECT s."organizationId" AS "settingsOrganizationId",
               s."passkeys", s."magicLinks", s."password", s."rpId", s."origins", s."sessionTtlSeconds", s."magicLinkTtlSeconds",
               s."lockoutThreshold", s."lockoutWindowSeconds", s."ipLimitPerMinute", s."magicLinkLimitPerHour", s."updatedAt",
               i."id" AS "identityId", p."hash" AS "hash", f."kind" AS "failureKind", f."createdAt" AS "failedAt"
        FROM (SELECT 1 AS "anchor") AS "anchor"
        LEFT JOIN "IdentitySettings" s ON s."organizationId" = ${organizationId}
        LEFT JOIN "Identity" i ON i."organizationId" = ${organizationId} AND i."identifier" = ${identifier}
        LEFT JOIN "PasswordCredential" p ON p."identityId" = i."id" AND p."organizationId" = i."organizationId"
        LEFT JOIN (
          SELECT 'pair' AS "kind", "createdAt" FROM (
            SELECT "createdAt" FROM "LoginFailure"
            WHERE "organizationId" = ${organizationId} AND "identifier" = ${failures.identifierHash}
              AND "client" = ${failures.clientHash} AND "createdAt" >= ${failures.since}
            ORDER BY "createdAt" DESC LIMIT ${failures.threshold}) AS "fromClient"
          UNION ALL
          SELECT 'any' AS "kind", "createdAt" FROM (
            SELECT "createdAt" FROM "LoginFailure"
            WHERE "organizationId" = ${organizationId} AND "identifier" = ${failures.identifierHash} AND "createdAt" >= ${failures.since}
            ORDER BY "createdAt" DESC LIMIT ${failures.identifierLimit}) AS "fromAnywhere"
        ) AS f ON 1 = 1`;
      const row = rows[0];
      if (!row) return { settings: null, identityId: null, hash: null, failures: { pair: [], identifier: [] } };
      const { settingsOrganizationId, identityId, hash, failureKind: _kind, failedAt: _failedAt, ...settings } = row;
      return {
        settings: settingsOrganizationId === null ? null : toSettings(settings as SettingsRow),
        identityId,
        hash,
        failures: toRecentFailures(rows.map((r) => ({ kind: r.failureKind, createdAt: r.failedAt }))),
      };
    },
    async savePasswordHash(organizationId, identityId, hash, at) {
      await db.passwordCredential.upsert({
        where: { identityId },
        create: { identityId, organizationId, hash, updatedAt: at },
        update: { hash, updatedAt: at },
      });
    },

    async createSession(session) {
      await raw.execute`
        INSERT INTO "IdentitySession" ("id", "organizationId", "identityId", "method", "createdAt", "expiresAt")
        VALUES (${session.id}, ${session.organizationId}, ${session.identityId}, ${session.method}, ${session.createdAt}, ${session.expiresAt})`;
    },
    async findSession(organizationId, id) {
      const rows = await raw.query<(Omit<SessionRecord, "method"> & { method: string })[]>`
        SELECT "id", "organizationId", "identityId", "method", "createdAt", "expiresAt", "revokedAt"
        FROM "IdentitySession" WHERE "id" = ${id} AND "organizationId" = ${organizationId}`;
      return rows[0] ? toSession(rows[0]) : null;
    },
    async revokeSession(organizationId, id, at) {
      const { count } = await db.identitySession.updateMany({ where: { id, organizationId, revokedAt: null }, data: { revokedAt: at } });
      if (count === 1) return true;
      return (await db.identitySession.count({ where: { id, organizationId } })) === 1;
    },
    async revokeSessionsOf(organizationId, identityId, except, at) {
      const { count } = await db.identitySession.updateMany({
        where: { organizationId, identityId, revokedAt: null, expiresAt: { gt: at }, ...(except ? { NOT: { id: except } } : {}) },
        data: { revokedAt: at },
      });
      return count;
    },

    async revokeLiveSessionsOf(organizationId, identityId, except, at) {
      const live = await db.identitySession.findMany({
        where: { organizationId, identityId, revokedAt: null, expiresAt: { gt: at }, ...(except ? { NOT: { id: except } } : {}) },
        select: { id: true },
      });
      if (live.length === 0) return [];
      // Only the rows still live are revoked by this call (another may have revoked some meanwhile).
      const revoked: string[] = [];
      for (const { id } of live) {
        const { count } = await db.identitySession.updateMany({ where: { organizationId, id, revokedAt: null }, data: { revokedAt: at } });
        if (count === 1) revoked.push(id);
      }
      return revoked;
    },
    async deleteIdentity(organizationId, identityId) {
      await db.passwordCredential.deleteMany({ where: { organizationId, identityId } });
      await db.passkey.deleteMany({ where: { organizationId, identityId } });
      await db.oneTimeToken.deleteMany({ where: { organizationId, identityId } });
      const { count } = await db.identity.deleteMany({ where: { organizationId, id: identityId } });
      return count === 1;
    },

    async createOneTimeToken(token) {
      await raw.execute`
        INSERT INTO "OneTimeToken" ("id", "organizationId", "identityId", "kind", "hash", "createdAt", "expiresAt")
        VALUES (${token.id}, ${token.organizationId}, ${token.identityId}, ${token.kind}, ${token.hash}, ${token.createdAt}, ${token.expiresAt})`;
    },
    async findOneTimeToken(hash) {
      const rows = await raw.query<(Omit<OneTimeTokenRecord, "kind"> & { kind: string })[]>`
        SELECT "id", "organizationId", "identityId", "kind", "createdAt", "expiresAt", "spentAt"
        FROM "OneTimeToken" WHERE "hash" = ${hash}`;
      const row = rows[0];
      return row ? { ...row, kind: row.kind as OneTimeTokenKind } : null;
    },
    async spendOneTimeToken(organizationId, hash, kind, at) {
      // The one conditional update that makes a token one-time: the database
      // applies it to the row at most once, whoever else is trying.
      const count = await raw.execute`
        UPDATE "OneTimeToken" SET "spentAt" = ${at}
        WHERE "hash" = ${hash} AND "organizationId" = ${organizationId} AND "kind" = ${kind}
          AND "spentAt" IS NULL AND "expiresAt" > ${at}`;
      return count === 1;
    },
    async spendOneTimeTokensOf(organizationId, identityId, kind, at) {
      const { count } = await db.oneTimeToken.updateMany({
        where: { organizationId, identityId, kind, spentAt: null, expiresAt: { gt: at } },
        data: { spentAt: at },
      });
      return count;
    },

    async listSigningKeys(retiredSince) {
      const rows = await db.signingKey.findMany({
        where: { OR: [{ retiredAt: null }, { retiredAt: { gte: retiredSince } }] },
        orderBy: [{ createdAt: "desc" }, { id: "asc" }],
      });
      return rows.map(toSigningKey);
    },
    async findSigningKey(id) {
      const row = await db.signingKey.findUnique({ where: { id } });
      return row ? toSigningKey(row) : null;
    },
    async retireSigningKeys(at) {
      await db.signingKey.updateMany({ where: { retiredAt: null }, data: { retiredAt: at } });
    },

    async findLiveSessionSigningKey(organizationId) {
      const row = await db.sessionSigningKey.findFirst({
        where: { organizationId, retiredAt: null },
        orderBy: [{ createdAt: "desc" }, { id: "asc" }],
      });
      return row ? { ...row, privateKeyEnc: Buffer.from(row.privateKeyEnc) } : null;
    },
    findSessionSigningKey: (id) => db.sessionSigningKey.findUnique({ where: { id }, select: sessionSigningKeyInfo }),
    listPublishedSessionSigningKeys: (at, organizationId) =>
      db.sessionSigningKey.findMany({
        where: { ...(organizationId === undefined ? {} : { organizationId }), OR: [{ retiredAt: null }, { publishedUntil: { gt: at } }] },
        orderBy: [{ createdAt: "desc" }, { id: "asc" }],
        select: sessionSigningKeyInfo,
      }),
    async createSessionSigningKey(key) {
      await db.sessionSigningKey.create({ data: { ...key, privateKeyEnc: new Uint8Array(key.privateKeyEnc) } });
    },
    async retireSessionSigningKeys(organizationId, keepId, at, publishedUntil) {
      const live = await db.sessionSigningKey.findMany({
        where: { organizationId, retiredAt: null, id: { not: keepId } },
        select: { id: true, createdAt: true },
      });
      if (live.length === 0) return [];
      await db.sessionSigningKey.updateMany({
        where: { organizationId, retiredAt: null, id: { in: live.map((key) => key.id) } },
        data: { retiredAt: at, publishedUntil },
      });
      return live;
    },
    async latestSessionExpiry(organizationId) {
      const found = await db.identitySession.aggregate({ where: { organizationId }, _max: { expiresAt: true } });
      return found._max.expiresAt ?? null;
    },

    async recordLoginFailure(failure) {
      await raw.execute`
        INSERT INTO "LoginFailure" ("id", "organizationId", "identifier", "client", "createdAt")
        VALUES (${failure.id}, ${failure.organizationId}, ${failure.identifierHash}, ${failure.clientHash}, ${failure.createdAt})`;
    },
    async recentLoginFailures(organizationId, failures) {
      const rows = await raw.query<{ kind: string; createdAt: Date | string }[]>`
        SELECT 'pair' AS "kind", "createdAt" FROM (
          SELECT "createdAt" FROM "LoginFailure"
          WHERE "organizationId" = ${organizationId} AND "identifier" = ${failures.identifierHash}
            AND "client" = ${failures.clientHash} AND "createdAt" >= ${failures.since}
          ORDER BY "createdAt" DESC LIMIT ${failures.threshold}) AS "fromClient"
        UNION ALL
        SELECT 'any' AS "kind", "createdAt" FROM (
          SELECT "createdAt" FROM "LoginFailure"
          WHERE "organizationId" = ${organizationId} AND "identifier" = ${failures.identifierHash} AND "createdAt" >= ${failures.since}
          ORDER BY "createdAt" DESC LIMIT ${failures.identifierLimit}) AS "fromAnywhere"`;
      return toRecentFailures(rows);
    },
    async clearLoginFailures(organizationId, identifierHash) {
      await db.loginFailure.deleteMany({ where: { organizationId, identifier: identifierHash } });
    },

    async hitRateCounter(key, windowStart) {
      // One row per key and window, counted by one INSERT ... ON CONFLICT DO
      // UPDATE (same statement on SQLite and PostgreSQL): concurrent hits on
      // any instance all count.
      const id = `${key}@${windowStart.getTime()}`;
      const rows = await raw.query<{ count: number | bigint }[]>`
        INSERT INTO "RateCounter" ("key", "windowStart", "count") VALUES (${id}, ${windowStart}, 1)
        ON CONFLICT ("key") DO UPDATE SET "count" = "RateCounter"."count" + 1
        RETURNING "count"`;
      return Number(rows[0]?.count ?? 0);
    },
    async prune(countersBefore, failuresBefore) {
      await db.rateCounter.deleteMany({ where: { windowStart: { lt: countersBefore } } });
      await db.loginFailure.deleteMany({ where: { createdAt: { lt: failuresBefore } } });
    },
  };
}
