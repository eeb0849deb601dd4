import type { ConfigStore, RevisionRecord, RevisionSummaryRecord } from "./config-store.js";
import type { ChangeSubscriptions } from "../changes/topic.js";
import { configRevisions } from "../changes/topics.js";
import type { Clock } from "../clock.js";
import type { EventLog } from "../events/event-log.js";
import { DomainError, invalidArgument } from "../errors.js";
import { checkReferences, isEmptyPlan, planConfigChange } from "./plan-config-change.js";
import { configError, placeViolations, readConfigDocument, type ReadDocument } from "./read-config-document.js";
import { createExportCache, type ExportedConfig } from "./export-cache.js";
import type { RevisionCondition } from "./if-match.js";
import { renderConfigDocument } from "./render-config-document.js";
import { certificateSecrets, checkDomainCertificates } from "./domain-certificates.js";
import { checkSecretReferences, type SecretReference } from "./secret-references.js";

export interface ConfigManagerDeps {
  /**
   * Runs fn with a store bound to one transaction; `announce` publishes a new
   * revision once it commits; `existingSecrets` reads, in the same transaction,
   * which of the given secrets exist (keys `<environment>/<name>`); `events`
   * records in the transaction.
   */
  transaction<T>(
    fn: (
      store: ConfigStore,
      announce: (organizationId: string, revision: number) => void,
      existingSecrets: (organizationId: string, secrets: readonly SecretReference[]) => Promise<Set<string>>,
      events: EventLog,
    ) => Promise<T>,
  ): Promise<T>;
  /** Runs reads that must not see another transaction's uncommitted writes. */
  read<T>(fn: (store: ConfigStore) => Promise<T>): Promise<T>;
  clock: Clock;
  /** Largest document accepted, in bytes (UTF-8). */
  maxDocumentBytes: number;
  /**
   * The change feed: every committed revision of any organisation reaches this
   * process on it (configRevisions). Exports are cached only while it is live.
   */
  changes: ChangeSubscriptions;
  /**
   * The current values of the named secrets of an organisation (keys
   * `<environment>/<name>`; a missing secret is absent), read to check the
   * certificates and keys the document's domains reference (docs/gateway.md,
   * "TLS"). Without it, certificates are checked by the gateways only.
   */
  secretValues?: (organizationId: string, keys: readonly string[]) => Promise<ReadonlyMap<string, string>>;
}

/**
 * The plan of an import (docs/gateway.md, "Import: `PUT /organization/{id}/config`"): what it
 * changes, and what it accepts but needs attention.
 */
export interface ApplyResult {
  revision: number;
  applied: boolean;
  created: string[];
  updated: string[];
  deleted: string[];
  unchanged: number;
  /** A domain certificate that has expired, or expires within 7 days (docs/gateway.md, "TLS"). */
  warnings: string[];
}

export interface RevisionMessage {
  revision: number;
  yaml: string;
  created: string[];
  updated: string[];
  deleted: string[];
}

export interface ApplyInput {
  organizationId: string;
  yaml: string;
  strict: boolean;
  dryRun: boolean;
  expectedRevision?: number | undefined;
  /** An If-Match precondition (REST), as an alternative to expectedRevision. */
  ifMatch?: RevisionCondition | undefined;
  actor: string;
  /** The caller's role: adding or changing a secret reference needs "admin". */
  role: "admin" | "member" | undefined;
}

const defaultPageSize = 20;
const maxPageSize = 100;
/** Cached exports, in characters (a 10,000-route document is about 2 million). */
const exportCacheCharacters = 32 * 1024 * 1024;
/** How long a cached export is trusted on announcements alone before one request checks the database (see createExportCache). */
const exportRecheckMs = 1_000;
/** Revisions read per query while a watcher catches up (each holds a whole document). */
const catchUpBatch = 8;

/**
 * Gateway configuration: import (merge or strict, atomic, serial), export,
 * history, rollback and live revisions.
 */
export function createConfigManager(deps: ConfigManagerDeps) {
  const emptyYaml = renderConfigDocument([]);
  const cache = createExportCache({
    maxCharacters: exportCacheCharacters,
    recheckMs: exportRecheckMs,
    announced: () => announcements.live(),
    now: () => deps.clock().getTime(),
    currentRevision: (organizationId) => deps.read((store) => store.currentRevision(organizationId)),
  });
  // PostgreSQL: NOTIFY from every instance; SQLite: in-process, before the PUT answers.
  const announcements = deps.changes.subscribe(configRevisions, (event) => {
    if (event.kind === "message") cache.announce(event.value.organizationId, event.value.revision);
    else cache.forget();
  });

  async function applyDocument(
    organizationId: string,
    read: ReadDocument,
    options: {
      strict: boolean;
      dryRun: boolean;
      expectedRevision?: number | undefined;
      ifMatch?: RevisionCondition | undefined;
      actor: string;
      source: string;
      role: ApplyInput["role"];
    },
  ): Promise<ApplyResult> {
    // Read before the transaction (decrypting is not work to do while holding the
    // organisation's lock); the transaction still checks every reference exists.
    const certificateKeys = certificateSecrets(read.document);
    const certificateValues: ReadonlyMap<string, string> =
      certificateKeys.length > 0 && deps.secretValues ? await deps.secretValues(organizationId, certificateKeys) : new Map();
    const result = await deps.transaction(async (store, announce, existingSecrets, events) => {
      const current = await store.lockConfiguration(organizationId);
      if (current === null) throw new DomainError("not_found", "organization_not_found", `organisation "${organizationId}" does not exist`);
      if (options.expectedRevision !== undefined && options.expectedRevision !== current) {
        throw new DomainError(
          "failed_precondition",
          "revision_mismatch",
          `the configuration is at revision ${current}, not ${options.expectedRevision}: nothing was changed; fetch it again (its ETag is "${current}") and re-apply your change`,
        );
      }
      if (options.ifMatch && !options.ifMatch.matches(current)) {
        throw new DomainError(
          "failed_precondition",
          "revision_mismatch",
          `the configuration is at revision ${current} (ETag "${current}"), which If-Match ${options.ifMatch.describe} does not match by strong comparison: nothing was changed; fetch it again and re-apply your change`,
        );
      }
      const before = await store.listResources(organizationId);
      const plan = planConfigChange(before, read.document, options.strict);
      const dangling = checkReferences(read.document, plan.resulting, plan.deleted);
      if (dangling.length > 0) throw configError(placeViolations(dangling, read.locate));
      await checkSecretReferences({
        organizationId,
        document: read.document,
        locate: read.locate,
        before,
        after: plan.resulting,
        role: options.role,
        existing: (secrets) => existingSecrets(organizationId, secrets),
      });
      const certificates = checkDomainCertificates(read.document, certificateValues, deps.clock().getTime());
      if (certificates.violations.length > 0) throw configError(placeViolations(certificates.violations, read.locate));
      const summary = {
        created: plan.created,
        updated: plan.updated,
        deleted: plan.deleted,
        unchanged: plan.unchanged,
        warnings: certificates.warnings,
      };
      if (options.dryRun) return { revision: current, applied: false, ...summary };
      if (isEmptyPlan(plan)) return { revision: current, applied: true, ...summary };
      const revision = current + 1;
      const now = deps.clock();
      await store.replaceResources(organizationId, plan, now);
      await store.recordRevision(organizationId, {
        revision,
        actor: options.actor,
        source: options.source,
        created: plan.created,
        updated: plan.updated,
        deleted: plan.deleted,
        document: renderConfigDocument(plan.resulting),
        createdAt: now,
      });
      announce(organizationId, revision);
      await events.record(organizationId, {
        type: "config.applied",
        data: {
          revision,
          source: options.source,
          created: plan.created,
          updated: plan.updated,
          deleted: plan.deleted,
          actor: options.actor,
        },
      });
      return { revision, applied: true, ...summary };
    });
    // Committed: this instance's next export must show it, whenever the announcement arrives.
    if (result.applied) cache.forget(organizationId);
    return result;
  }

  function toMessage(record: RevisionRecord): RevisionMessage {
    return { revision: record.revision, yaml: record.document, created: record.created, updated: record.updated, deleted: record.deleted };
  }

  return {
    /** Stops listening to announcements. */
    close(): void {
      announcements.close();
      cache.forget();
    },

    /** The whole configuration, as the latest revision recorded it (revision 0: empty). */
    async export(organizationId: string): Promise<ExportedConfig> {
      return cache.get(organizationId, async () => {
        const latest = await deps.read((store) => store.latestRevision(organizationId));
        return latest ? { revision: latest.revision, yaml: latest.document } : { revision: 0, yaml: emptyYaml };
      });
    },

    async apply(input: ApplyInput): Promise<ApplyResult> {
      const bytes = Buffer.byteLength(input.yaml, "utf8");
      if (bytes > deps.maxDocumentBytes) {
        throw new DomainError(
          "resource_exhausted",
          "body_too_large",
          `the document is ${bytes} bytes, over the limit of ${deps.maxDocumentBytes} bytes (${deps.maxDocumentBytes / 1024 / 1024} MiB)`,
        );
      }
      if (input.expectedRevision !== undefined && input.ifMatch !== undefined) {
        throw invalidArgument([{ field: "if_match", description: "give either expected_revision or if_match, not both" }]);
      }
      if (input.expectedRevision !== undefined && input.expectedRevision < 0) {
        throw invalidArgument([{ field: "expected_revision", description: `must be 0 or more, got ${input.expectedRevision}` }]);
      }
      const read = readConfigDocument(input.yaml);
      return applyDocument(input.organizationId, read, {
        strict: input.strict,
        dryRun: input.dryRun,
        expectedRevision: input.expectedRevision,
        ifMatch: input.ifMatch,
        actor: input.actor,
        source: input.strict ? "import-strict" : "import",
        role: input.role,
      });
    },

    /** Makes an earlier revision's document current again: a strict import of it, recorded as a new revision. */
    async rollback(input: {
      organizationId: string;
      revision: number;
      expectedRevision?: number | undefined;
      actor: string;
      role: ApplyInput["role"];
    }): Promise<ApplyResult> {
      const target = await findRevision(input.organizationId, input.revision);
      return applyDocument(input.organizationId, readConfigDocument(target.document), {
        strict: true,
        dryRun: false,
        expectedRevision: input.expectedRevision,
        actor: input.actor,
        source: `rollback:${input.revision}`,
        role: input.role,
      });
    },

    async getRevision(organizationId: string, revision: number): Promise<RevisionRecord> {
      return findRevision(organizationId, revision);
    },

    /** Newest first, page by page; the token is the revision to continue below. */
    async listRevisions(
      organizationId: string,
      page: { pageSize: number; pageToken: string },
    ): Promise<{ revisions: RevisionSummaryRecord[]; nextPageToken: string }> {
      const violations = [];
      if (page.pageSize < 0 || page.pageSize > maxPageSize) {
        violations.push({
          field: "page_size",
          description: `must be from 1 to ${maxPageSize} (0 or absent: ${defaultPageSize}), got ${page.pageSize}`,
        });
      }
      let before: number | undefined;
      if (page.pageToken !== "") {
        const match = /^r([1-9][0-9]{0,9})$/.exec(Buffer.from(page.pageToken, "base64url").toString("latin1"));
        if (!match) violations.push({ field: "page_token", description: "is not a token from a previous answer's next_page_token" });
        else before = Number(match[1]);
      }
      if (violations.length > 0) throw invalidArgument(violations);
      const limit = page.pageSize === 0 ? defaultPageSize : page.pageSize;
      const rows = await deps.read((store) =>
        store.listRevisions(organizationId, { ...(before !== undefined ? { before } : {}), limit: limit + 1 }),
      );
      const revisions = rows.slice(0, limit);
      const last = revisions[revisions.length - 1];
      const nextPageToken = rows.length > limit && last ? Buffer.from(`r${last.revision}`, "latin1").toString("base64url") : "";
      return { revisions, nextPageToken };
    },

    /**
     * The current revision (or, with sinceRevision, every later one), then each
     * new revision as it is applied, until the signal aborts.
     */
    async *watch(organizationId: string, sinceRevision: number | undefined, signal: AbortSignal): AsyncGenerator<RevisionMessage> {
      if (sinceRevision !== undefined && sinceRevision < 0) {
        throw invalidArgument([{ field: "since_revision", description: `must be 0 or more, got ${sinceRevision}` }]);
      }
      const wake = createWakeup();
      // Subscribe before reading, so that no revision slips between the read and the subscription.
      const subscription = deps.changes.subscribe(configRevisions, (event) => {
        if (event.kind === "gap" || event.value.organizationId === organizationId) wake.notify();
      });
      try {
        await subscription.ready;
        let last: number;
        if (sinceRevision === undefined) {
          const latest = await deps.read((store) => store.latestRevision(organizationId));
          yield latest ? toMessage(latest) : { revision: 0, yaml: emptyYaml, created: [], updated: [], deleted: [] };
          last = latest?.revision ?? 0;
        } else {
          const current = (await deps.read((store) => store.currentRevision(organizationId))) ?? 0;
          if (sinceRevision > current) {
            throw invalidArgument([
              {
                field: "since_revision",
                description: `revision ${sinceRevision} is ahead of the current revision ${current}: watch again without since_revision`,
              },
            ]);
          }
          last = sinceRevision;
        }
        for (;;) {
          for (;;) {
            const after = last;
            const batch = await deps.read((store) => store.revisionsAfter(organizationId, after, catchUpBatch));
            for (const record of batch) {
              yield toMessage(record);
              last = record.revision;
            }
            if (batch.length < catchUpBatch) break;
          }
          if (!(await wake.wait(signal))) return;
        }
      } finally {
        subscription.close();
      }
    },
  };

  async function findRevision(organizationId: string, revision: number): Promise<RevisionRecord> {
    if (!Number.isInteger(revision) || revision < 1) {
      throw invalidArgument([{ field: "revision", description: `must be a revision number, 1 or more, got ${revision}` }]);
    }
    const record = await deps.read((store) => store.findRevision(organizationId, revision));
    if (!record) {
      const current = (await deps.read((store) => store.currentRevision(organizationId))) ?? 0;
      throw new DomainError(
        "not_found",
        "revision_not_found",
        current === 0
          ? `revision ${revision} does not exist: the configuration has no revisions yet`
          : `revision ${revision} does not exist: revisions go from 1 to ${current}`,
      );
    }
    return record;
  }
}

export type ConfigManager = ReturnType<typeof createConfigManager>;

/** A level-triggered wake-up: a notification before wait() is not lost. */
function createWakeup() {
  let pending = false;
  let resume: (() => void) | undefined;
  return {
    notify: () => {
      pending = true;
      resume?.();
    },
    /** Resolves true when notified, false when the signal aborts. */
    async wait(signal: AbortSignal): Promise<boolean> {
      if (!pending && !signal.aborted) {
        await new Promise<void>((resolve) => {
          const done = () => {
            signal.removeEventListener("abort", done);
            resume = undefined;
            resolve();
          };
          resume = done;
          signal.addEventListener("abort", done, { once: true });
        });
      }
      if (signal.aborted) return false;
      pending = false;
      return true;
    },
  };
}
