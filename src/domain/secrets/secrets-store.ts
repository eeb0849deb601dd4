// The secrets area's store (a port); src/storage implements it.
/** An organisation's current sealing key pair and its data key, both stored only wrapped by the master key. */
export interface SecretKeyringRecord {
  organizationId: string;
  publicKeyPem: string;
  keyId: string;
  privateKeyEnc: Buffer;
  dataKeyEnc: Buffer;
  /** The master key that wrapped both; null: wrapped before master key ids were recorded. */
  masterKeyId: string | null;
  /** When the current key pair was made (the keyring's creation, or the rotation that made it). */
  keyCreatedAt: Date;
}

/** A sealing key a rotation replaced, still wrapped by the master key. */
export interface PreviousSealingKeyRecord {
  organizationId: string;
  keyId: string;
  publicKeyPem: string;
  privateKeyEnc: Buffer;
  /** The master key that wrapped it; null: wrapped before master key ids were recorded. */
  masterKeyId: string | null;
  createdAt: Date;
  retiredAt: Date;
}

/** What a rotation writes: the new key pair, and the data key wrapped again with it. */
export interface SealingKeyRotation {
  organizationId: string;
  /** The key the rotation replaces: the update happens only while it is still the current one. */
  replacedKeyId: string;
  publicKeyPem: string;
  keyId: string;
  privateKeyEnc: Buffer;
  dataKeyEnc: Buffer;
  /** The master key that wrapped both (the current one). */
  masterKeyId: string;
  rotatedAt: Date;
}

/** A secret's current metadata (its value lives in the version row of `version`). */
export interface SecretRecord {
  id: string;
  organizationId: string;
  environment: string;
  name: string;
  version: number;
  tags: string[];
  updatedAt: Date;
}

export interface SecretVersionRecord {
  version: number;
  tags: string[];
  actor: string;
  createdAt: Date;
}

export type SecretAuditAction = "write" | "delete" | "retrieve";

export interface SecretAuditRecord {
  id: string;
  organizationId: string;
  action: SecretAuditAction;
  actor: string;
  environment: string;
  names: string[];
  createdAt: Date;
}

/** Position after which a page of audit events starts (newest first). */
export interface AuditCursor {
  createdAt: Date;
  id: string;
}

/** Secrets, their kept versions, the organisation keyrings and the audit trail. Every query is scoped by organisation. */
export interface SecretsStore {
  findKeyring(organizationId: string): Promise<SecretKeyringRecord | null>;
  /** Inserts the keyring; false when the organisation already has one (the caller reads that one back). */
  insertKeyring(keyring: SecretKeyringRecord): Promise<boolean>;
  /** The sealing keys rotations replaced and that are kept still, newest first. */
  listPreviousSealingKeys(organizationId: string): Promise<PreviousSealingKeyRecord[]>;
  /**
   * Within a transaction: moves the current key pair (as stored now) to the
   * previous keys and stores the new one, only if the current key is still
   * `replacedKeyId`; false (nothing written) when another rotation came first.
   */
  rotateSealingKey(rotation: SealingKeyRotation): Promise<boolean>;
  /** Deletes the previous sealing keys retired before `retiredBefore`. */
  deletePreviousSealingKeys(organizationId: string, retiredBefore: Date): Promise<void>;
  /** The organisation's sealing_key_rotation_days (0: off); null when the organisation does not exist. */
  findSealingKeyRotationDays(organizationId: string): Promise<number | null>;
  /** Sets sealing_key_rotation_days; false when the organisation does not exist. */
  setSealingKeyRotationDays(organizationId: string, days: number): Promise<boolean>;
  findSecret(organizationId: string, environment: string, name: string): Promise<SecretRecord | null>;
  /** Creates a secret at version 1; a concurrent creation of the same name makes the transaction fail and retry. */
  createSecret(secret: SecretRecord): Promise<void>;
  /**
   * Moves a secret to its next version in one statement (version = version + 1),
   * so concurrent updates serialise on the row and none is lost; null when there is no such secret.
   */
  advanceSecret(
    key: { organizationId: string; environment: string; name: string },
    change: { tags: string[]; updatedAt: Date },
  ): Promise<SecretRecord | null>;
  insertVersion(version: {
    secretId: string;
    version: number;
    ciphertext: Buffer;
    tags: string[];
    actor: string;
    createdAt: Date;
  }): Promise<void>;
  /** Deletes the versions of a secret older than `keepFrom`. */
  pruneVersions(secretId: string, keepFrom: number): Promise<void>;
  /** An environment's secrets (order unspecified). */
  listSecrets(organizationId: string, environment: string): Promise<SecretRecord[]>;
  /** The environments that hold at least one secret (order unspecified). */
  listEnvironments(organizationId: string): Promise<string[]>;
  /**
   * An environment's secrets (optionally only the given names) with the stored
   * ciphertext of their current version, read in one statement so metadata and
   * value always belong together.
   */
  listCurrentValues(
    organizationId: string,
    environment: string,
    names: readonly string[],
    options?: { limit?: number },
  ): Promise<(SecretRecord & { ciphertext: Buffer })[]>;
  /** Deletes a secret with every version; false when there was none. */
  deleteSecret(organizationId: string, environment: string, name: string): Promise<boolean>;
  listVersions(secretId: string): Promise<SecretVersionRecord[]>;
  insertAuditEvent(event: SecretAuditRecord): Promise<void>;
  insertAuditEvents(events: readonly SecretAuditRecord[]): Promise<void>;
  /** Audit events newest first, after the cursor when given. */
  listAuditEvents(organizationId: string, limit: number, after?: AuditCursor): Promise<SecretAuditRecord[]>;
}
