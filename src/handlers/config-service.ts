import { parseIfMatch } from "../domain/config/if-match.js";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { ConfigService } from "../../gen/svc/v1/config_pb.js";
import type { AppDeps } from "../app-deps.js";
import { createConfigManager } from "../domain/config/config-manager.js";
import { DomainError } from "../domain/errors.js";
import { principalKey } from "../interceptors/auth.js";
import { createConfigStore, type RevisionSummaryRecord } from "../storage/config-store.js";
import { createGatewayStore } from "../storage/gateway-store.js";

/** Change-feed topic of configuration revisions; payload "<organization id> <revision>". */
const configTopic = "config";

/** svc.v1.ConfigService: gateway configuration import, export, history, rollback and live revisions. */
export function createConfigService(deps: AppDeps): Partial<ServiceImpl<typeof ConfigService>> {
  const { database, changeFeed: feed } = deps;

  const manager = createConfigManager({
    clock: deps.clock,
    maxDocumentBytes: deps.config.limits.configBody,
    transaction: (fn) =>
      feed.transaction((tx, notify) =>
        fn(
          createConfigStore(tx, database.provider),
          (organizationId, revision) => notify(configTopic, `${organizationId} ${revision}`),
          async (organizationId, secrets) => new Set((await createGatewayStore(tx).secretVersions(organizationId, secrets)).keys()),
        ),
      ),
    // SQLite: statements outside a transaction share the connection of an open
    // one and would see its uncommitted writes, so reads take a transaction too.
    // PostgreSQL: each read is a single statement, consistent on its own.
    read:
      database.provider === "sqlite"
        ? (fn) => database.transaction((tx) => fn(createConfigStore(tx, database.provider)))
        : (fn) => fn(createConfigStore(database.client, database.provider)),
    // PostgreSQL: NOTIFY from every instance; SQLite: in-process, before the PUT answers.
    announcements(listener) {
      return feed.subscribe(configTopic, (event) => listener(event.kind === "gap" ? undefined : parseAnnouncement(event.payload)));
    },
    watchRevisions(organizationId, onChange) {
      const prefix = `${organizationId} `;
      return feed.subscribe(configTopic, (event) => {
        if (event.kind === "gap" || event.payload.startsWith(prefix)) onChange();
      });
    },
  });
  deps.onClose(() => manager.close());

  return {
    async getConfig(_req, ctx) {
      const { revision, yaml } = await manager.export(organizationOf(ctx));
      return { revision, yaml };
    },

    async applyConfig(req, ctx) {
      return manager.apply({
        organizationId: organizationOf(ctx),
        yaml: req.yaml,
        strict: req.strict,
        dryRun: req.dryRun,
        expectedRevision: req.expectedRevision,
        ifMatch: req.ifMatch === "" ? undefined : parseIfMatch(req.ifMatch),
        actor: actorOf(ctx),
        role: roleOf(ctx),
      });
    },

    async *watchConfig(req, ctx) {
      yield* manager.watch(organizationOf(ctx), req.sinceRevision, ctx.signal);
    },

    async listConfigRevisions(req, ctx) {
      const page = await manager.listRevisions(organizationOf(ctx), { pageSize: req.pageSize, pageToken: req.pageToken });
      return { revisions: page.revisions.map(toRevision), nextPageToken: page.nextPageToken };
    },

    async getConfigRevision(req, ctx) {
      const record = await manager.getRevision(organizationOf(ctx), req.revision);
      return { revision: toRevision(record), yaml: record.document };
    },

    async rollbackConfig(req, ctx) {
      const result = await manager.rollback({
        organizationId: organizationOf(ctx),
        revision: req.revision,
        expectedRevision: req.expectedRevision,
        actor: actorOf(ctx),
        role: roleOf(ctx),
      });
      return { result };
    },
  };
}

/** "<organization id> <revision>"; anything else (undefined) makes the caches start over. */
function parseAnnouncement(payload: string): { organizationId: string; revision: number } | undefined {
  const space = payload.lastIndexOf(" ");
  const revision = Number(payload.slice(space + 1));
  return space > 0 && Number.isSafeInteger(revision) ? { organizationId: payload.slice(0, space), revision } : undefined;
}

function toRevision(record: RevisionSummaryRecord) {
  return {
    revision: record.revision,
    actor: record.actor,
    createdAt: timestampFromDate(record.createdAt),
    source: record.source,
    created: record.created,
    updated: record.updated,
    deleted: record.deleted,
  };
}

/** The organisation the auth interceptor checked the caller's membership of. */
function organizationOf(ctx: HandlerContext): string {
  const principal = ctx.values.get(principalKey);
  if (principal.kind === "anonymous") throw new DomainError("unauthenticated", "credential_missing", "this operation needs a credential");
  return principal.organizationId;
}

/** The caller's role in the organisation (API keys and dashboard sessions have one). */
function roleOf(ctx: HandlerContext): "admin" | "member" | undefined {
  const principal = ctx.values.get(principalKey);
  return principal.kind === "api_key" || principal.kind === "dashboard" ? principal.role : undefined;
}

function actorOf(ctx: HandlerContext): string {
  const principal = ctx.values.get(principalKey);
  return principal.kind === "anonymous" ? "anonymous" : principal.actor;
}
