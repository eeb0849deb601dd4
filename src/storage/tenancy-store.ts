import type { Db, Tx } from "./database.js";
import { uniquely } from "./errors.js";

import type {
  Role,
  OrganizationKeyKind,
  ApiKeyPrincipalRecord,
  OrganizationKeyRecord,
  TenancyStore,
} from "../domain/tenancy/tenancy-store.js";
export type {
  Role,
  OrganizationKeyKind,
  ApiKeyRecord,
  ApiKeyWithAccount,
  ApiKeyPrincipalRecord,
  OrganizationKeyRecord,
  TenancyStore,
} from "../domain/tenancy/tenancy-store.js";

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
    async revokeLiveOrganizationKeys(organizationId, kind, at) {
      const live = await db.organizationKey.findMany({ where: { organizationId, kind, revokedAt: null }, select: { id: true } });
      const revoked: string[] = [];
      for (const { id } of live) {
        const { count } = await db.organizationKey.updateMany({ where: { id, revokedAt: null }, data: { revokedAt: at } });
        if (count === 1) revoked.push(id);
      }
      return revoked;
    },
    async organizationsOfApiKey(id) {
      const key = await db.apiKey.findUnique({
        where: { id },
        select: { account: { select: { memberships: { select: { organizationId: true } } } } },
      });
      return key ? key.account.memberships.map((m) => m.organizationId) : [];
    },
    async touchOrganizationKey(id, at) {
      await db.organizationKey.update({ where: { id }, data: { lastUsedAt: at } });
    },
    async createSetupToken(token) {
      await db.accountSetupToken.create({ data: token });
    },
    async personMembersOf(organizationId) {
      const rows = await db.membership.findMany({
        where: { organizationId, account: { kind: "person" } },
        select: { account: { select: { id: true, email: true, passwordHash: true, disabledAt: true } } },
        orderBy: { createdAt: "asc" },
      });
      return rows.map(({ account }) => ({
        accountId: account.id,
        email: account.email,
        hasPassword: account.passwordHash !== null,
        disabled: account.disabledAt !== null,
      }));
    },
    async voidSetupTokensOf(accountId, at) {
      await db.accountSetupToken.updateMany({ where: { accountId, usedAt: null }, data: { usedAt: at } });
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
