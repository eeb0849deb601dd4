import { parseIfMatch } from "../domain/config/if-match.js";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { ConfigService } from "../../gen/svc/v1/config_pb.js";
import type { ConfigManager } from "../domain/config/config-manager.js";
import type { RevisionSummaryRecord } from "../domain/config/config-store.js";
import { DomainError } from "../domain/errors.js";
import { principalKey } from "../interceptors/auth.js";

export interface ConfigServiceParts {
  /** The configuration domain (src/composition/config.ts). */
  config: ConfigManager;
}

/** svc.v1.ConfigService: gateway configuration import, export, history, rollback and live revisions. */
export function createConfigService(parts: ConfigServiceParts): Partial<ServiceImpl<typeof ConfigService>> {
  const manager = parts.config;

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
