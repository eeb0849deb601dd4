import type { IncomingMessage, ServerResponse } from "node:http";
import { DomainError, invalidArgument, type Violation } from "../domain/errors.js";
import { ceremonyTtlSeconds } from "../domain/passkeys/passkey-rules.js";
import { toConnectError, type ErrorLogger } from "../interceptors/errors.js";
import { restStatusOf } from "../rest/status.js";
import { mediaTypeOf, readBody } from "../server/http-body.js";
import { peerAddressHeader, type ExtraRoute } from "../server/http-server.js";
import { headerReader } from "../server/http-source.js";
import { writeConnectError } from "../server/write-error.js";
import type { Invitations } from "./invitations.js";
import type { OperatorPasskeys } from "./operator-passkeys.js";
import type { OperatorSessions, StartedSession } from "./operator-sessions.js";
import type { OperatorSignInLinks } from "./operator-sign-in-links.js";
import { checkSameOrigin } from "./request-guard.js";
import {
  clearedPasskeyChallengeCookie,
  clearedSessionCookie,
  passkeyChallengeCookie,
  readPasskeyChallengeCookie,
  readSessionCookie,
  sessionCookie,
} from "./session-cookie.js";

export interface DashboardAuthRoutesDeps {
  sessions: OperatorSessions;
  passkeys: OperatorPasskeys;
  invitations: Pick<Invitations, "inspect" | "createAccount">;
  links: OperatorSignInLinks;
  publicUrl: string;
  logError: ErrorLogger;
}

/** Bodies of these endpoints are a few short fields (or one WebAuthn response). */
const maxBodyBytes = 16 * 1024;

type Action =
  | "setup/inspect"
  | "setup"
  | "invitation/inspect"
  | "invitation/create-account"
  | "sign-in"
  | "sign-in/link"
  | "sign-out"
  | "passkey/begin"
  | "passkey/finish";
const actions = new Set<string>([
  "setup/inspect",
  "setup",
  "invitation/inspect",
  "invitation/create-account",
  "sign-in",
  "sign-in/link",
  "sign-out",
  "passkey/begin",
  "passkey/finish",
]);
const prefix = "/dashboard/auth/";

/**
 * The dashboard's cookie endpoints, outside DashboardService because they run
 * before there is a session (every DashboardService RPC needs one):
 *
 * - `POST /dashboard/auth/setup/inspect` `{token}` -> `{email, display_name}`
 * - `POST /dashboard/auth/setup` `{token, email, display_name, password}` -> `{account_id, expires_at}` + session cookie
 *   (an organisation owner's one-time setup link from `gatehouse init` / `gatehouse orgs create`)
 * - `POST /dashboard/auth/invitation/inspect` `{token}` ->
 *   `{organization_name, email, display_name, role, invited_by, expires_at}` (nothing is spent)
 * - `POST /dashboard/auth/invitation/create-account` `{token, display_name, password}` ->
 *   `{account_id, organization_id, expires_at}` + session cookie: creates the account of the
 *   invitation's address and accepts that invitation (an existing account signs in and
 *   calls DashboardService.AcceptInvitation instead)
 * - `POST /dashboard/auth/sign-in` `{email, password}` -> `{account_id, expires_at}` + session cookie
 * - `POST /dashboard/auth/sign-in/link` `{token}` (of a one-time sign-in link) -> `{account_id, expires_at}` + session cookie
 * - `POST /dashboard/auth/passkey/begin` `{email?}` -> `{options, expires_at}` (PublicKeyCredentialRequestOptionsJSON)
 *   + a challenge cookie that binds the ceremony to this browser
 * - `POST /dashboard/auth/passkey/finish` `{credential}` (AuthenticationResponseJSON) with that cookie
 *   -> `{account_id, expires_at}` + session cookie (the challenge cookie removed)
 * - `POST /dashboard/auth/sign-out` -> `{}` and the cookie removed
 *
 * Each needs JSON, the `X-Gatehouse-Dashboard: 1` header and an `Origin` of
 * PUBLIC_URL (no login CSRF); errors have the Connect JSON error body. Every
 * one but sign-out runs under the per-client-address limits
 * (OperatorSessions.guard), before any hashing.
 */
export function createDashboardAuthRoute(deps: DashboardAuthRoutesDeps): ExtraRoute {
  const origin = new URL(deps.publicUrl).origin;

  async function run(action: Action, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const refused = checkSameOrigin(headerReader(req.headers), origin);
    if (refused) {
      req.resume();
      throw refused;
    }
    if (action === "sign-out") {
      req.resume();
      await deps.sessions.signOut(readSessionCookie(headerReader(req.headers).get("cookie"), deps.publicUrl));
      return answer(res, 200, {}, [clearedSessionCookie(deps.publicUrl)]);
    }
    const clientAddress = headerReader(req.headers).get(peerAddressHeader) ?? undefined;
    await deps.sessions.guard(clientAddress, () => signInStep(action, req, res, clientAddress));
  }

  async function signInStep(action: Action, req: IncomingMessage, res: ServerResponse, clientAddress: string | undefined): Promise<void> {
    const body = await readJson(req, action === "passkey/finish" ? ["credential"] : []);
    if (action === "passkey/begin") {
      const begun = await deps.passkeys.beginSignIn({ email: text(body, "email") });
      return answer(res, 200, { options: begun.options, expires_at: begun.expiresAt.toISOString() }, [
        passkeyChallengeCookie(begun.token, deps.publicUrl, ceremonyTtlSeconds),
      ]);
    }
    if (action === "setup/inspect") {
      const found = await deps.sessions.inspectSetupLink({ token: text(body, "token") });
      return answer(res, 200, { email: found.email, display_name: found.displayName });
    }
    if (action === "invitation/inspect") {
      const found = await deps.invitations.inspect({ token: text(body, "token") });
      return answer(res, 200, {
        organization_name: found.organizationName,
        email: found.email,
        display_name: found.displayName,
        role: found.role,
        invited_by: found.invitedBy,
        expires_at: found.expiresAt.toISOString(),
      });
    }
    if (action === "invitation/create-account") {
      const created = await deps.invitations.createAccount({
        token: text(body, "token"),
        displayName: text(body, "display_name"),
        password: text(body, "password"),
      });
      const cookie = sessionCookie(created.token, deps.publicUrl, deps.sessions.lifetimes.maxSeconds);
      return answer(
        res,
        200,
        { account_id: created.accountId, organization_id: created.organizationId, expires_at: created.expiresAt.toISOString() },
        [cookie],
      );
    }
    let started: StartedSession;
    if (action === "setup") {
      started = await deps.sessions.setUp({
        token: text(body, "token"),
        email: text(body, "email"),
        displayName: text(body, "display_name"),
        password: text(body, "password"),
      });
    } else if (action === "passkey/finish") {
      const token = readPasskeyChallengeCookie(headerReader(req.headers).get("cookie"), deps.publicUrl);
      try {
        started = await deps.passkeys.finishSignIn({ token, credential: body.credential });
      } catch (error) {
        // A refused answer spent the challenge (or found none): the cookie is of no more use.
        if (token !== null && error instanceof DomainError && error.kind === "unauthenticated") {
          res.setHeader("set-cookie", clearedPasskeyChallengeCookie(deps.publicUrl));
        }
        throw error;
      }
    } else if (action === "sign-in/link") {
      started = await deps.links.signIn(deps.sessions, { token: text(body, "token") });
    } else {
      started = await deps.sessions.signIn({ email: text(body, "email"), password: text(body, "password"), clientAddress });
    }
    const maxAge = deps.sessions.lifetimes.maxSeconds;
    const cookies = [sessionCookie(started.token, deps.publicUrl, maxAge)];
    if (action === "passkey/finish") cookies.push(clearedPasskeyChallengeCookie(deps.publicUrl));
    return answer(res, 200, { account_id: started.accountId, expires_at: started.expiresAt.toISOString() }, cookies);
  }

  return {
    label: "/dashboard/auth",
    matches: (method, path) => method === "POST" && path.startsWith(prefix) && actions.has(path.slice(prefix.length)),
    async handle(req, res, url) {
      const action = url.pathname.slice(prefix.length) as Action;
      try {
        await run(action, req, res);
      } catch (error) {
        // A request refused before its body was read (a limit): drain it, so the connection stays usable.
        if (!req.complete) req.resume();
        const connectError = toConnectError(error, `dashboard/auth/${action}`, deps.logError);
        writeConnectError(res, connectError, restStatusOf(connectError), new Headers({ "cache-control": "no-store" }));
      }
    },
  };
}

/** Reads the JSON object of a body; every member must be a string except those named in `objects`, which must be objects. */
async function readJson(req: IncomingMessage, objects: readonly string[]): Promise<Record<string, unknown>> {
  if (mediaTypeOf(req.headers["content-type"]) !== "application/json") {
    req.resume();
    throw new DomainError("invalid_argument", "unsupported_media_type", "send the request body as JSON (Content-Type: application/json)");
  }
  const raw = await readBody(req, maxBodyBytes);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString("utf8"));
  } catch {
    throw invalidArgument([{ field: "body", description: "is not valid JSON" }]);
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw invalidArgument([{ field: "body", description: "must be a JSON object" }]);
  }
  const body = parsed as Record<string, unknown>;
  const violations: Violation[] = [];
  for (const [key, value] of Object.entries(body)) {
    if (objects.includes(key)) {
      if (value === null || typeof value !== "object" || Array.isArray(value))
        violations.push({ field: key, description: "must be a JSON object" });
    } else if (typeof value !== "string") violations.push({ field: key, description: "must be a string" });
  }
  if (violations.length > 0) throw invalidArgument(violations);
  return body;
}

function text(body: Record<string, unknown>, field: string): string {
  const value = body[field];
  return typeof value === "string" ? value : "";
}

function answer(res: ServerResponse, status: number, body: unknown, cookies: string[] = []): void {
  const payload = JSON.stringify(body);
  const headers: Record<string, string | number | string[]> = {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(payload),
    "cache-control": "no-store",
  };
  if (cookies.length > 0) headers["set-cookie"] = cookies;
  res.writeHead(status, headers);
  res.end(payload);
}
