// The passkey area's store (a port); src/storage implements it.
export type CeremonyKind = "register" | "login" | "add_passkey";

/** A WebAuthn ceremony in progress: its challenge lives here, never in the client. */
export interface CeremonyRecord {
  id: string;
  organizationId: string;
  kind: CeremonyKind;
  /** base64url challenge sent in the options. */
  challenge: string;
  /** register: the id the new identity will get; add_passkey: the identity; login: the identity of the identifier, if any. */
  identityId: string | null;
  /** register and login by identifier: the normalised identifier. */
  identifier: string | null;
  displayName: string | null;
  createdAt: Date;
  expiresAt: Date;
  usedAt: Date | null;
}

export interface PasskeyRecord {
  /** Credential id, base64url. */
  id: string;
  organizationId: string;
  identityId: string;
  /** COSE public key. */
  publicKey: Uint8Array;
  /** Signature counter last seen (0 when the authenticator keeps none). */
  counter: number;
  transports: string[];
  /** "singleDevice" or "multiDevice" (backup eligible). */
  deviceType: string;
  backedUp: boolean;
  aaguid: string;
  name: string | null;
  createdAt: Date;
  lastUsedAt: Date | null;
}

/** A passkey as an allowCredentials / excludeCredentials entry. */
export interface PasskeyDescriptor {
  id: string;
  transports: string[];
}

/**
 * Passkeys and WebAuthn ceremonies. Every query filters on organizationId;
 * a store made from a transaction client joins that transaction.
 */
export interface PasskeyStore {
  createCeremony(ceremony: Omit<CeremonyRecord, "usedAt">): Promise<void>;
  findCeremony(organizationId: string, id: string): Promise<CeremonyRecord | null>;
  /**
   * Spends a ceremony with ONE conditional update (right organisation and kind,
   * unused, unexpired at `at`) and returns it; null when the update matched
   * nothing. Of any number of concurrent calls, on any number of instances,
   * exactly one gets the ceremony.
   */
  spendCeremony(organizationId: string, id: string, kind: CeremonyKind, at: Date): Promise<CeremonyRecord | null>;
  /** Deletes ceremonies that expired before `before`. */
  pruneCeremonies(before: Date): Promise<void>;

  /** The identity of an identifier and its passkeys, in one query (identityId null when unknown). */
  findLoginCandidates(organizationId: string, identifier: string): Promise<{ identityId: string | null; passkeys: PasskeyDescriptor[] }>;
  listPasskeys(organizationId: string, identityId: string): Promise<PasskeyRecord[]>;
  countPasskeys(organizationId: string, identityId: string): Promise<number>;
  findPasskey(organizationId: string, id: string): Promise<PasskeyRecord | null>;
  /** already_exists (passkey_exists) when the credential id is registered anywhere. */
  createPasskey(passkey: PasskeyRecord): Promise<void>;
  /**
   * Records a sign-in with ONE conditional update that also enforces the
   * counter rule (WebAuthn 6.1.1): the new counter must exceed the stored one,
   * unless both are 0. False when the update matched nothing.
   */
  recordPasskeyUse(
    organizationId: string,
    id: string,
    use: { counter: number; backedUp: boolean; deviceType: string; at: Date },
  ): Promise<boolean>;
  removePasskey(organizationId: string, identityId: string, id: string): Promise<boolean>;

  /**
   * Locks an identity's row for the rest of the transaction (a no-op write:
   * a row lock on PostgreSQL, the write lock on SQLite) so that concurrent
   * additions of passkeys to one identity run one after the other. False when
   * the identity does not exist.
   */
  lockIdentity(organizationId: string, identityId: string): Promise<boolean>;

  /**
   * An installation-wide value under `key`; the first caller's `initial` wins,
   * also under concurrency. A value wrapped by the master key comes with the
   * id of the key that wrapped it (null: a plain value, or one wrapped before
   * master key ids were recorded).
   */
  findOrCreateSystemValue(key: string, initial: () => SystemValue): Promise<SystemValue>;
}

/** A value of SystemState, and the master key that wrapped it when it is wrapped. */
export interface SystemValue {
  value: string;
  masterKeyId: string | null;
}
