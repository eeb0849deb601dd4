// The identity area's store (a port): what the identity domain reads and writes; src/storage implements it.
/** The stored identity settings of one organisation (absent row: every default). */
export interface IdentitySettingsRecord {
  passkeys: boolean;
  magicLinks: boolean;
  password: boolean;
  /** Null: the host of PUBLIC_URL. */
  rpId: string | null;
  /** Null: the origin of PUBLIC_URL. */
  origins: string[] | null;
  sessionTtlSeconds: number;
  magicLinkTtlSeconds: number;
  lockoutThreshold: number;
  lockoutWindowSeconds: number;
  ipLimitPerMinute: number;
  magicLinkLimitPerHour: number;
  updatedAt: Date;
}

export type IdentitySettingsPatch = Partial<Omit<IdentitySettingsRecord, "updatedAt">>;

export interface IdentityRecord {
  id: string;
  organizationId: string;
  identifier: string;
  createdAt: Date;
}

/**
 * Which failed logins to look at: of one identifier since a time, the newest
 * `threshold` from one client and the newest `identifierLimit` from any.
 */
export interface FailureQuery {
  identifierHash: string;
  /** Hash of the client address's bucket (clientBucketOf). */
  clientHash: string;
  since: Date;
  threshold: number;
  identifierLimit: number;
}

/** Failures since the query's `since`, newest first: from the query's client, and from any client. */
export interface RecentFailures {
  pair: Date[];
  identifier: Date[];
}

export interface LoginContext {
  settings: IdentitySettingsRecord | null;
  identityId: string | null;
  hash: string | null;
  failures: RecentFailures;
}

export type SessionMethod = "password" | "passkey" | "magic_link";

export interface SessionRecord {
  id: string;
  organizationId: string;
  identityId: string;
  method: SessionMethod;
  createdAt: Date;
  expiresAt: Date;
  revokedAt: Date | null;
}

export type OneTimeTokenKind = "magic_link" | "password_reset";

export interface OneTimeTokenRecord {
  id: string;
  organizationId: string;
  identityId: string;
  kind: OneTimeTokenKind;
  createdAt: Date;
  expiresAt: Date;
  spentAt: Date | null;
}

/** A legacy session signing key, shared by every organisation (read only: see SessionSigningKeyRecord). */
export interface SigningKeyRecord {
  /** The JWT `kid`. */
  id: string;
  /** PKCS#8 DER of the private key, sealed by the master key. */
  privateKeyEnc: Buffer;
  /** The public key as a JWK (JSON text). */
  publicJwk: string;
  createdAt: Date;
  retiredAt: Date | null;
}

/** An organisation's session signing key, without its private half. */
export interface SessionSigningKeyInfo {
  /** The JWT `kid`. */
  id: string;
  organizationId: string;
  /** The public key as a JWK (JSON text). */
  publicJwk: string;
  createdAt: Date;
  /** Null while it signs the organisation's new sessions. */
  retiredAt: Date | null;
  /** When a retired key leaves the JWKS: the last token it signed has expired by then. */
  publishedUntil: Date | null;
}

export interface SessionSigningKeyRecord extends SessionSigningKeyInfo {
  /** PKCS#8 DER of the private key, sealed by the master key. */
  privateKeyEnc: Buffer;
  /** The master key that sealed it; null: sealed before master key ids were recorded. */
  masterKeyId: string | null;
}

/**
 * Identity storage: settings, identities, password hashes, sessions, one-time
 * tokens, session signing keys and the counters of brute-force protection.
 * Every tenant query filters on organizationId.
 */
export interface IdentityStore {
  findSettings(organizationId: string): Promise<IdentitySettingsRecord | null>;
  /** Creates or changes the settings row; fields absent from the patch keep their value. */
  saveSettings(organizationId: string, patch: IdentitySettingsPatch, at: Date): Promise<IdentitySettingsRecord>;

  findIdentityByIdentifier(organizationId: string, identifier: string): Promise<IdentityRecord | null>;
  findIdentity(organizationId: string, id: string): Promise<IdentityRecord | null>;
  /** already_exists (identity_exists) when the identifier is taken, also under concurrency. */
  createIdentity(identity: IdentityRecord): Promise<void>;

  findPasswordHash(organizationId: string, identityId: string): Promise<string | null>;
  /**
   * What a password login needs, in one query: the organisation's settings
   * (null: none stored), the identity of the identifier and its password hash
   * (null when absent), and its recent failed logins as `failures` asks.
   */
  findLoginContext(organizationId: string, identifier: string, failures: FailureQuery): Promise<LoginContext>;
  savePasswordHash(organizationId: string, identityId: string, hash: string, at: Date): Promise<void>;

  createSession(session: Omit<SessionRecord, "revokedAt">): Promise<void>;
  findSession(organizationId: string, id: string): Promise<SessionRecord | null>;
  /** Marks one session revoked; false when there is no such session. */
  revokeSession(organizationId: string, id: string, at: Date): Promise<boolean>;
  /** Revokes every live session of an identity except one; returns how many. */
  revokeSessionsOf(organizationId: string, identityId: string, except: string | null, at: Date): Promise<number>;
  /** As revokeSessionsOf, answering the ids of the sessions this call revoked. */
  revokeLiveSessionsOf(organizationId: string, identityId: string, except: string | null, at: Date): Promise<string[]>;
  /** Deletes an identity with its password, passkeys and one-time tokens (its sessions stay, revoked, until they expire); false when none. */
  deleteIdentity(organizationId: string, identityId: string): Promise<boolean>;

  createOneTimeToken(token: Omit<OneTimeTokenRecord, "spentAt"> & { hash: string }): Promise<void>;
  findOneTimeToken(hash: string): Promise<OneTimeTokenRecord | null>;
  /**
   * Spends a token with ONE conditional update (unspent and unexpired at `at`):
   * of any number of concurrent calls, on any number of instances, exactly one
   * sees true.
   */
  spendOneTimeToken(organizationId: string, hash: string, kind: OneTimeTokenKind, at: Date): Promise<boolean>;
  /** Spends every open token of one kind of an identity (a completed reset voids older links). */
  spendOneTimeTokensOf(organizationId: string, identityId: string, kind: OneTimeTokenKind, at: Date): Promise<number>;

  /** Legacy shared keys not retired, or retired at or after `retiredSince`, newest first. */
  listSigningKeys(retiredSince: Date): Promise<SigningKeyRecord[]>;
  findSigningKey(id: string): Promise<SigningKeyRecord | null>;
  /** Retires every active legacy key (they sign nothing any more). */
  retireSigningKeys(at: Date): Promise<void>;

  /** The organisation's live key (not retired; the newest if a race left two), or null. */
  findLiveSessionSigningKey(organizationId: string): Promise<SessionSigningKeyRecord | null>;
  /** A key of any organisation by kid (verifiers learn the organisation from it). */
  findSessionSigningKey(id: string): Promise<SessionSigningKeyInfo | null>;
  /** Keys that are live or published after `at`; of one organisation, or of all. Newest first. */
  listPublishedSessionSigningKeys(at: Date, organizationId?: string): Promise<SessionSigningKeyInfo[]>;
  createSessionSigningKey(key: Omit<SessionSigningKeyRecord, "retiredAt" | "publishedUntil">): Promise<void>;
  /**
   * Retires the organisation's live keys other than `keepId`, published until
   * `publishedUntil`; returns the keys retired. Only keys this transaction
   * sees are retired, so two concurrent rotations never leave none live.
   */
  retireSessionSigningKeys(
    organizationId: string,
    keepId: string,
    at: Date,
    publishedUntil: Date,
  ): Promise<{ id: string; createdAt: Date }[]>;
  /** The latest expiry of any session of the organisation (null: none). */
  latestSessionExpiry(organizationId: string): Promise<Date | null>;

  /**
   * Records one failed password login; identifierHash hides what was typed,
   * clientHash the address. `organizationId` is the organisation of an
   * end user's identifier, or `dashboard` for an operator's e-mail address.
   */
  recordLoginFailure(failure: {
    id: string;
    organizationId: string;
    identifierHash: string;
    clientHash: string;
    createdAt: Date;
  }): Promise<void>;
  /** The failures a login looks at (see FailureQuery). */
  recentLoginFailures(organizationId: string, failures: FailureQuery): Promise<RecentFailures>;
  clearLoginFailures(organizationId: string, identifierHash: string): Promise<void>;

  /** Adds one hit to a fixed-window counter and returns the window's count (atomic across instances). */
  hitRateCounter(key: string, windowStart: Date): Promise<number>;
  /** Drops counters and failures too old to matter. */
  prune(countersBefore: Date, failuresBefore: Date): Promise<void>;
}
