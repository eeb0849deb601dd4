// The tenancy area's store (a port); src/storage implements it.
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
  /** As revokeOrganizationKeys, answering the ids of the keys this call revoked. */
  revokeLiveOrganizationKeys(organizationId: string, kind: OrganizationKeyKind, at: Date): Promise<string[]>;
  /** The organisations the API key's account is a member of (a service account: one). */
  organizationsOfApiKey(id: string): Promise<string[]>;
  touchOrganizationKey(id: string, at: Date): Promise<void>;
  createSetupToken(token: { id: string; accountId: string; hash: string; expiresAt: Date }): Promise<void>;
  /** The person accounts that are members of the organisation (operators, and an owner placeholder not yet set up). */
  personMembersOf(organizationId: string): Promise<{ accountId: string; email: string; hasPassword: boolean; disabled: boolean }[]>;
  /** Marks every unused setup link of the account used, so none of them works any more. */
  voidSetupTokensOf(accountId: string, at: Date): Promise<void>;
  /** Marks the installation initialised; already_exists (already_initialized) when it was. */
  markInitialized(at: Date): Promise<void>;
  isInitialized(): Promise<boolean>;
}
