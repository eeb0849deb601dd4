import type { Db, Tx } from "./database.js";
import { uniquely } from "./errors.js";

export type Role = "admin" | "member";
export type OrganizationKeyKind = "publishable" | "secret";

export interface ApiKeyRecord {
  id: string;
  accountId: string;
  name: string;
  prefix: string;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

export interface ApiKeyWithAccount extends ApiKeyRecord {
  hash: string;
  account: { displayName: string; disabledAt: Date | null };
}

/** An API key as authentication sees it: its account and the account's role in one organisation. */
export interface ApiKeyPrincipalRecord {
  id: string;
  accountId: string;
  prefix: string;
  hash: string;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
  accountName: string;
  accountDisabledAt: Date | null;
  /** The role in the organisation asked about; null when the account is not a member. */
  role: Role | null;
}

export interface OrganizationKeyRecord {
  id: string;
  organizationId: string;
  kind: OrganizationKeyKind;
  prefix: string;
  hash: string;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

/** Organisations, accounts, memberships and keys. Every key is stored by its hash only. */
export interface TenancyStore {
  createOrganization(org: { id: string; name: string }): Promise<void>;
  findOrganization(id: string): Promise<{ id: string; name: string; createdAt: Date } | null>;
  listOrganizations(): Promise<{ id: string; name: string; createdAt: Date }[]>;
  createAccount(account: { id: string; email: string; displayName: string; kind: "person" | "service" }): Promise<void>;
  addMembership(membership: { organizationId: string; accountId: string; role: Role }): Promise<void>;
  findRole(organizationId: string, accountId: string): Promise<Role | null>;
  createApiKey(key: { id: string; accountId: string; name: string; prefix: string; hash: string }): Promise<void>;
  findApiKeyByHash(hash: string): Promise<ApiKeyWithAccount | null>;
  /** One query for authentication: the key, its account, and the account's role in the organisation. */
  findApiKeyPrincipal(hash: string, organizationId: string): Promise<ApiKeyPrincipalRecord | null>;
  /** API keys whose account is a member of the organisation, with that role. */
  listApiKeys(organizationId: string): Promise<(ApiKeyRecord & { role: Role; accountName: string })[]>;
  revokeApiKey(id: string, at: Date): Promise<boolean>;
  touchApiKey(id: string, at: Date): Promise<void>;
  createOrganizationKey(key: {
    id: string;
    organizationId: string;
    kind: OrganizationKeyKind;
    prefix: string;
    hash: string;
  }): Promise<void>;
  findOrganizationKeyByHash(hash: string): Promise<OrganizationKeyRecord | null>;
  revokeOrganizationKeys(organizationId: string, kind: OrganizationKeyKind, at: Date): Promise<number>;
  touchOrganizationKey(id: string, at: Date): Promise<void>;
  createSetupToken(token: { id: string; accountId: string; hash: string; expiresAt: Date }): Promise<void>;
  /** Marks the installation initialised; already_exists (already_initialized) when it was. */
  markInitialized(at: Date): Promise<void>;
  isInitialized(): Promise<boolean>;
}

export function createTenancyStore(db: Db | Tx): TenancyStore {
  return {
    async createOrganization(org) {
      await db.organization.create({ data: org });
    },
    findOrganization: (id) => db.organization.findUnique({ where: { id }, select: { id: true, name: true, createdAt: true } }),
    listOrganizations: () => db.organization.findMany({ select: { id: true, name: true, createdAt: true }, orderBy: { createdAt: "asc" } }),
    async createAccount(account) {
      await db.account.create({ data: account });
    },
    async addMembership(membership) {
      await db.membership.create({ data: membership });
    },
    async findRole(organizationId, accountId) {
      const row = await db.membership.findUnique({
        where: { organizationId_accountId: { organizationId, accountId } },
        select: { role: true },
      });
      return row ? (row.role as Role) : null;
    },
    async createApiKey(key) {
      await db.apiKey.create({ data: key });
    },
    findApiKeyByHash: (hash) =>
      db.apiKey.findUnique({
        where: { hash },
        include: { account: { select: { displayName: true, disabledAt: true } } },
      }),
    async findApiKeyPrincipal(hash, organizationId) {
      // Plain SQL: it runs on every API-key request, and one joined statement costs
      // a fraction of the three typed Prisma queries it replaces.
      const rows = await db.$queryRaw<(Omit<ApiKeyPrincipalRecord, "role"> & { role: string | null })[]>`
        SELECT k."id", k."accountId", k."prefix", k."hash", k."lastUsedAt", k."revokedAt",
               a."displayName" AS "accountName", a."disabledAt" AS "accountDisabledAt", m."role"
        FROM "ApiKey" k
        JOIN "Account" a ON a."id" = k."accountId"
        LEFT JOIN "Membership" m ON m."accountId" = k."accountId" AND m."organizationId" = ${organizationId}
        WHERE k."hash" = ${hash}`;
      const row = rows[0];
      return row ? { ...row, role: row.role as Role | null } : null;
    },
    async listApiKeys(organizationId) {
      const rows = await db.apiKey.findMany({
        where: { account: { memberships: { some: { organizationId } } } },
        include: {
          account: { select: { displayName: true, memberships: { where: { organizationId }, select: { role: true } } } },
        },
        orderBy: [{ createdAt: "asc" }, { id: "asc" }],
      });
      return rows.map(({ account, hash: _hash, ...key }) => ({
        ...key,
        accountName: account.displayName,
        role: (account.memberships[0]?.role ?? "member") as Role,
      }));
    },
    async revokeApiKey(id, at) {
      const { count } = await db.apiKey.updateMany({ where: { id, revokedAt: null }, data: { revokedAt: at } });
      return count === 1;
    },
    async touchApiKey(id, at) {
      await db.apiKey.update({ where: { id }, data: { lastUsedAt: at } });
    },
    async createOrganizationKey(key) {
      await db.organizationKey.create({ data: key });
    },
    async findOrganizationKeyByHash(hash) {
      const rows = await db.$queryRaw<(Omit<OrganizationKeyRecord, "kind"> & { kind: string })[]>`
        SELECT "id", "organizationId", "kind", "prefix", "hash", "createdAt", "lastUsedAt", "revokedAt"
        FROM "OrganizationKey" WHERE "hash" = ${hash}`;
      const row = rows[0];
      return row ? { ...row, kind: row.kind as OrganizationKeyKind } : null;
    },
    async revokeOrganizationKeys(organizationId, kind, at) {
      const { count } = await db.organizationKey.updateMany({
        where: { organizationId, kind, revokedAt: null },
        data: { revokedAt: at },
      });
      return count;
    },
    async touchOrganizationKey(id, at) {
      await db.organizationKey.update({ where: { id }, data: { lastUsedAt: at } });
    },
    async createSetupToken(token) {
      await db.accountSetupToken.create({ data: token });
    },
    async markInitialized(at) {
      await uniquely(
        () => db.systemState.create({ data: { key: "initialized", value: at.toISOString(), updatedAt: at } }),
        "already_initialized",
        "the data store is already initialised",
      );
    },
    async isInitialized() {
      return (await db.systemState.findUnique({ where: { key: "initialized" } })) !== null;
    },
  };
}
