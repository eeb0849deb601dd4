import type { OrganizationKeyKind, Role } from "../../domain/tenancy/tenancy-store.js";
// The dashboard's store (a port of its operator logic); src/storage implements it.
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
