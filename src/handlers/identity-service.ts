import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { IdentityService } from "../../gen/svc/v1/identity_pb.js";
import { DomainError, invalidArgument } from "../domain/errors.js";
import type { Caller, Identity, SignedIn } from "../domain/identity/identity.js";
import type { SessionIssuer } from "../domain/identity/sessions.js";
import type { Passkeys } from "../domain/passkeys/passkeys.js";
import { principalKey } from "../interceptors/auth.js";
import { peerAddressHeader, type ExtraRoute } from "../server/http-server.js";
import { createPasskeyRpcs } from "./passkey-rpcs.js";

export interface IdentityServiceParts {
  /** The identity domain (src/composition/identity.ts). */
  identity: Identity;
  /** The WebAuthn ceremonies (src/composition/passkeys.ts). */
  passkeys: Passkeys;
}

/** GET /.well-known/jwks.json: the public keys that verify session tokens (RFC 7517). */
export function createJwksRoute(sessions: Pick<SessionIssuer, "publishedKeys">): ExtraRoute {
  return {
    label: "/.well-known/jwks.json",
    matches: (method, path) => (method === "GET" || method === "HEAD") && path === "/.well-known/jwks.json",
    // Public keys: a page on any origin may verify a session token with them (docs/security.md "The platform API").
    crossOrigin: { path: "/.well-known/jwks.json", methods: ["GET", "HEAD"] },
    async handle(req, res) {
      req.resume();
      const body = JSON.stringify(await sessions.publishedKeys());
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
 * passkey-rpcs.ts) map onto the passkeys domain.
 */
export function createIdentityService(parts: IdentityServiceParts): Partial<ServiceImpl<typeof IdentityService>> {
  const { identity } = parts;
  return {
    ...createPasskeyRpcs({ passkeys: parts.passkeys, callerOf }),

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

    async deleteIdentity(req, ctx) {
      const deleted = await identity.deleteIdentity(callerOf(ctx).organizationId, { identityId: req.identityId });
      return { revokedSessions: deleted.revokedSessions };
    },
  };
}
