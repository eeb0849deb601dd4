import type { JsonObject } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { Role as RoleEnum } from "../../../gen/svc/v1/auth_pb.js";
import { type DashboardAuthService, SignInState } from "../../../gen/svc/v1/dashboard_auth_pb.js";
import { DomainError } from "../../domain/errors.js";
import { ceremonyTtlSeconds } from "../../domain/passkeys/passkey-rules.js";
import { clientAddressKey } from "../../server/call.js";
import type { Invitations } from "../operators/invitations.js";
import type { OperatorPasskeys } from "../operators/operator-passkeys.js";
import type { OperatorSessions, StartedSession } from "../operators/operator-sessions.js";
import type { OperatorSignInLinks } from "../operators/operator-sign-in-links.js";
import {
  clearedPasskeyChallengeCookie,
  clearedSessionCookie,
  passkeyChallengeCookie,
  readPasskeyChallengeCookie,
  readSessionCookie,
  sessionCookie,
} from "./session-cookie.js";

export interface DashboardAuthServiceDeps {
  sessions: OperatorSessions;
  passkeys: OperatorPasskeys;
  invitations: Pick<Invitations, "inspect" | "createAccount">;
  /** One-time sign-in links issued by an operator command. */
  links: Pick<OperatorSignInLinks, "signIn">;
  /** PUBLIC_URL: names the cookies (`__Host-` over https) and makes them Secure. */
  publicUrl: string;
}

const signInStates = {
  signed_out: SignInState.SIGNED_OUT,
  ended: SignInState.ENDED,
  signed_in: SignInState.SIGNED_IN,
} as const;

/** WebAuthn options of @simplewebauthn/server as a google.protobuf.Struct (JSON without undefined members). */
function asStruct(options: object): JsonObject {
  return JSON.parse(JSON.stringify(options)) as JsonObject;
}

/**
 * svc.v1.DashboardAuthService: the dashboard's sign-in, setup, invitation and
 * sign-out RPCs, served by the pipeline like every RPC (the request guard has
 * checked the origin and the dashboard header before they run). What is
 * HTTP-specific about them is here: the session token and the passkey
 * challenge handle travel as cookies, set and cleared with Set-Cookie on the
 * answer (ctx.responseHeader), which is never cached.
 */
export function createDashboardAuthService(deps: DashboardAuthServiceDeps): ServiceImpl<typeof DashboardAuthService> {
  const { publicUrl } = deps;
  const maxAge = () => deps.sessions.lifetimes.maxSeconds;

  /** Answers carry cookies and account data: no cache may keep them (RFC 9111, "no-store"). */
  function noStore(ctx: HandlerContext): Headers {
    ctx.responseHeader.set("cache-control", "no-store");
    return ctx.responseHeader;
  }

  function cookieHeader(ctx: HandlerContext): string | null {
    return ctx.requestHeader.get("cookie");
  }

  /**
   * Work a caller can ask for before it is anyone (password checks, token
   * look-ups, ceremonies) runs inside the per-client-address limits, before
   * any hashing (OperatorSessions.guard).
   */
  function guarded<T>(ctx: HandlerContext, fn: (clientAddress: string | undefined) => Promise<T>): Promise<T> {
    const clientAddress = ctx.values.get(clientAddressKey);
    return deps.sessions.guard(clientAddress, () => fn(clientAddress));
  }

  function signedIn(ctx: HandlerContext, started: StartedSession) {
    noStore(ctx).append("set-cookie", sessionCookie(started.token, publicUrl, maxAge()));
    return { accountId: started.accountId, expiresAt: timestampFromDate(started.expiresAt) };
  }

  return {
    async getSignInState(_req, ctx) {
      noStore(ctx);
      const state = await deps.sessions.signInState(readSessionCookie(cookieHeader(ctx), publicUrl));
      return { state: signInStates[state] };
    },

    async inspectSetupLink(req, ctx) {
      noStore(ctx);
      const found = await guarded(ctx, () => deps.sessions.inspectSetupLink({ token: req.token }));
      return { email: found.email, displayName: found.displayName };
    },

    async setUpAccount(req, ctx) {
      noStore(ctx);
      const started = await guarded(ctx, () =>
        deps.sessions.setUp({ token: req.token, email: req.email, displayName: req.displayName, password: req.password }),
      );
      return signedIn(ctx, started);
    },

    async signIn(req, ctx) {
      noStore(ctx);
      const started = await guarded(ctx, (clientAddress) =>
        deps.sessions.signIn({ email: req.email, password: req.password, clientAddress }),
      );
      return signedIn(ctx, started);
    },

    async signInWithLink(req, ctx) {
      noStore(ctx);
      return signedIn(ctx, await guarded(ctx, () => deps.links.signIn(deps.sessions, { token: req.token })));
    },

    async beginPasskeySignIn(req, ctx) {
      noStore(ctx);
      const begun = await guarded(ctx, () => deps.passkeys.beginSignIn({ email: req.email }));
      ctx.responseHeader.append("set-cookie", passkeyChallengeCookie(begun.token, publicUrl, ceremonyTtlSeconds));
      return { options: asStruct(begun.options), expiresAt: timestampFromDate(begun.expiresAt) };
    },

    async finishPasskeySignIn(req, ctx) {
      noStore(ctx);
      const token = readPasskeyChallengeCookie(cookieHeader(ctx), publicUrl);
      let started: StartedSession;
      try {
        started = await guarded(ctx, () => deps.passkeys.finishSignIn({ token, credential: req.credential }));
      } catch (error) {
        // A refused answer spent the challenge (or found none): the cookie is of no more use.
        if (token !== null && error instanceof DomainError && error.kind === "unauthenticated") {
          ctx.responseHeader.append("set-cookie", clearedPasskeyChallengeCookie(publicUrl));
        }
        throw error;
      }
      const answer = signedIn(ctx, started);
      ctx.responseHeader.append("set-cookie", clearedPasskeyChallengeCookie(publicUrl));
      return answer;
    },

    async signOut(_req, ctx) {
      noStore(ctx);
      await deps.sessions.signOut(readSessionCookie(cookieHeader(ctx), publicUrl));
      ctx.responseHeader.append("set-cookie", clearedSessionCookie(publicUrl));
      return {};
    },

    async inspectInvitation(req, ctx) {
      noStore(ctx);
      const found = await guarded(ctx, () => deps.invitations.inspect({ token: req.token }));
      return {
        organizationName: found.organizationName,
        email: found.email,
        displayName: found.displayName,
        role: found.role === "admin" ? RoleEnum.ADMIN : RoleEnum.MEMBER,
        invitedBy: found.invitedBy,
        expiresAt: timestampFromDate(found.expiresAt),
      };
    },

    async createInvitedAccount(req, ctx) {
      noStore(ctx);
      const created = await guarded(ctx, () =>
        deps.invitations.createAccount({ token: req.token, displayName: req.displayName, password: req.password }),
      );
      return { ...signedIn(ctx, created), organizationId: created.organizationId };
    },
  };
}
