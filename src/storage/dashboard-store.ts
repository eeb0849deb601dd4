import type { Db, Tx } from "./database.js";
import { uniquely } from "./errors.js";
import type { OrganizationKeyKind, Role } from "./tenancy-store.js";

/** A person's platform account, as sign-in and the session check need it. */
export interface OperatorAccountRecord {
  id: string;
  email: string;
  displayName: string;
  kind: "person" | "service";
  passwordHash: string | null;
  disabledAt: Date | null;
}

export interface SetupTokenRecord {
  id: string;
  accountId: string;
  expiresAt: Date;
  usedAt: Date | null;
}

export interface OperatorSessionRecord {
  id: string;
  accountId: string;
  createdAt: Date;
  lastSeenAt: Date;
  expiresAt: Date;
  revokedAt: Date | null;
}

export interface MemberRecord {
  accountId: string;
  email: string;
  displayName: string;
  role: Role;
  /** The account has no password yet: its setup link is unused. */
  pending: boolean;
  createdAt: Date;
}

export interface IdentityKeyRecord {
  kind: OrganizationKeyKind;
  prefix: string;
  createdAt: Date;
  lastUsedAt: Date | null;
}

export interface IdentitySessionSummaryRecord {
  id: string;
  method: string;
  createdAt: Date;
  expiresAt: Date;
  revokedAt: Date | null;
}

/**
 * What the dashboard reads and writes beyond the other areas' stores: operator
 * accounts, their setup links and dashboard sessions, members, and a few
 * listings (identities, identity sessions, secret environments). Every tenant
 * query filters on organizationId.
 */
export interface DashboardStore {
  findAccount(id: string): Promise<OperatorAccountRecord | null>;
  findAccountByEmail(email: string): Promise<OperatorAccountRecord | null>;
  /** Sets a person's e-mail, name and password hash; already_exists (email_taken) when another account has the e-mail. */
  setUpAccount(accountId: string, change: { email: string; displayName: string; passwordHash: string }): Promise<void>;
  setPasswordHash(accountId: string, passwordHash: string): Promise<void>;
  disableAccount(accountId: string, at: Date): Promise<void>;
  /** Enables an account again without its old password: it must be set up through a new link. */
  reopenAccount(accountId: string): Promise<void>;

  findSetupToken(hash: string): Promise<SetupTokenRecord | null>;
  /**
   * Spends a setup token with ONE conditional update (unused and unexpired at
   * `at`): of concurrent calls exactly one sees true.
   */
  spendSetupToken(hash: string, at: Date): Promise<boolean>;
  /** Marks every unused setup token of an account used (a new link replaces them). */
  voidSetupTokensOf(accountId: string, at: Date): Promise<void>;

  createSession(session: Omit<OperatorSessionRecord, "revokedAt"> & { hash: string }): Promise<void>;
  findSessionByHash(hash: string): Promise<OperatorSessionRecord | null>;
  findSession(id: string): Promise<OperatorSessionRecord | null>;
  touchSession(id: string, at: Date): Promise<void>;
  revokeSession(id: string, at: Date): Promise<void>;
  revokeSessionsOf(accountId: string, at: Date): Promise<void>;

  /** Organisations the account is a member of, by name. */
  listOrganizationsOf(accountId: string): Promise<{ organizationId: string; name: string; role: Role }[]>;
  /** Takes the organisation's row lock for the rest of the transaction; false when it does not exist. */
  lockOrganization(organizationId: string): Promise<boolean>;
  /** People (not service accounts) who are members, by e-mail. */
  listMembers(organizationId: string, page: { skip: number; take: number }): Promise<MemberRecord[]>;
  findMember(organizationId: string, accountId: string): Promise<MemberRecord | null>;
  /** People with the admin role whose account is enabled. */
  countAdmins(organizationId: string): Promise<number>;
  setRole(organizationId: string, accountId: string, role: Role): Promise<void>;
  removeMembership(organizationId: string, accountId: string): Promise<void>;
  countMembershipsOf(accountId: string): Promise<number>;

  /** Whether an API key belongs to an account that is a member of the organisation. */
  isApiKeyOf(organizationId: string, apiKeyId: string): Promise<boolean>;
  /** The organisation's current (unrevoked) publishable and secret keys. */
  listIdentityKeys(organizationId: string): Promise<IdentityKeyRecord[]>;

  /** Identities whose lower-cased identifier contains `fragment` (already lower-cased), by identifier. */
  searchIdentities(
    organizationId: string,
    fragment: string,
    page: { skip: number; take: number },
  ): Promise<{ id: string; identifier: string; createdAt: Date }[]>;
  countLiveSessions(organizationId: string, identityId: string, at: Date): Promise<number>;
  listIdentitySessions(
    organizationId: string,
    identityId: string,
    page: { skip: number; take: number },
  ): Promise<IdentitySessionSummaryRecord[]>;

  /** Environments holding at least one secret, sorted. */
  listSecretEnvironments(organizationId: string): Promise<string[]>;
}

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

const memberSelect = {
  role: true,
  createdAt: true,
  account: { select: { id: true, email: true, displayName: true, passwordHash: true } },
} as const;

/** `%`, `_` and the escape character itself match literally in LIKE ... ESCAPE '\'. */
function likeLiteral(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

export function createDashboardStore(db: Db | Tx): DashboardStore {
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
    async reopenAccount(accountId) {
      await db.account.update({ where: { id: accountId }, data: { disabledAt: null, passwordHash: null } });
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
    async revokeSessionsOf(accountId, at) {
      await db.dashboardSession.updateMany({ where: { accountId, revokedAt: null }, data: { revokedAt: at } });
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
        where: { organizationId, account: { kind: "person", disabledAt: null } },
        select: memberSelect,
        orderBy: [{ account: { email: "asc" } }],
        skip: page.skip,
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

    searchIdentities(organizationId, fragment, page) {
      const pattern = `%${likeLiteral(fragment)}%`;
      // Raw: the same case-insensitive LIKE on SQLite and PostgreSQL (Prisma's
      // `mode: "insensitive"` exists only on PostgreSQL).
      return db.$queryRaw<{ id: string; identifier: string; createdAt: Date }[]>`
        SELECT "id", "identifier", "createdAt" FROM "Identity"
        WHERE "organizationId" = ${organizationId} AND LOWER("identifier") LIKE ${pattern} ESCAPE '\\'
        ORDER BY "identifier" ASC, "id" ASC
        LIMIT ${page.take} OFFSET ${page.skip}`;
    },
    countLiveSessions: (organizationId, identityId, at) =>
      db.identitySession.count({ where: { organizationId, identityId, revokedAt: null, expiresAt: { gt: at } } }),
    listIdentitySessions: (organizationId, identityId, page) =>
      db.identitySession.findMany({
        where: { organizationId, identityId },
        select: { id: true, method: true, createdAt: true, expiresAt: true, revokedAt: true },
        orderBy: [{ createdAt: "desc" }, { id: "asc" }],
        skip: page.skip,
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
  };
}
