import { create, getOption, type DescMethod } from "@bufbuild/protobuf";
import { createContextKey, type Interceptor } from "@connectrpc/connect";
import { auth, AuthRuleSchema, Credential, Role as RoleEnum, type AuthRule } from "../../gen/svc/v1/auth_pb.js";
import type { Clock } from "../domain/clock.js";
import { DomainError } from "../domain/errors.js";
import { constantTimeEqual, hashToken, isCredentialShaped } from "../crypto/tokens.js";
import type { GatewayStore } from "../domain/gateway/gateway-store.js";
import type { Role, TenancyStore } from "../domain/tenancy/tenancy-store.js";
import type { CredentialCache } from "./credential-cache.js";

/** Who is calling, established by the auth interceptor before any handler runs. */
export type Principal =
  | { kind: "anonymous" }
  | {
      kind: "api_key";
      accountId: string;
      apiKeyId: string;
      /** Human-readable actor for audit trails. */
      actor: string;
      /** Set when the RPC names an organisation: the organisation and the account's role there. */
      organizationId: string;
      role: Role;
    }
  | { kind: "publishable_key" | "secret_key"; organizationId: string; keyId: string; actor: string }
  /** A data-plane gateway: the organisation of its key, always (another organisation named is 404). */
  | { kind: "gateway_key"; organizationId: string; keyId: string; actor: string }
  | { kind: "dashboard"; accountId: string; sessionId: string; actor: string; organizationId: string; role: Role };

/** The one thing authentication reads from a request's headers. */
export type HeaderReader = Pick<Headers, "get">;

export const principalKey = createContextKey<Principal>({ kind: "anonymous" }, { description: "authenticated caller" });

/** A hook for dashboard sessions (cookie), provided by the dashboard module. */
export type DashboardAuthenticator = (
  header: HeaderReader,
  organizationId: string | undefined,
) => Promise<Extract<Principal, { kind: "dashboard" }>>;

export interface AuthenticatorDeps {
  store: Pick<TenancyStore, "findApiKeyPrincipal" | "findOrganizationKeyByHash" | "touchApiKey" | "touchOrganizationKey">;
  /** Gateway keys (gw_); without it, every gateway key is unknown. */
  gatewayKeys?: Pick<GatewayStore, "findGatewayKeyByHash" | "touchGatewayKey">;
  clock: Clock;
  dashboard?: DashboardAuthenticator;
  /** Keeps what authentication read about a credential briefly; without it every request reads the database. */
  cache?: Pick<CredentialCache, "lookup">;
  /**
   * Verifies a session token (ES256 JWT) presented as a bearer credential,
   * throwing unauthenticated when it is not a live session of this platform:
   * no RPC takes one, so a valid one is refused as the wrong kind.
   */
  sessionToken?: (token: string) => Promise<unknown>;
  /** Called when recording last use fails; never blocks or fails the request. */
  onTouchError?: (error: unknown) => void;
}

const lastUseResolutionMs = 60_000;
/** Three base64url segments, the first a JSON object (`eyJ`): the shape of a JWT (RFC 7519). */
const jwtShape = /^eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;
const ruleCache = new WeakMap<DescMethod, AuthRule>();

/** Rules of standard services whose proto we do not own (they cannot carry our option). */
const standardServiceRules: Record<string, AuthRule> = {
  "grpc.health.v1.Health": create(AuthRuleSchema, { credentials: [Credential.NONE] }),
  // Reflection reveals only the public schema, so it answers without a credential (docs/api.md, "Protocols: one
  // implementation, several front doors").
  "grpc.reflection.v1.ServerReflection": create(AuthRuleSchema, { credentials: [Credential.NONE] }),
  "grpc.reflection.v1alpha.ServerReflection": create(AuthRuleSchema, { credentials: [Credential.NONE] }),
};

/** The AuthRule declared on the RPC in proto (option (svc.v1.auth)). */
export function authRuleOf(method: DescMethod): AuthRule {
  let rule = ruleCache.get(method);
  if (!rule) {
    rule = standardServiceRules[method.parent.typeName] ?? getOption(method, auth);
    if (rule.credentials.length === 0) {
      throw new Error(`${method.parent.typeName}/${method.name} declares no (svc.v1.auth) rule`);
    }
    ruleCache.set(method, rule);
  }
  return rule;
}

/**
 * Whether a web page may call the RPC from another origin (CORS): it accepts
 * the publishable key, the one credential safe in a browser, even where it
 * accepts a secret key as well. Read from the RPC's declared rule, like
 * everything else about who may call it (docs/security.md "The platform API").
 */
export function acceptsPublishableKey(method: DescMethod): boolean {
  return authRuleOf(method).credentials.includes(Credential.PUBLISHABLE_KEY);
}

const credentialNames: Record<Credential, string> = {
  [Credential.UNSPECIFIED]: "none",
  [Credential.NONE]: "none",
  [Credential.API_KEY]: "an API key (gk_...)",
  [Credential.PUBLISHABLE_KEY]: "a publishable key (pk_...)",
  [Credential.SECRET_KEY]: "a secret key (sk_...)",
  [Credential.DASHBOARD_SESSION]: "a dashboard session",
  [Credential.GATEWAY_KEY]: "a gateway key (gw_...)",
};

function unauthenticated(reason: string, message: string): DomainError {
  return new DomainError("unauthenticated", reason, message);
}

/**
 * Establishes the principal of a request from its Authorization header and the
 * RPC's declared rule. Order of checks (docs/api.md, "Credentials and roles"): a missing,
 * malformed, unknown or revoked credential is 401; a valid credential of the
 * wrong kind is 403; an organisation that does not exist or that the account is
 * not a member of is 404; an insufficient role is 403.
 */
export function createAuthenticator(deps: AuthenticatorDeps) {
  // The record may be a cached one: it carries the last use this instance recorded.
  const touch = (record: { lastUsedAt: Date | null }, now: Date, write: () => Promise<void>) => {
    const last = record.lastUsedAt;
    if (last && now.getTime() - last.getTime() < lastUseResolutionMs) return;
    record.lastUsedAt = now;
    write().catch((error: unknown) => deps.onTouchError?.(error));
  };
  const cached = <T extends object>(key: string, load: () => Promise<T | null>, keep: (value: T) => boolean) =>
    deps.cache ? deps.cache.lookup(key, load, keep) : load();

  async function authenticate(method: DescMethod, header: HeaderReader, message: unknown): Promise<Principal> {
    const rule = authRuleOf(method);
    if (rule.credentials.includes(Credential.NONE)) return { kind: "anonymous" };
    const organizationId = readOrganizationId(message);

    const authorization = header.get("authorization");
    if (authorization === null || authorization.trim() === "") {
      if (rule.credentials.includes(Credential.DASHBOARD_SESSION) && deps.dashboard) {
        const principal = await deps.dashboard(header, organizationId);
        requireRole(rule.role, principal.role);
        return principal;
      }
      throw unauthenticated(
        "credential_missing",
        `missing credential: send "Authorization: Bearer <key>" with ${rule.credentials.map((c) => credentialNames[c]).join(" or ")}`,
      );
    }
    const match = /^Bearer[ ]+(\S+)\s*$/i.exec(authorization);
    const credential = match?.[1];
    if (credential && deps.sessionToken && jwtShape.test(credential)) {
      // A session token where a key is needed: a valid one is the wrong kind of credential (403);
      // anything else is not a credential of this platform (401, with the reason verification gave).
      await deps.sessionToken(credential);
      throw wrongKind(rule, "a session token");
    }
    if (!credential || !isCredentialShaped(credential)) {
      throw unauthenticated(
        "credential_malformed",
        'malformed credential: expected "Authorization: Bearer <key>" where the key is gk_, pk_, sk_ or gw_ followed by 43 base64url characters',
      );
    }
    const hash = hashToken(credential);
    const now = deps.clock();
    const kind = credential.slice(0, 2);

    if (kind === "gk") {
      // Every API-key RPC names an organisation; an absent or empty id matches no membership (404).
      const org = organizationId ?? "";
      const key = await cached(
        `${hash} ${org}`,
        () => deps.store.findApiKeyPrincipal(hash, org),
        (k) => k.role !== null && !k.revokedAt && !k.accountDisabledAt,
      );
      if (!key || !constantTimeEqual(key.hash, hash)) throw unauthenticated("credential_unknown", "unknown API key");
      if (key.revokedAt || key.accountDisabledAt) throw unauthenticated("credential_revoked", "this API key has been revoked");
      if (!rule.credentials.includes(Credential.API_KEY)) throw wrongKind(rule, "an API key");
      touch(key, now, () => deps.store.touchApiKey(key.id, now));
      if (organizationId === undefined || key.role === null) throw organizationNotFound(organizationId ?? "");
      requireRole(rule.role, key.role);
      return {
        kind: "api_key",
        accountId: key.accountId,
        apiKeyId: key.id,
        actor: `${key.accountName} (${key.prefix}…)`,
        organizationId,
        role: key.role,
      };
    }

    if (kind === "gw") {
      // A gateway key names its organisation; a request naming another one is 404, like an API key's non-membership.
      const gatewayKeys = deps.gatewayKeys;
      const key = gatewayKeys
        ? await cached(
            hash,
            () => gatewayKeys.findGatewayKeyByHash(hash),
            (k) => !k.revokedAt,
          )
        : null;
      if (!gatewayKeys || !key || !constantTimeEqual(key.hash, hash)) throw unauthenticated("credential_unknown", "unknown gateway key");
      if (key.revokedAt) throw unauthenticated("credential_revoked", "this gateway key has been revoked");
      if (!rule.credentials.includes(Credential.GATEWAY_KEY)) throw wrongKind(rule, "a gateway key");
      if (organizationId && organizationId !== key.organizationId) throw organizationNotFound(organizationId);
      touch(key, now, () => gatewayKeys.touchGatewayKey(key.id, now));
      return { kind: "gateway_key", organizationId: key.organizationId, keyId: key.id, actor: `gateway key ${key.name} (${key.prefix}…)` };
    }

    const key = await cached(
      hash,
      () => deps.store.findOrganizationKeyByHash(hash),
      (k) => !k.revokedAt,
    );
    const expected = kind === "pk" ? "publishable" : "secret";
    if (!key || key.kind !== expected || !constantTimeEqual(key.hash, hash)) {
      throw unauthenticated("credential_unknown", `unknown ${expected} key`);
    }
    if (key.revokedAt) throw unauthenticated("credential_revoked", `this ${expected} key has been revoked`);
    const accepted = expected === "publishable" ? Credential.PUBLISHABLE_KEY : Credential.SECRET_KEY;
    if (!rule.credentials.includes(accepted)) throw wrongKind(rule, `a ${expected} key`);
    touch(key, now, () => deps.store.touchOrganizationKey(key.id, now));
    return {
      kind: expected === "publishable" ? "publishable_key" : "secret_key",
      organizationId: key.organizationId,
      keyId: key.id,
      actor: `${expected} key ${key.prefix}…`,
    };
  }

  return { authenticate };
}

export type Authenticator = ReturnType<typeof createAuthenticator>;

function wrongKind(rule: AuthRule, presented: string): DomainError {
  return new DomainError(
    "permission_denied",
    "wrong_credential_kind",
    `${presented} cannot call this operation: it needs ${rule.credentials.map((c) => credentialNames[c]).join(" or ")}`,
  );
}

function organizationNotFound(organizationId: string): DomainError {
  return new DomainError(
    "not_found",
    "organization_not_found",
    `organisation "${organizationId}" does not exist or this key's account is not a member of it`,
  );
}

function requireRole(needed: RoleEnum, role: Role): void {
  if (needed === RoleEnum.ADMIN && role !== "admin") {
    throw new DomainError("permission_denied", "role_insufficient", "this operation needs the admin role in the organisation");
  }
}

function readOrganizationId(message: unknown): string | undefined {
  if (message && typeof message === "object" && "organizationId" in message) {
    const value = (message as { organizationId: unknown }).organizationId;
    if (typeof value === "string") return value;
  }
  return undefined;
}

/**
 * The auth interceptor: every door runs it (the pipeline's chain), before the
 * implementation, with the RPC's declared rule. Streaming RPCs name their
 * organisation in their first request message, which is read here and handed on.
 */
export function createAuthInterceptor(authenticator: Authenticator): Interceptor {
  return (next) => async (req) => {
    if (!req.stream) {
      req.contextValues.set(principalKey, await authenticator.authenticate(req.method, req.header, req.message));
      return next(req);
    }
    if (authRuleOf(req.method).credentials.includes(Credential.NONE)) {
      req.contextValues.set(principalKey, { kind: "anonymous" });
      return next(req);
    }
    const iterator = req.message[Symbol.asyncIterator]();
    const first = await iterator.next();
    const firstMessage: unknown = first.done ? undefined : first.value;
    req.contextValues.set(principalKey, await authenticator.authenticate(req.method, req.header, firstMessage));
    const replay = (async function* () {
      if (!first.done) yield first.value;
      for (let item = await iterator.next(); !item.done; item = await iterator.next()) yield item.value;
    })();
    // Every field by name: the request may be a class whose fields are not all its own (see the pipeline's CallRequest).
    return next({
      stream: true,
      service: req.service,
      method: req.method,
      requestMethod: req.requestMethod,
      url: req.url,
      signal: req.signal,
      header: req.header,
      contextValues: req.contextValues,
      message: replay,
    });
  };
}
