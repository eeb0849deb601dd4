import { empty, sqltag as sql } from "@prisma/client/runtime/client";
import type { Database, Db, Tx } from "./database.js";
import { uniquely } from "./errors.js";
import { parseStringArray, passkeyRowData } from "./passkey-store.js";
import type { OrganizationKeyKind, Role } from "./tenancy-store.js";

import type {
  OperatorAccountRecord,
  MemberRecord,
  InvitationRecord,
  OperatorPasskeyRecord,
  OperatorChallengeKind,
  OperatorChallengeRecord,
  DashboardStore,
} from "../dashboard/operators/dashboard-store.js";
export type {
  OperatorAccountRecord,
  SetupTokenRecord,
  OperatorSessionRecord,
  MemberRecord,
  InvitationRecord,
  IdentityKeyRecord,
  OperatorPasskeyRecord,
  OperatorChallengeKind,
  OperatorChallengeRecord,
  KeysetPage,
  TimeAndId,
  ApiKeyListRecord,
  SecretMetadataRecord,
  IdentitySessionSummaryRecord,
  DashboardStore,
} from "../dashboard/operators/dashboard-store.js";

const accountSelect = { id: true, email: true, displayName: true, kind: true, passwordHash: true, disabledAt: true } as const;

function toAccount(row: {
  id: string;
  email: string;
  displayName: string;
  kind: string;
  passwordHash: string | null;
  disabledAt: Date | null;
}): OperatorAccountRecord {
  return { ...row, kind: row.kind === "service" ? "service" : "person" };
}

function toMember(row: {
  role: string;
  createdAt: Date;
  account: { id: string; email: string; displayName: string; passwordHash: string | null };
}): MemberRecord {
  return {
    accountId: row.account.id,
    email: row.account.email,
    displayName: row.account.displayName,
    role: row.role as Role,
    pending: row.account.passwordHash === null,
    createdAt: row.createdAt,
  };
}

const invitationSelect = {
  id: true,
  organizationId: true,
  email: true,
  displayName: true,
  role: true,
  invitedById: true,
  createdAt: true,
  expiresAt: true,
} as const;

type InvitationRow = Omit<InvitationRecord, "role" | "invitedBy"> & { role: string };

const memberSelect = {
  role: true,
  createdAt: true,
  account: { select: { id: true, email: true, displayName: true, passwordHash: true } },
} as const;

type OperatorPasskeyRow = Omit<OperatorPasskeyRecord, "counter" | "transports"> & { counter: bigint | number; transports: string };

function toOperatorPasskey(row: OperatorPasskeyRow): OperatorPasskeyRecord {
  return { ...row, publicKey: new Uint8Array(row.publicKey), counter: Number(row.counter), transports: parseStringArray(row.transports) };
}

function toChallenge(row: Omit<OperatorChallengeRecord, "kind"> & { kind: string }): OperatorChallengeRecord {
  return { ...row, kind: row.kind as OperatorChallengeKind };
}

const challengeSelect = {
  id: true,
  kind: true,
  challenge: true,
  accountId: true,
  emailGiven: true,
  createdAt: true,
  expiresAt: true,
  usedAt: true,
} as const;

/** Raw queries may hand SQLite dates back as text. */
function asDate(value: Date | string | number): Date {
  return value instanceof Date ? value : new Date(value);
}

/** `%`, `_` and the escape character itself match literally in LIKE ... ESCAPE '\'. */
function likeLiteral(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/**
 * The dashboard's store over a client or a transaction. `provider` picks the
 * SQL that differs: names sort in byte order on PostgreSQL only when it is
 * given (the app always gives it); without it, in the database's collation.
 */
export function createDashboardStore(db: Db | Tx, provider?: Database["provider"]): DashboardStore {
  /** Byte order on both databases: SQLite compares text as bytes; PostgreSQL needs the "C" collation. */
  const byteOrder = provider === "postgresql" ? sql`COLLATE "C"` : empty;

  /** Invitations with their inviting admins' names (one more query for the page, not one per row). */
  async function withInviters(rows: InvitationRow[]): Promise<InvitationRecord[]> {
    const ids = [...new Set(rows.flatMap((row) => (row.invitedById === null ? [] : [row.invitedById])))];
    const inviters =
      ids.length === 0
        ? []
        : await db.account.findMany({ where: { id: { in: ids } }, select: { id: true, email: true, displayName: true } });
    const names = new Map(inviters.map((a) => [a.id, `${a.displayName} <${a.email}>`]));
    return rows.map((row) => ({
      ...row,
      role: row.role as Role,
      invitedBy: row.invitedById === null ? "" : (names.get(row.invitedById) ?? ""),
    }));
  }

  return {
    async findAccount(id) {
      const row = await db.account.findUnique({ where: { id }, select: accountSelect });
      return row ? toAccount(row) : null;
    },
    async findAccountByEmail(email) {
      const row = await db.account.findUnique({ where: { email }, select: accountSelect });
      return row ? toAccount(row) : null;
    },
    async setUpAccount(accountId, change) {
      await uniquely(
        () => db.account.update({ where: { id: accountId }, data: change }),
        "email_taken",
        "another account already uses this e-mail address",
      );
    },
    async setPasswordHash(accountId, passwordHash) {
      await db.account.update({ where: { id: accountId }, data: { passwordHash } });
    },
    async disableAccount(accountId, at) {
      await db.account.updateMany({ where: { id: accountId, disabledAt: null }, data: { disabledAt: at } });
    },
    async createPersonAccount(account) {
      await uniquely(
        () => db.account.create({ data: { ...account, kind: "person" } }),
        "email_taken",
        "another account already uses this e-mail address",
      );
    },
    async reopenAccount(accountId, change) {
      const { count } = await db.account.updateMany({
        where: { id: accountId, disabledAt: { not: null } },
        data: { ...change, disabledAt: null },
      });
      if (count !== 1) return false;
      await db.operatorPasskey.deleteMany({ where: { accountId } });
      return true;
    },
    async lockAccount(accountId) {
      const count = await db.$executeRaw`UPDATE "Account" SET "email" = "email" WHERE "id" = ${accountId}`;
      return count === 1;
    },

    findSetupToken: (hash) =>
      db.accountSetupToken.findUnique({ where: { hash }, select: { id: true, accountId: true, expiresAt: true, usedAt: true } }),
    async spendSetupToken(hash, at) {
      const { count } = await db.accountSetupToken.updateMany({
        where: { hash, usedAt: null, expiresAt: { gt: at } },
        data: { usedAt: at },
      });
      return count === 1;
    },
    async voidSetupTokensOf(accountId, at) {
      await db.accountSetupToken.updateMany({ where: { accountId, usedAt: null }, data: { usedAt: at } });
    },

    async createSession(session) {
      await db.dashboardSession.create({ data: session });
    },
    findSessionByHash: (hash) =>
      db.dashboardSession.findUnique({
        where: { hash },
        select: { id: true, accountId: true, createdAt: true, lastSeenAt: true, expiresAt: true, revokedAt: true },
      }),
    findSession: (id) =>
      db.dashboardSession.findUnique({
        where: { id },
        select: { id: true, accountId: true, createdAt: true, lastSeenAt: true, expiresAt: true, revokedAt: true },
      }),
    async touchSession(id, at) {
      await db.dashboardSession.updateMany({ where: { id, revokedAt: null }, data: { lastSeenAt: at } });
    },
    async revokeSession(id, at) {
      await db.dashboardSession.updateMany({ where: { id, revokedAt: null }, data: { revokedAt: at } });
    },
    async revokeSessionsOf(accountId, at, except) {
      await db.dashboardSession.updateMany({
        where: { accountId, revokedAt: null, ...(except === undefined ? {} : { id: { not: except } }) },
        data: { revokedAt: at },
      });
    },
    async purgeExpired(at, idleBefore) {
      const sessions = await db.dashboardSession.deleteMany({
        where: { OR: [{ expiresAt: { lte: at } }, { lastSeenAt: { lte: idleBefore } }] },
      });
      const challenges = await db.operatorPasskeyChallenge.deleteMany({ where: { expiresAt: { lte: at } } });
      return { sessions: sessions.count, challenges: challenges.count };
    },

    async listOperatorPasskeys(accountId) {
      const rows = await db.operatorPasskey.findMany({ where: { accountId }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
      return rows.map(toOperatorPasskey);
    },
    countOperatorPasskeys: (accountId) => db.operatorPasskey.count({ where: { accountId } }),
    async findOperatorPasskeyByCredentialId(credentialId) {
      const row = await db.operatorPasskey.findUnique({ where: { credentialId } });
      return row ? toOperatorPasskey(row) : null;
    },
    async createOperatorPasskey(passkey) {
      await uniquely(
        () => db.operatorPasskey.create({ data: passkeyRowData(passkey) }),
        "passkey_exists",
        "this passkey is already registered",
      );
    },
    async recordOperatorPasskeyUse(id, use) {
      const counter = BigInt(use.counter);
      const { count } = await db.operatorPasskey.updateMany({
        where: { id, ...(use.counter === 0 ? { counter: 0n } : { counter: { lt: counter } }) },
        data: { counter, backedUp: use.backedUp, deviceType: use.deviceType, lastUsedAt: use.at },
      });
      return count === 1;
    },
    async removeOperatorPasskey(accountId, id) {
      const { count } = await db.operatorPasskey.deleteMany({ where: { id, accountId } });
      return count === 1;
    },
    async removeOperatorPasskeysOf(accountId) {
      await db.operatorPasskey.deleteMany({ where: { accountId } });
    },
    async removeAddPasskeyChallengesOf(accountId) {
      await db.operatorPasskeyChallenge.deleteMany({ where: { accountId, kind: "add_passkey" } });
    },

    async createChallenge(challenge) {
      await db.operatorPasskeyChallenge.create({ data: challenge });
    },
    async findChallenge(id) {
      const row = await db.operatorPasskeyChallenge.findUnique({ where: { id }, select: challengeSelect });
      return row ? toChallenge(row) : null;
    },
    async spendChallenge(id, kind, accountId, at) {
      // The one conditional update that makes a challenge single-use.
      const { count } = await db.operatorPasskeyChallenge.updateMany({
        where: { id, kind, ...(accountId === null ? {} : { accountId }), usedAt: null, expiresAt: { gt: at } },
        data: { usedAt: at },
      });
      if (count !== 1) return null;
      const row = await db.operatorPasskeyChallenge.findUnique({ where: { id }, select: challengeSelect });
      return row ? toChallenge(row) : null;
    },

    async listOrganizationsOf(accountId) {
      const rows = await db.membership.findMany({
        where: { accountId },
        select: { organizationId: true, role: true, organization: { select: { name: true } } },
        orderBy: [{ organization: { name: "asc" } }, { organizationId: "asc" }],
      });
      return rows.map((row) => ({ organizationId: row.organizationId, name: row.organization.name, role: row.role as Role }));
    },
    async lockOrganization(organizationId) {
      // An UPDATE that changes nothing still takes the row lock (PostgreSQL) and the write lock (SQLite).
      const rows = await db.$queryRaw<{ id: string }[]>`
        UPDATE "Organization" SET "name" = "name" WHERE "id" = ${organizationId} RETURNING "id"`;
      return rows.length === 1;
    },
    async listMembers(organizationId, page) {
      const rows = await db.membership.findMany({
        where: {
          organizationId,
          account: { kind: "person", disabledAt: null, ...(page.after === null ? {} : { email: { gt: page.after } }) },
        },
        select: memberSelect,
        orderBy: [{ account: { email: "asc" } }],
        take: page.take,
      });
      return rows.map(toMember);
    },
    async findMember(organizationId, accountId) {
      const row = await db.membership.findFirst({
        where: { organizationId, accountId, account: { kind: "person", disabledAt: null } },
        select: memberSelect,
      });
      return row ? toMember(row) : null;
    },
    countAdmins: (organizationId) =>
      db.membership.count({ where: { organizationId, role: "admin", account: { kind: "person", disabledAt: null } } }),
    async setRole(organizationId, accountId, role) {
      await db.membership.update({ where: { organizationId_accountId: { organizationId, accountId } }, data: { role } });
    },
    async removeMembership(organizationId, accountId) {
      await db.membership.deleteMany({ where: { organizationId, accountId } });
    },
    countMembershipsOf: (accountId) => db.membership.count({ where: { accountId } }),
    async isMemberByEmail(organizationId, email) {
      return (await db.membership.count({ where: { organizationId, account: { email } } })) > 0;
    },

    async createInvitation(invitation) {
      await uniquely(
        () => db.invitation.create({ data: invitation }),
        "invitation_exists",
        "this organisation already has an invitation for this e-mail address",
      );
    },
    async listInvitations(organizationId, page) {
      const rows = await db.invitation.findMany({
        where: { organizationId, ...(page.after === null ? {} : { email: { gt: page.after } }) },
        select: invitationSelect,
        orderBy: [{ email: "asc" }],
        take: page.take,
      });
      return withInviters(rows);
    },
    async findInvitation(organizationId, id) {
      const row = await db.invitation.findFirst({ where: { id, organizationId }, select: invitationSelect });
      return row ? ((await withInviters([row]))[0] ?? null) : null;
    },
    async findInvitationByToken(tokenHash) {
      const row = await db.invitation.findUnique({ where: { tokenHash }, select: invitationSelect });
      if (!row) return null;
      const [invitation] = await withInviters([row]);
      const organization = await db.organization.findUnique({ where: { id: row.organizationId }, select: { name: true } });
      return invitation && organization ? { ...invitation, organizationName: organization.name } : null;
    },
    async replaceInvitationToken(organizationId, id, token) {
      const { count } = await db.invitation.updateMany({ where: { id, organizationId }, data: token });
      return count === 1;
    },
    async deleteInvitation(organizationId, id) {
      const { count } = await db.invitation.deleteMany({ where: { id, organizationId } });
      return count === 1;
    },
    async deleteInvitationsBy(organizationId, invitedById) {
      const { count } = await db.invitation.deleteMany({ where: { organizationId, invitedById } });
      return count;
    },
    async spendInvitation(id, tokenHash, at) {
      // The one conditional delete that makes an invitation single-use.
      const { count } = await db.invitation.deleteMany({ where: { id, tokenHash, expiresAt: { gt: at } } });
      return count === 1;
    },

    async listApiKeys(organizationId, filter, page) {
      const after = page.after;
      const rows = await db.apiKey.findMany({
        where: {
          account: { memberships: { some: { organizationId } } },
          ...(filter.includeRevoked ? {} : { revokedAt: null }),
          ...(after === null ? {} : { OR: [{ createdAt: { gt: after.at } }, { createdAt: after.at, id: { gt: after.id } }] }),
        },
        select: {
          id: true,
          name: true,
          prefix: true,
          createdAt: true,
          lastUsedAt: true,
          revokedAt: true,
          account: { select: { memberships: { where: { organizationId }, select: { role: true } } } },
        },
        orderBy: [{ createdAt: "asc" }, { id: "asc" }],
        take: page.take,
      });
      return rows.map(({ account, ...key }) => ({ ...key, role: (account.memberships[0]?.role ?? "member") as Role }));
    },
    async isApiKeyOf(organizationId, apiKeyId) {
      const found = await db.apiKey.count({ where: { id: apiKeyId, account: { memberships: { some: { organizationId } } } } });
      return found === 1;
    },
    async listIdentityKeys(organizationId) {
      const rows = await db.organizationKey.findMany({
        where: { organizationId, revokedAt: null },
        select: { kind: true, prefix: true, createdAt: true, lastUsedAt: true },
        orderBy: [{ createdAt: "desc" }, { id: "asc" }],
      });
      return rows.map((row) => ({ ...row, kind: row.kind as OrganizationKeyKind }));
    },

    async searchIdentities(organizationId, fragment, page) {
      const pattern = `%${likeLiteral(fragment)}%`;
      const after = page.after === null ? empty : sql`AND "identifier" ${byteOrder} > ${page.after}`;
      // Raw: the same case-insensitive LIKE on SQLite and PostgreSQL (Prisma's
      // `mode: "insensitive"` exists only on PostgreSQL).
      const rows = await db.$queryRaw<{ id: string; identifier: string; createdAt: Date | string }[]>`
        SELECT "id", "identifier", "createdAt" FROM "Identity"
        WHERE "organizationId" = ${organizationId} AND LOWER("identifier") LIKE ${pattern} ESCAPE '\\' ${after}
        ORDER BY "identifier" ${byteOrder} ASC
        LIMIT ${page.take}`;
      return rows.map((row) => ({ ...row, createdAt: asDate(row.createdAt) }));
    },
    countLiveSessions: (organizationId, identityId, at) =>
      db.identitySession.count({ where: { organizationId, identityId, revokedAt: null, expiresAt: { gt: at } } }),
    listIdentitySessions: (organizationId, identityId, page) =>
      db.identitySession.findMany({
        where: {
          organizationId,
          identityId,
          ...(page.after === null
            ? {}
            : { OR: [{ createdAt: { lt: page.after.at } }, { createdAt: page.after.at, id: { gt: page.after.id } }] }),
        },
        select: { id: true, method: true, createdAt: true, expiresAt: true, revokedAt: true },
        orderBy: [{ createdAt: "desc" }, { id: "asc" }],
        take: page.take,
      }),

    async listSecretEnvironments(organizationId) {
      const rows = await db.secret.findMany({
        where: { organizationId },
        distinct: ["environment"],
        select: { environment: true },
        orderBy: { environment: "asc" },
      });
      return rows.map((row) => row.environment);
    },
    async listSecrets(organizationId, environment, page) {
      const after = page.after === null ? empty : sql`AND "name" ${byteOrder} > ${page.after}`;
      const rows = await db.$queryRaw<{ name: string; version: number | bigint; tags: string; updatedAt: Date | string }[]>`
        SELECT "name", "version", "tags", "updatedAt" FROM "Secret"
        WHERE "organizationId" = ${organizationId} AND "environment" = ${environment} ${after}
        ORDER BY "name" ${byteOrder} ASC
        LIMIT ${page.take}`;
      return rows.map((row) => ({
        name: row.name,
        environment,
        version: Number(row.version),
        tags: parseStringArray(row.tags),
        updatedAt: asDate(row.updatedAt),
      }));
    },
  };
}
