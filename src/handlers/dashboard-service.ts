import { create, type JsonObject } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { Role as RoleEnum } from "../../gen/svc/v1/auth_pb.js";
import {
  GetConfigRequestSchema,
  GetConfigRevisionRequestSchema,
  ListConfigRevisionsRequestSchema,
  RollbackConfigRequestSchema,
  type ConfigService,
} from "../../gen/svc/v1/config_pb.js";
import {
  DiffLineKind,
  IdentityKeyKind,
  MemberStatus,
  type DashboardService,
  type IdentitySettingsValues,
} from "../../gen/svc/v1/dashboard_pb.js";
import {
  DeleteSecretRequestSchema,
  ListPublicKeysRequestSchema,
  RotatePublicKeyRequestSchema,
  type SecretsService,
} from "../../gen/svc/v1/secrets_pb.js";
import { displayPrefix } from "../crypto/tokens.js";
import type { Dashboard } from "../dashboard/create-dashboard.js";
import { diffLines } from "../dashboard/operators/line-diff.js";
import { cursors, keysetOf, pageOf, readPage } from "../dashboard/operators/paging.js";
import { renderConfigDocument } from "../domain/config/render-config-document.js";
import { DomainError, invalidArgument, unimplemented, type Violation } from "../domain/errors.js";
import type { ConnectedGateway } from "../domain/gateway/gateway-credentials.js";
import { normalizeIdentifier, readUuid } from "../domain/identity/identifiers.js";
import type { SigningKeyView } from "../domain/identity/sessions.js";
import { effectiveSettings, parseSettingsAssignments } from "../domain/identity/settings.js";
import { checkEnvironment } from "../domain/secrets/secret-rules.js";
import type { Tenancy } from "../domain/tenancy/tenancy.js";
import { principalKey } from "../interceptors/auth.js";
import { clientAddressKey } from "../server/call.js";
import type { DashboardDirectory } from "../dashboard/operators/dashboard-directory.js";
import type { InvitationRecord, MemberRecord, OperatorPasskeyRecord } from "../dashboard/operators/dashboard-store.js";
import type { ConsumerKeyRecord, GatewayKeyRecord } from "../domain/gateway/gateway-store.js";
import type { IdentitySettingsPatch, IdentitySettingsRecord } from "../domain/identity/identity-store.js";
import type { Identity } from "../domain/identity/identity.js";
import type { Passkeys } from "../domain/passkeys/passkeys.js";
import type { OrganizationSettings } from "../domain/settings/organization-settings.js";
import type { Clock } from "../domain/clock.js";
import type { GatewayCredentials } from "../domain/gateway/gateway-credentials.js";
import type { OrganizationKeyKind, Role } from "../domain/tenancy/tenancy-store.js";

/** What the dashboard reuses from the rest of the app, so that every change goes through the same code as the API's. */
export interface DashboardServiceParts {
  dashboard: Dashboard;
  tenancy: Tenancy;
  identity: Identity;
  passkeys: Passkeys;
  gateways: GatewayCredentials;
  /** Identity settings (and the sealing-key schedule) as operators change them. */
  settings: OrganizationSettings;
  /** The pages' listings. */
  directory: DashboardDirectory;
  clock: Clock;
  /** PUBLIC_URL: what an empty rp_id or origins follows. */
  publicUrl: string;
  /** After a change that takes access away: every instance forgets cached credentials. */
  credentialsChanged(): Promise<void>;
  /** The ConfigService handlers: exports, history and rollbacks go through the same manager, cache and change feed. */
  config: Partial<ServiceImpl<typeof ConfigService>>;
  /** The SecretsService handlers: deletions are the secrets API's own (audited the same way). */
  secrets: Partial<ServiceImpl<typeof SecretsService>>;
}

const ts = (date: Date) => timestampFromDate(date);
const tsOrUndefined = (date: Date | null) => (date ? timestampFromDate(date) : undefined);

function roleOf(value: RoleEnum): Role | null {
  if (value === RoleEnum.ADMIN) return "admin";
  if (value === RoleEnum.MEMBER) return "member";
  return null;
}

function roleEnum(role: Role): RoleEnum {
  return role === "admin" ? RoleEnum.ADMIN : RoleEnum.MEMBER;
}

function keyKindOf(value: IdentityKeyKind): OrganizationKeyKind | null {
  if (value === IdentityKeyKind.PUBLISHABLE) return "publishable";
  if (value === IdentityKeyKind.SECRET) return "secret";
  return null;
}

function keyKindEnum(kind: OrganizationKeyKind): IdentityKeyKind {
  return kind === "publishable" ? IdentityKeyKind.PUBLISHABLE : IdentityKeyKind.SECRET;
}

function toOperatorPasskey(passkey: OperatorPasskeyRecord) {
  return {
    id: passkey.id,
    name: passkey.name,
    createdAt: ts(passkey.createdAt),
    lastUsedAt: tsOrUndefined(passkey.lastUsedAt),
    credentialId: passkey.credentialId,
    deviceType: passkey.deviceType,
    backedUp: passkey.backedUp,
  };
}

/** A session signing key as the dashboard shows it (SessionSigningKeyInfo). */
function toSigningKeyInfo(key: SigningKeyView) {
  return {
    kid: key.kid,
    createdAt: ts(key.createdAt),
    retiredAt: tsOrUndefined(key.retiredAt),
    publishedUntil: tsOrUndefined(key.publishedUntil),
  };
}

/** WebAuthn options of @simplewebauthn/server as a google.protobuf.Struct (JSON without undefined members). */
function asStruct(options: object): JsonObject {
  return JSON.parse(JSON.stringify(options)) as JsonObject;
}

function toMember(member: MemberRecord) {
  return {
    accountId: member.accountId,
    email: member.email,
    displayName: member.displayName,
    role: roleEnum(member.role),
    status: member.pending ? MemberStatus.PENDING : MemberStatus.ACTIVE,
    createdAt: ts(member.createdAt),
  };
}

function toInvitation(invitation: InvitationRecord) {
  return {
    invitationId: invitation.id,
    email: invitation.email,
    displayName: invitation.displayName,
    role: roleEnum(invitation.role),
    createdAt: ts(invitation.createdAt),
    expiresAt: ts(invitation.expiresAt),
    invitedBy: invitation.invitedBy,
  };
}

function toGatewayKey(key: GatewayKeyRecord) {
  return {
    id: key.id,
    name: key.name,
    prefix: key.prefix,
    createdAt: ts(key.createdAt),
    lastUsedAt: tsOrUndefined(key.lastUsedAt),
    revokedAt: tsOrUndefined(key.revokedAt),
  };
}

function toConsumer(consumer: ConsumerKeyRecord) {
  return {
    consumerId: consumer.id,
    name: consumer.name,
    prefix: consumer.prefix,
    createdAt: ts(consumer.createdAt),
    revokedAt: tsOrUndefined(consumer.revokedAt),
  };
}

function toConnectedGateway(gateway: ConnectedGateway) {
  return {
    gatewayId: gateway.gatewayId,
    revision: gateway.revision,
    connectedAt: ts(gateway.connectedAt),
    lastSeenAt: ts(gateway.lastSeenAt),
    connected: gateway.connected,
  };
}

/** The dashboard principal the auth interceptor established (a signed-in operator, member of the organisation named). */
function operatorOf(ctx: HandlerContext) {
  const principal = ctx.values.get(principalKey);
  if (principal.kind !== "dashboard") {
    throw new DomainError("permission_denied", "wrong_credential_kind", "this operation needs a signed-in dashboard session");
  }
  return principal;
}

/** A handler of another service, called with this request's context (same principal, same audit actor). */
function handlerOf<T>(fn: T | undefined, name: string): T {
  if (!fn) throw unimplemented(name);
  return fn;
}

/**
 * The stored settings as the form shows them: rp_id and origins empty while
 * they follow PUBLIC_URL, every other value resolved against the defaults.
 */
function settingsValues(stored: IdentitySettingsRecord | null, publicUrl: string) {
  const effective = effectiveSettings(stored, publicUrl);
  return {
    passkeys: effective.passkeys,
    magicLinks: effective.magicLinks,
    password: effective.password,
    rpId: stored?.rpId ?? "",
    origins: stored?.origins ?? [],
    sessionTtlSeconds: effective.sessionTtlSeconds,
    magicLinkTtlSeconds: effective.magicLinkTtlSeconds,
    lockoutThreshold: effective.lockoutThreshold,
    lockoutWindowSeconds: effective.lockoutWindowSeconds,
    ipLimitPerMinute: effective.ipLimitPerMinute,
    magicLinkLimitPerHour: effective.magicLinkLimitPerHour,
  };
}

/**
 * The form's values as `gatehouse settings set` assignments, so that the
 * dashboard and the CLI validate settings with the one parser of the identity
 * area (violations name the snake_case setting, e.g. `session_ttl_seconds`).
 */
function settingsAssignments(values: IdentitySettingsValues, violations: Violation[]): string[] {
  const origins = values.origins.map((origin) => origin.trim()).filter((origin) => origin !== "");
  origins.forEach((origin, i) => {
    if (origin.includes(",")) violations.push({ field: `origins[${i}]`, description: "must be one origin (no commas)" });
  });
  return [
    `passkeys=${values.passkeys}`,
    `magic_links=${values.magicLinks}`,
    `password=${values.password}`,
    `rp_id=${values.rpId.trim()}`,
    `origins=${origins.join(",")}`,
    `session_ttl_seconds=${values.sessionTtlSeconds}`,
    `magic_link_ttl_seconds=${values.magicLinkTtlSeconds}`,
    `lockout_threshold=${values.lockoutThreshold}`,
    `lockout_window_seconds=${values.lockoutWindowSeconds}`,
    `ip_limit_per_minute=${values.ipLimitPerMinute}`,
    `magic_link_limit_per_hour=${values.magicLinkLimitPerHour}`,
  ];
}

/** Violations of a nested message carry its field path (`settings.session_ttl_seconds`). */
async function nested<T>(prefix: string, run: () => T | Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof DomainError && error.kind === "invalid_argument" && error.violations.length > 0) {
      throw invalidArgument(
        error.violations.map((v) => ({ ...v, field: `${prefix}.${v.field}` })),
        error.reason,
      );
    }
    throw error;
  }
}

/**
 * svc.v1.DashboardService: thin mapping between the dashboard's RPCs and the
 * domains they reuse (tenancy, identity, gateway credentials, secrets,
 * configuration) plus the dashboard's own members and operator sessions.
 * Every change goes through a domain function (the one the API or the CLI
 * uses for the same change); the stores are read here, never written. The
 * request guard has already checked that the request came from a dashboard
 * page, and the auth interceptor the session, membership and role.
 */
export function createDashboardService(parts: DashboardServiceParts): Partial<ServiceImpl<typeof DashboardService>> {
  const { dashboard, tenancy, config, secrets, identity: identities, passkeys, gateways, settings, clock, publicUrl } = parts;
  const store = parts.directory;

  async function identityKeyInfo(organizationId: string) {
    const keys = await store.listIdentityKeys(organizationId);
    const newest = (kind: OrganizationKeyKind) => {
      const key = keys.find((k) => k.kind === kind);
      return key
        ? { kind: keyKindEnum(kind), prefix: key.prefix, createdAt: ts(key.createdAt), lastUsedAt: tsOrUndefined(key.lastUsedAt) }
        : undefined;
    };
    return { publishableKey: newest("publishable"), secretKey: newest("secret") };
  }

  async function requireIdentity(organizationId: string, rawId: string, field = "identity_id") {
    const violations: Violation[] = [];
    const identityId = readUuid(rawId, field, violations);
    if (violations.length > 0) throw invalidArgument(violations);
    const identity = await identities.findIdentity(organizationId, identityId);
    if (!identity) throw new DomainError("not_found", "identity_not_found", `identity ${identityId} does not exist`);
    return identity;
  }

  async function documentAt(ctx: HandlerContext, organizationId: string, revision: number, field: string): Promise<string> {
    if (!Number.isInteger(revision) || revision < 0)
      throw invalidArgument([{ field, description: `must be a revision number, or 0 for the empty configuration; got ${revision}` }]);
    if (revision === 0) return renderConfigDocument([]);
    try {
      const found = await handlerOf(config.getConfigRevision, "GetConfigRevision")(
        create(GetConfigRevisionRequestSchema, { organizationId, revision }),
        ctx,
      );
      return found.yaml ?? "";
    } catch (error) {
      // Say which side of the diff was missing.
      if (error instanceof DomainError && error.reason === "revision_not_found")
        throw new DomainError("not_found", error.reason, `${field}: ${error.message}`);
      throw error;
    }
  }

  return {
    async getOperatorSession(_req, ctx) {
      const found = await dashboard.sessions.describe(operatorOf(ctx));
      return {
        operator: {
          accountId: found.account.id,
          email: found.account.email,
          displayName: found.account.displayName,
          hasPassword: found.account.passwordHash !== null,
        },
        organizations: found.organizations.map((o) => ({ organizationId: o.organizationId, name: o.name, role: roleEnum(o.role) })),
        idleExpiresAt: ts(found.idleExpiresAt),
        expiresAt: ts(found.expiresAt),
      };
    },

    // ------------------------------------------------------------ operator passkeys

    async listOperatorPasskeys(_req, ctx) {
      const { accountId } = operatorOf(ctx);
      return { passkeys: (await dashboard.passkeys.list(accountId)).map(toOperatorPasskey) };
    },

    async beginAddOperatorPasskey(_req, ctx) {
      const begun = await dashboard.passkeys.beginAdd(operatorOf(ctx).accountId);
      return { ceremonyId: begun.ceremonyId, options: asStruct(begun.options) };
    },

    async finishAddOperatorPasskey(req, ctx) {
      const added = await dashboard.passkeys.finishAdd(operatorOf(ctx), {
        ceremonyId: req.ceremonyId,
        credential: req.credential,
        name: req.name,
      });
      return { passkey: toOperatorPasskey(added) };
    },

    async removeOperatorPasskey(req, ctx) {
      await dashboard.passkeys.remove(operatorOf(ctx).accountId, req.passkeyId);
      return {};
    },

    async setOperatorPassword(req, ctx) {
      await dashboard.sessions.setPassword(operatorOf(ctx), {
        currentPassword: req.currentPassword,
        newPassword: req.newPassword,
        clientAddress: ctx.values.get(clientAddressKey),
      });
      return {};
    },

    // ------------------------------------------------------------ API keys

    async listApiKeys(req, ctx) {
      const { organizationId } = operatorOf(ctx);
      const page = readPage(req, cursors.apiKeys);
      const rows = await store.listApiKeys(organizationId, { includeRevoked: req.includeRevoked }, keysetOf(page));
      const { items, nextPageToken } = pageOf(rows, page, cursors.apiKeys, (key) => ({ at: key.createdAt, id: key.id }));
      return {
        apiKeys: items.map((key) => ({
          id: key.id,
          name: key.name,
          prefix: key.prefix,
          role: roleEnum(key.role),
          createdAt: ts(key.createdAt),
          lastUsedAt: tsOrUndefined(key.lastUsedAt),
          revokedAt: tsOrUndefined(key.revokedAt),
        })),
        nextPageToken,
      };
    },

    async createApiKey(req, ctx) {
      const { organizationId } = operatorOf(ctx);
      const role = roleOf(req.role);
      const created = await tenancy.createApiKey({ organizationId, name: req.name, role: role ?? "" });
      return {
        apiKey: { id: created.id, name: req.name.trim(), prefix: created.prefix, role: roleEnum(role as Role), createdAt: ts(clock()) },
        key: created.apiKey,
      };
    },

    async revokeApiKey(req, ctx) {
      // Revoking a revoked key changes nothing and is not an error.
      await tenancy.revokeApiKey({ organizationId: operatorOf(ctx).organizationId, apiKeyId: req.apiKeyId });
      return {};
    },

    // ------------------------------------------------------------ identity keys

    async getIdentityKeys(_req, ctx) {
      return identityKeyInfo(operatorOf(ctx).organizationId);
    },

    async rotateIdentityKey(req, ctx) {
      const { organizationId } = operatorOf(ctx);
      const kind = keyKindOf(req.kind);
      if (kind === null)
        throw invalidArgument([{ field: "kind", description: "must be IDENTITY_KEY_KIND_PUBLISHABLE or IDENTITY_KEY_KIND_SECRET" }]);
      const key = await tenancy.rotateOrganizationKey(organizationId, kind);
      const info = await identityKeyInfo(organizationId);
      const current = kind === "publishable" ? info.publishableKey : info.secretKey;
      return { keyInfo: current ?? { kind: keyKindEnum(kind), prefix: displayPrefix(key), createdAt: ts(clock()) }, key };
    },

    // ------------------------------------------------------------ session signing keys

    async listSessionSigningKeys(_req, ctx) {
      const keys = await identities.sessions.signingKeysOf(operatorOf(ctx).organizationId);
      return { keys: keys.map(toSigningKeyInfo) };
    },

    async rotateSessionSigningKey(_req, ctx) {
      // The tenancy operation the CLI runs too; the role and the organisation were checked by the interceptor.
      const rotated = await tenancy.rotateSessionSigningKey(operatorOf(ctx).organizationId);
      return { key: toSigningKeyInfo(rotated.key), retired: rotated.retired.map(toSigningKeyInfo) };
    },

    // ------------------------------------------------------------ identity settings

    async getIdentitySettings(_req, ctx) {
      const { organizationId } = operatorOf(ctx);
      const stored = await settings.identitySettings(organizationId);
      const defaults = effectiveSettings(null, publicUrl);
      return { settings: settingsValues(stored, publicUrl), defaultRpId: defaults.rpId, defaultOrigins: defaults.origins };
    },

    async updateIdentitySettings(req, ctx) {
      const { organizationId } = operatorOf(ctx);
      if (!req.settings) throw invalidArgument([{ field: "settings", description: "is required" }]);
      const values = req.settings;
      const saved = await nested("settings", async () => {
        const violations: Violation[] = [];
        const assignments = settingsAssignments(values, violations);
        let patch: IdentitySettingsPatch | undefined;
        try {
          patch = parseSettingsAssignments(assignments);
        } catch (error) {
          if (!(error instanceof DomainError) || error.kind !== "invalid_argument") throw error;
          violations.push(...error.violations);
        }
        if (violations.length > 0 || !patch) throw invalidArgument(violations);
        // The form sends every setting: the patch replaces them all, checked as `gatehouse settings set` checks them.
        await settings.update(organizationId, { identity: patch });
        return settings.identitySettings(organizationId);
      });
      return { settings: settingsValues(saved, publicUrl) };
    },

    // ------------------------------------------------------------ identities

    async searchIdentities(req, ctx) {
      const { organizationId } = operatorOf(ctx);
      const page = readPage(req, cursors.identities);
      const query = normalizeIdentifier(req.query);
      if (query.length > 320) throw invalidArgument([{ field: "query", description: "must be at most 320 characters" }]);
      const rows = await store.searchIdentities(organizationId, query.toLowerCase(), keysetOf(page));
      const { items, nextPageToken } = pageOf(rows, page, cursors.identities, (identity) => identity.identifier);
      return { identities: items.map((i) => ({ id: i.id, identifier: i.identifier, createdAt: ts(i.createdAt) })), nextPageToken };
    },

    async getIdentityDetails(req, ctx) {
      const { organizationId } = operatorOf(ctx);
      const identity = await requireIdentity(organizationId, req.identityId);
      const [hasPassword, held, live] = await Promise.all([
        store.hasPassword(organizationId, identity.id),
        passkeys.listPasskeys(organizationId, identity.id),
        store.countLiveSessions(organizationId, identity.id, clock()),
      ]);
      return {
        identity: { id: identity.id, identifier: identity.identifier, createdAt: ts(identity.createdAt) },
        hasPassword,
        passkeys: held.map((p) => ({
          credentialId: p.id,
          name: p.name ?? "",
          createdAt: ts(p.createdAt),
          lastUsedAt: tsOrUndefined(p.lastUsedAt),
          deviceType: p.deviceType,
          backedUp: p.backedUp,
        })),
        liveSessions: live,
      };
    },

    async listIdentitySessions(req, ctx) {
      const { organizationId } = operatorOf(ctx);
      const page = readPage(req, cursors.identitySessions);
      const identity = await requireIdentity(organizationId, req.identityId);
      const rows = await store.listIdentitySessions(organizationId, identity.id, keysetOf(page));
      const { items, nextPageToken } = pageOf(rows, page, cursors.identitySessions, (session) => ({
        at: session.createdAt,
        id: session.id,
      }));
      const now = clock().getTime();
      return {
        sessions: items.map((s) => ({
          sessionId: s.id,
          method: s.method,
          createdAt: ts(s.createdAt),
          expiresAt: ts(s.expiresAt),
          revokedAt: tsOrUndefined(s.revokedAt),
          live: s.revokedAt === null && s.expiresAt.getTime() > now,
        })),
        nextPageToken,
      };
    },

    async removeIdentityPasskey(req, ctx) {
      await passkeys.removeIdentityPasskey(operatorOf(ctx).organizationId, { identityId: req.identityId, credentialId: req.credentialId });
      return {};
    },

    async revokeIdentitySessions(req, ctx) {
      // The identity domain's revocation: announced to every instance's gateways, as an API revocation is.
      return identities.revokeIdentitySessions(operatorOf(ctx).organizationId, {
        identityId: req.identityId,
        sessionId: req.sessionId,
      });
    },

    // ------------------------------------------------------------ secrets

    async listSecretEnvironments(_req, ctx) {
      return { environments: await store.listSecretEnvironments(operatorOf(ctx).organizationId) };
    },

    async listEnvironmentSecrets(req, ctx) {
      const { organizationId } = operatorOf(ctx);
      const violations: Violation[] = [];
      checkEnvironment(req.environment, "environment", violations);
      let page: ReturnType<typeof readPage<string>> | undefined;
      try {
        page = readPage(req, cursors.secrets);
      } catch (error) {
        if (!(error instanceof DomainError) || error.kind !== "invalid_argument") throw error;
        violations.push(...error.violations);
      }
      if (violations.length > 0 || !page) throw invalidArgument(violations);
      // Metadata only, paged in the database by name (the values are never read).
      const rows = await store.listSecrets(organizationId, req.environment, keysetOf(page));
      const { items, nextPageToken } = pageOf(rows, page, cursors.secrets, (secret) => secret.name);
      return {
        secrets: items.map((secret) => ({
          name: secret.name,
          environment: secret.environment,
          version: secret.version,
          tags: secret.tags,
          updatedAt: ts(secret.updatedAt),
        })),
        nextPageToken,
      };
    },

    async deleteEnvironmentSecret(req, ctx) {
      const { organizationId } = operatorOf(ctx);
      await handlerOf(secrets.deleteSecret, "DeleteSecret")(
        create(DeleteSecretRequestSchema, { organizationId, environment: req.environment, name: req.name }),
        ctx,
      );
      return {};
    },

    async listSealingKeys(_req, ctx) {
      const { organizationId } = operatorOf(ctx);
      const keys = await handlerOf(secrets.listPublicKeys, "ListPublicKeys")(create(ListPublicKeysRequestSchema, { organizationId }), ctx);
      return { current: keys.current, previousKeys: keys.previousKeys, sealingKeyRotationDays: keys.sealingKeyRotationDays };
    },

    async rotateSealingKey(_req, ctx) {
      const { organizationId } = operatorOf(ctx);
      // The secrets API's own rotation; the role and the organisation were checked by the interceptor.
      await handlerOf(secrets.rotatePublicKey, "RotatePublicKey")(create(RotatePublicKeyRequestSchema, { organizationId }), ctx);
      const keys = await handlerOf(secrets.listPublicKeys, "ListPublicKeys")(create(ListPublicKeysRequestSchema, { organizationId }), ctx);
      return { current: keys.current, previousKeys: keys.previousKeys };
    },

    // ------------------------------------------------------------ configuration

    async getConfigDocument(_req, ctx) {
      const { organizationId } = operatorOf(ctx);
      const current = await handlerOf(config.getConfig, "GetConfig")(create(GetConfigRequestSchema, { organizationId }), ctx);
      return { revision: current.revision ?? 0, yaml: current.yaml ?? "" };
    },

    async listConfigHistory(req, ctx) {
      const { organizationId } = operatorOf(ctx);
      const listed = await handlerOf(config.listConfigRevisions, "ListConfigRevisions")(
        create(ListConfigRevisionsRequestSchema, { organizationId, pageSize: req.pageSize, pageToken: req.pageToken }),
        ctx,
      );
      return { revisions: listed.revisions ?? [], nextPageToken: listed.nextPageToken ?? "" };
    },

    async diffConfigRevisions(req, ctx) {
      const { organizationId } = operatorOf(ctx);
      const [older, newer] = await Promise.all([
        documentAt(ctx, organizationId, req.fromRevision, "from_revision"),
        documentAt(ctx, organizationId, req.toRevision, "to_revision"),
      ]);
      const diff = diffLines(older, newer);
      const kinds = { same: DiffLineKind.SAME, removed: DiffLineKind.REMOVED, added: DiffLineKind.ADDED } as const;
      return {
        hunks: diff.hunks.map((lines) => ({
          lines: lines.map((l) => ({ kind: kinds[l.kind], text: l.text, oldLine: l.oldLine, newLine: l.newLine })),
        })),
        added: diff.added,
        removed: diff.removed,
      };
    },

    async rollbackConfigRevision(req, ctx) {
      const { organizationId } = operatorOf(ctx);
      const rolled = await handlerOf(config.rollbackConfig, "RollbackConfig")(
        create(RollbackConfigRequestSchema, {
          organizationId,
          revision: req.revision,
          ...(req.expectedRevision !== undefined ? { expectedRevision: req.expectedRevision } : {}),
        }),
        ctx,
      );
      return { result: rolled.result };
    },

    // ------------------------------------------------------------ members

    async listMembers(req, ctx) {
      const { organizationId } = operatorOf(ctx);
      const page = readPage(req, cursors.members);
      const { items, nextPageToken } = pageOf(await dashboard.members.list(organizationId, page), page, cursors.members, (m) => m.email);
      return { members: items.map(toMember), nextPageToken };
    },

    async listInvitations(req, ctx) {
      const { organizationId } = operatorOf(ctx);
      const page = readPage(req, cursors.invitations);
      const rows = await dashboard.invitations.list(organizationId, page);
      const { items, nextPageToken } = pageOf(rows, page, cursors.invitations, (invitation) => invitation.email);
      return { invitations: items.map(toInvitation), nextPageToken };
    },

    async inviteMember(req, ctx) {
      const { organizationId, accountId } = operatorOf(ctx);
      const issued = await dashboard.invitations.invite(organizationId, accountId, {
        email: req.email,
        displayName: req.displayName,
        role: roleOf(req.role),
      });
      return { invitation: toInvitation(issued.invitation), invitationUrl: issued.url };
    },

    async reissueInvitation(req, ctx) {
      const { organizationId, accountId } = operatorOf(ctx);
      const issued = await dashboard.invitations.reissue(organizationId, readId(req.invitationId, "invitation_id"), accountId);
      return { invitation: toInvitation(issued.invitation), invitationUrl: issued.url };
    },

    async revokeInvitation(req, ctx) {
      const { organizationId } = operatorOf(ctx);
      await dashboard.invitations.revoke(organizationId, readId(req.invitationId, "invitation_id"));
      return {};
    },

    async acceptInvitation(req, ctx) {
      const joined = await dashboard.invitations.accept(operatorOf(ctx), {
        token: req.token,
        currentPassword: req.currentPassword,
        newPassword: req.newPassword,
        clientAddress: ctx.values.get(clientAddressKey),
      });
      await parts.credentialsChanged();
      return { organization: { organizationId: joined.organizationId, name: joined.name, role: roleEnum(joined.role) } };
    },

    async changeMemberRole(req, ctx) {
      const { organizationId } = operatorOf(ctx);
      const member = await dashboard.members.changeRole(organizationId, readAccountId(req.accountId), roleOf(req.role));
      await parts.credentialsChanged();
      return { member: toMember(member) };
    },

    async removeMember(req, ctx) {
      const { organizationId } = operatorOf(ctx);
      await dashboard.members.remove(organizationId, readAccountId(req.accountId));
      await parts.credentialsChanged();
      return {};
    },

    // ------------------------------------------------------------ gateways and consumers

    async listGatewayKeys(req, ctx) {
      const keys = await gateways.listGatewayKeys(operatorOf(ctx).organizationId, { includeRevoked: req.includeRevoked });
      return { gatewayKeys: keys.map(toGatewayKey) };
    },

    async createGatewayKey(req, ctx) {
      const created = await gateways.createGatewayKey({ organizationId: operatorOf(ctx).organizationId, name: req.name });
      return { gatewayKey: toGatewayKey(created.key), key: created.gatewayKey };
    },

    async revokeGatewayKey(req, ctx) {
      await gateways.revokeGatewayKey(operatorOf(ctx).organizationId, req.gatewayKeyId);
      return {};
    },

    async listConnectedGateways(_req, ctx) {
      return { gateways: (await gateways.listConnectedGateways(operatorOf(ctx).organizationId)).map(toConnectedGateway) };
    },

    async listConsumerKeys(req, ctx) {
      const consumers = await gateways.listConsumerKeys(operatorOf(ctx).organizationId, { includeRevoked: req.includeRevoked });
      return { consumers: consumers.map(toConsumer) };
    },

    async createConsumerKey(req, ctx) {
      const created = await gateways.createConsumerKey({ organizationId: operatorOf(ctx).organizationId, name: req.name });
      return { consumer: toConsumer(created.consumer), key: created.consumerKey };
    },

    async revokeConsumerKey(req, ctx) {
      await gateways.revokeConsumerKey(operatorOf(ctx).organizationId, req.consumerId);
      return {};
    },
  };
}

function readAccountId(raw: string): string {
  return readId(raw, "account_id");
}

function readId(raw: string, field: string): string {
  const violations: Violation[] = [];
  const id = readUuid(raw, field, violations);
  if (violations.length > 0) throw invalidArgument(violations);
  return id;
}
