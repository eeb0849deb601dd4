import type { CanonicalResource, ResourceKind } from "./config-document.js";
// Gateway configurations and their history (a port); src/storage implements it.
/** One applied revision: who changed what, when, and the whole document it led to. */
export interface RevisionSummaryRecord {
  revision: number;
  actor: string;
  source: string;
  created: string[];
  updated: string[];
  deleted: string[];
  createdAt: Date;
}

export interface RevisionRecord extends RevisionSummaryRecord {
  /** The whole configuration after this revision, as exported. */
  document: string;
}

/** Resources and history of organisations' gateway configurations. Every query is scoped to one organisation. */
export interface ConfigStore {
  /**
   * Takes the organisation's configuration lock for the rest of the
   * transaction and answers its current revision (null: no such organisation).
   * On PostgreSQL this is a row lock on the organisation, so concurrent imports
   * run one after the other; SQLite runs one writing transaction at a time.
   */
  lockConfiguration(organizationId: string): Promise<number | null>;
  /** The current revision without locking (null: no such organisation). */
  currentRevision(organizationId: string): Promise<number | null>;
  listResources(organizationId: string): Promise<CanonicalResource[]>;
  /** Removes then inserts resources, in a few statements per thousand rows. */
  replaceResources(
    organizationId: string,
    changes: { remove: readonly { kind: ResourceKind; name: string }[]; insert: readonly CanonicalResource[] },
    at: Date,
  ): Promise<void>;
  /** Stores a revision and makes it the organisation's current one. */
  recordRevision(organizationId: string, record: RevisionRecord): Promise<void>;
  latestRevision(organizationId: string): Promise<RevisionRecord | null>;
  findRevision(organizationId: string, revision: number): Promise<RevisionRecord | null>;
  /** Newest first, optionally only revisions older than `before`. */
  listRevisions(organizationId: string, options: { before?: number; limit: number }): Promise<RevisionSummaryRecord[]>;
  /** Oldest first, revisions after `after`, with their documents. */
  revisionsAfter(organizationId: string, after: number, limit: number): Promise<RevisionRecord[]>;
}
