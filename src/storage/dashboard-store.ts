import { empty, sqltag as sql } from "@prisma/client/runtime/client";
import type { Database, Db, Tx } from "./database.js";
import { uniquely } from "./errors.js";
import { parseStringArray, passkeyRowData } from "./passkey-store.js";
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
  /** The account has no password: an owner's setup link is unused, or a recovery sign-in removed it and none is set yet. */
  pending: boolean;
  createdAt: Date;
}

/** A pending invitation of an organisation (the token's hash is never read back). */
export interface InvitationRecord {
  id: string;
  organizationId: string;
  email: string;
  displayName: string;
  role: Role;
  /** The account of the admin who made the current link (invited or re-issued); null for invitations made by a migration. */
  invitedById: string | null;
  /** "Name <e-mail>" of that admin; empty when unknown. */
  invitedBy: string;
  createdAt: Date;
  expiresAt: Date;
}

export interface IdentityKeyRecord {
  kind: OrganizationKeyKind;
  prefix: string;
  createdAt: Date;
  lastUsedAt: Date | null;
}

/** A passkey an operator signs in to the dashboard with. */
export interface OperatorPasskeyRecord {
  id: string;
  accountId: string;
  /** WebAuthn credential id, base64url. */
  credentialId: string;
  /** COSE public key. */
  publicKey: Uint8Array;
  counter: number;
  transports: string[];
  deviceType: string;
  backedUp: boolean;
  name: string;
  createdAt: Date;
  lastUsedAt: Date | null;
}

export type OperatorChallengeKind = "sign_in" | "add_passkey";

/** A WebAuthn challenge of an operator's passkey ceremony. */
export interface OperatorChallengeRecord {
  id: string;
  kind: OperatorChallengeKind;
  challenge: string;
  accountId: string | null;
  emailGiven: boolean;
  createdAt: Date;
  expiresAt: Date;
  usedAt: Date | null;
}

/** The page after `after` (null: the first), `take` rows at most. */
export interface KeysetPage<C> {
  after: C | null;
  take: number;
}

/** Position in a list sorted by time, then id. */
export interface TimeAndId {
  at: Date;
  id: string;
}

export interface ApiKeyListRecord {
  id: string;
  name: string;
  prefix: string;
  role: Role;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

export interface SecretMetadataRecord {
  name: string;
  environment: string;
  version: number;
  tags: string[];
  updatedAt: Date;
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
 * accounts, their setup links and dashboard sessions, members, invitations, and a few
 * listings (identities, identity sessions, secret environments). Every tenant
 * query filters on organizationId.
 */
export interface DashboardStore {
  findAccount(id: string): Promise<OperatorAccountRecord | null>;
  findAccountByEmail(email: string): Promise<OperatorAccountRecord | null>;
  /** Sets a person's e-mail, name and password hash; already_exists (email_taken) when another account has the e-mail. */
  setUpAccount(accountId: string, change: { email: string; displayName: string; passwordHash: string }): Promise<void>;
  /** Sets (or, with null, removes) an account's password hash. */
  setPasswordHash(accountId: string, passwordHash: string | null): Promise<void>;
  disableAccount(accountId: string, at: Date): Promise<void>;
  /** Creates a person's account, set up; already_exists (email_taken) when an account has the e-mail. */
  createPersonAccount(account: { id: string; email: string; displayName: string; passwordHash: string }): Promise<void>;
  /**
   * Enables a disabled account again with a new name and password and without
   * its old passkeys, with ONE conditional update (still disabled): of
   * concurrent calls exactly one sees true.
   */
  reopenAccount(accountId: string, change: { displayName: string; passwordHash: string }): Promise<boolean>;
  /**
   * Takes the account's row lock for the rest of the transaction (a no-op
   * write), so that concurrent additions of passkeys run one after the other.
   */
  lockAccount(accountId: string): Promise<boolean>;

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
  /** Revokes every live session of an account, but `except` (a session id) when given. */
  revokeSessionsOf(accountId: string, at: Date, except?: string): Promise<void>;
  /**
   * Deletes the sessions that have ended by `at` (absolute expiry passed, or
   * idle since before `idleBefore`) and the passkey challenges that have
   * expired. Signed-out sessions go once idle. Returns how many of each.
   */
  purgeExpired(at: Date, idleBefore: Date): Promise<{ sessions: number; challenges: number }>;

  listOperatorPasskeys(accountId: string): Promise<OperatorPasskeyRecord[]>;
  countOperatorPasskeys(accountId: string): Promise<number>;
  findOperatorPasskeyByCredentialId(credentialId: string): Promise<OperatorPasskeyRecord | null>;
  /** already_exists (passkey_exists) when the credential id is registered to any account. */
  createOperatorPasskey(passkey: OperatorPasskeyRecord): Promise<void>;
  /**
   * Records a sign-in with ONE conditional update enforcing the counter rule
   * (WebAuthn 6.1.1): the new counter must exceed the stored one unless both are 0.
   */
  recordOperatorPasskeyUse(id: string, use: { counter: number; backedUp: boolean; deviceType: string; at: Date }): Promise<boolean>;
  removeOperatorPasskey(accountId: string, id: string): Promise<boolean>;
  removeOperatorPasskeysOf(accountId: string): Promise<void>;
  /** Deletes the account's add-passkey ceremonies, answered or not (its sign-in ones name no session). */
  removeAddPasskeyChallengesOf(accountId: string): Promise<void>;

  createChallenge(challenge: Omit<OperatorChallengeRecord, "usedAt">): Promise<void>;
  findChallenge(id: string): Promise<OperatorChallengeRecord | null>;
  /**
   * Spends a challenge with ONE conditional update (this kind, this account
   * when given, unused, unexpired at `at`) and returns it; null when the update
   * matched nothing. Of concurrent calls, on any instance, exactly one gets it.
   */
  spendChallenge(id: string, kind: OperatorChallengeKind, accountId: string | null, at: Date): Promise<OperatorChallengeRecord | null>;

  /** Organisations the account is a member of, by name. */
  listOrganizationsOf(accountId: string): Promise<{ organizationId: string; name: string; role: Role }[]>;
  /** Takes the organisation's row lock for the rest of the transaction; false when it does not exist. */
  lockOrganization(organizationId: string): Promise<boolean>;
  /** People (not service accounts) who are members, by e-mail (unique), after the e-mail of `page.after`. */
  listMembers(organizationId: string, page: KeysetPage<string>): Promise<MemberRecord[]>;
  findMember(organizationId: string, accountId: string): Promise<MemberRecord | null>;
  /** People with the admin role whose account is enabled. */
  countAdmins(organizationId: string): Promise<number>;
  setRole(organizationId: string, accountId: string, role: Role): Promise<void>;
  removeMembership(organizationId: string, accountId: string): Promise<void>;
  countMembershipsOf(accountId: string): Promise<number>;
  /** Whether the person with this e-mail address is a member of the organisation (one query, whether or not an account has the address). */
  isMemberByEmail(organizationId: string, email: string): Promise<boolean>;

  /** already_exists (invitation_exists) when the organisation has an invitation for the e-mail. */
  createInvitation(invitation: Omit<InvitationRecord, "invitedBy"> & { tokenHash: string }): Promise<void>;
  /** The organisation's pending invitations by e-mail (unique per organisation), after the e-mail of `page.after`. */
  listInvitations(organizationId: string, page: KeysetPage<string>): Promise<InvitationRecord[]>;
  findInvitation(organizationId: string, id: string): Promise<InvitationRecord | null>;
  /** The invitation of a token's hash, with its organisation's name. */
  findInvitationByToken(tokenHash: string): Promise<(InvitationRecord & { organizationName: string }) | null>;
  /**
   * Gives an invitation of the organisation a new token and expiry, made by
   * `invitedById` (who now holds its link); false when it has no such invitation.
   */
  replaceInvitationToken(
    organizationId: string,
    id: string,
    token: { tokenHash: string; expiresAt: Date; invitedById: string },
  ): Promise<boolean>;
  /** Deletes an invitation of the organisation; false when it has no such invitation. */
  deleteInvitation(organizationId: string, id: string): Promise<boolean>;
  /** Deletes the organisation's invitations whose current link the account made; answers how many. */
  deleteInvitationsBy(organizationId: string, invitedById: string): Promise<number>;
  /**
   * Spends an invitation with ONE conditional delete (this id, still this
   * token, unexpired at `at`): of concurrent calls, on any instance, exactly one sees true.
   */
  spendInvitation(id: string, tokenHash: string, at: Date): Promise<boolean>;

  /**
   * The organisation's API keys (keys of accounts that are members), oldest
   * first (creation time, then id), with their role there.
   */
  listApiKeys(organizationId: string, filter: { includeRevoked: boolean }, page: KeysetPage<TimeAndId>): Promise<ApiKeyListRecord[]>;
  /** Whether an API key belongs to an account that is a member of the organisation. */
  isApiKeyOf(organizationId: string, apiKeyId: string): Promise<boolean>;
  /** The organisation's current (unrevoked) publishable and secret keys. */
  listIdentityKeys(organizationId: string): Promise<IdentityKeyRecord[]>;

  /** Identities whose lower-cased identifier contains `fragment` (already lower-cased), by identifier (unique in the organisation). */
  searchIdentities(
    organizationId: string,
    fragment: string,
    page: KeysetPage<string>,
  ): Promise<{ id: string; identifier: string; createdAt: Date }[]>;
  countLiveSessions(organizationId: string, identityId: string, at: Date): Promise<number>;
  /** An identity's sessions, newest first (creation time descending, then id). */
  listIdentitySessions(organizationId: string, identityId: string, page: KeysetPage<TimeAndId>): Promise<IdentitySessionSummaryRecord[]>;

  /** Environments holding at least one secret, sorted. */
  listSecretEnvironments(organizationId: string): Promise<string[]>;
  /** Metadata (never values) of an environment's secrets, by name in byte order, after the name `page.after`. */
  listSecrets(organizationId: string, environment: string, page: KeysetPage<string>): Promise<SecretMetadataRecord[]>;
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
