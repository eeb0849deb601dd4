import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { IdentityService } from "../../gen/svc/v1/identity_pb.js";
import type { AppDeps } from "../app-deps.js";
import { DomainError, invalidArgument } from "../domain/errors.js";
import { gatewayChangePayload, gatewayTopic } from "../domain/gateway/gateway-changes.js";
import { createIdentity, type Caller, type Identity, type SignedIn } from "../domain/identity/identity.js";
import { createSessionIssuer, type SessionIssuer } from "../domain/identity/sessions.js";
import { principalKey } from "../interceptors/auth.js";
import { peerAddressHeader, type ExtraRoute } from "../server/http-server.js";
import type { Notify } from "../storage/change-feed.js";
import { createIdentityStore, type IdentityStore } from "../storage/identity-store.js";
import { createPasskeyRpcs } from "./passkey-rpcs.js";

type IdentityDeps = Pick<
  AppDeps,
  "config" | "database" | "clock" | "random" | "keyring" | "logger" | "passwordHasher" | "changeFeed" | "onClose"
>;

/** Change-feed topic of session signing keys; payload: the organisation whose key changed. */
const signingKeysTopic = "session_signing_keys";

/**
 * The identity store, announcing to gateways' streams what they hold: revoked
 * sessions (of one organisation) and signing keys (of the platform). `notify`
 * is the transaction's (the notice goes out at commit); without one, the write
 * has committed and the notice goes out at once.
 */
function announcing(store: IdentityStore, feed: AppDeps["changeFeed"], notify?: Notify): IdentityStore {
  const announce = async (organizationId: string, kind: "sessions" | "signing_keys") => {
    const payload = gatewayChangePayload(organizationId, kind);
    if (notify) notify(gatewayTopic, payload);
    else await feed.transaction(async (_tx, send) => send(gatewayTopic, payload));
  };
  return {
    ...store,
    async revokeSession(organizationId, id, at) {
      const revoked = await store.revokeSession(organizationId, id, at);
      if (revoked) await announce(organizationId, "sessions");
      return revoked;
    },
    async revokeSessionsOf(organizationId, identityId, except, at) {
      const count = await store.revokeSessionsOf(organizationId, identityId, except, at);
      if (count > 0) await announce(organizationId, "sessions");
      return count;
    },
  };
}

const built = new WeakMap<IdentityDeps, Identity>();

/**
 * The identity domain of one app, built once per AppDeps and shared by the
 * IdentityService handlers, the JWKS route, the passkey ceremonies and the
 * sample plant API (which verifies sessions with `.sessions.verifySessionToken`).
 */
export function identityFor(deps: IdentityDeps): Identity {
  let identity = built.get(deps);
  if (!identity) {
    const feed = deps.changeFeed;
    const store = announcing(createIdentityStore(deps.database.client, deps.database.sql), feed);
    const onError = (error: unknown) => deps.logger.warn({ err: error }, "identity housekeeping failed");
    const sessions = createSessionIssuer({
      store,
      transaction: (fn) =>
        deps.changeFeed.transaction((tx, notify) =>
          fn(createIdentityStore(tx), (organizationId) => {
            notify(signingKeysTopic, organizationId);
            // Gateways follow the JWKS through their stream.
            notify(gatewayTopic, gatewayChangePayload(organizationId, "signing_keys"));
          }),
        ),
      keyring: deps.keyring,
      clock: deps.clock,
      issuer: deps.config.publicUrl,
    });
    // A rotation on another instance (or by the CLI on PostgreSQL): sign with the new key from the next sign-in.
    const rotations = deps.changeFeed.subscribe(signingKeysTopic, (event) =>
      sessions.keyChanged(event.kind === "gap" ? undefined : event.payload),
    );
    deps.onClose(() => rotations.close());
    identity = createIdentity({
      store,
      transaction: (fn) => feed.transaction((tx, notify) => fn(announcing(createIdentityStore(tx), feed, notify))),
      sessions,
      hasher: deps.passwordHasher,
      clock: deps.clock,
      random: deps.random,
      publicUrl: deps.config.publicUrl,
      onError,
      signInLimits: deps.config.signIn,
    });
    built.set(deps, identity);
  }
  return identity;
}

/** The session issuer and verifier of one app (see identityFor). */
export function sessionsFor(deps: IdentityDeps): SessionIssuer {
  return identityFor(deps).sessions;
}

/** GET /.well-known/jwks.json: the public keys that verify session tokens (RFC 7517). */
export function createJwksRoute(deps: IdentityDeps): ExtraRoute {
  return {
    label: "/.well-known/jwks.json",
    matches: (method, path) => (method === "GET" || method === "HEAD") && path === "/.well-known/jwks.json",
    // Public keys: a page on any origin may verify a session token with them (docs/security.md "The platform API").
    crossOrigin: { path: "/.well-known/jwks.json", methods: ["GET", "HEAD"] },
    async handle(req, res) {
      req.resume();
      const body = JSON.stringify(await sessionsFor(deps).publishedKeys());
      res.writeHead(200, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body),
        // A new key is used at once; verifiers refetch on an unknown kid.
        "cache-control": "public, max-age=300",
        // On every answer, Origin or not: a shared cache may hand this one to a page of another origin.
        "access-control-allow-origin": "*",
      });
      res.end(req.method === "HEAD" ? undefined : body);
    },
  };
}

/** The caller of a client-side or backend identity RPC, as the auth interceptor established it. */
function callerOf(ctx: HandlerContext): Caller {
  const principal = ctx.values.get(principalKey);
  // A gateway key reaches only ValidateSession (its auth rule), as a backend of its organisation.
  if (principal.kind !== "publishable_key" && principal.kind !== "secret_key" && principal.kind !== "gateway_key") {
    throw new DomainError("permission_denied", "wrong_credential_kind", "identity operations need a publishable or secret key");
  }
  return {
    organizationId: principal.organizationId,
    credential: principal.kind === "publishable_key" ? "publishable" : "secret",
    address: ctx.requestHeader.get(peerAddressHeader) ?? undefined,
  };
}

/**
 * The /v1 alternate paths name the identifier `email` (register) or `username`
 * (login): violations use the name the client sent.
 */
async function withFieldNames<T>(ctx: HandlerContext, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    const alias = aliasOf(ctx.url);
    if (!(error instanceof DomainError) || error.kind !== "invalid_argument" || !alias || error.violations.length === 0) throw error;
    throw invalidArgument(
      error.violations.map((v) => (v.field === "identifier" ? { ...v, field: alias } : v)),
      error.reason,
    );
  }
}

function aliasOf(url: string): string | undefined {
  let path: string;
  try {
    path = new URL(url, "http://gatehouse.invalid").pathname;
  } catch {
    return undefined;
  }
  if (path === "/v1/identity/register") return "email";
  if (path === "/v1/identity/login") return "username";
  return undefined;
}

function signedIn(result: SignedIn) {
  return {
    identityId: result.identityId,
    session: { token: result.session.token, expiresAt: timestampFromDate(result.session.expiresAt) },
  };
}

/**
 * svc.v1.IdentityService: passwords, magic links, password reset and sessions;
 * the passkey RPCs (BeginPasskeyRegistration ... RemovePasskey, in
 * passkey-rpcs.ts) reuse identityFor(deps): signIn, settingsOf, limitClient.
 */
export function createIdentityService(deps: AppDeps): Partial<ServiceImpl<typeof IdentityService>> {
  const identity = identityFor(deps);
  return {
    ...createPasskeyRpcs(deps, { identity, callerOf }),

    registerPassword: (req, ctx) =>
      withFieldNames(ctx, async () =>
        signedIn(await identity.registerPassword(callerOf(ctx), { identifier: req.identifier, password: req.password })),
      ),

    loginPassword: (req, ctx) =>
      withFieldNames(ctx, async () =>
        signedIn(await identity.loginPassword(callerOf(ctx), { identifier: req.identifier, password: req.password })),
      ),

    async resetPassword(req, ctx) {
      return identity.resetPassword(callerOf(ctx), {
        identityId: req.identityId,
        newPassword: req.newPassword,
        sessionToken: req.sessionToken,
      });
    },

    async requestPasswordReset(req, ctx) {
      const issued = await identity.requestPasswordReset(callerOf(ctx), { identifier: req.identifier });
      return { token: issued.token, expiresAt: timestampFromDate(issued.expiresAt) };
    },

    async completePasswordReset(req, ctx) {
      return identity.completePasswordReset(callerOf(ctx), { token: req.token, newPassword: req.newPassword });
    },

    async generateMagicLink(req, ctx) {
      const issued = await identity.generateMagicLink(callerOf(ctx), { identifier: req.identifier });
      return { token: issued.token, expiresAt: timestampFromDate(issued.expiresAt) };
    },

    async verifyMagicLink(req, ctx) {
      return signedIn(await identity.verifyMagicLink(callerOf(ctx), { token: req.token }));
    },

    async validateSession(req, ctx) {
      const session = await identity.validateSession(callerOf(ctx), { token: req.token });
      return { identityId: session.identityId, sessionId: session.sessionId, expiresAt: timestampFromDate(session.expiresAt) };
    },

    async revokeSession(req, ctx) {
      await identity.revokeSession(callerOf(ctx), { sessionId: req.sessionId });
      return {};
    },
  };
}
