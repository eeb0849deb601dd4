import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { DashboardAuthService } from "../../gen/svc/v1/dashboard_auth_pb.js";
import type { InitialCredentials } from "../../src/domain/tenancy/tenancy.js";
import { startTestServer, type TestServer, type TestServerOptions } from "./server.js";
import { freePort } from "./free-port.js";

/** The header and origin every dashboard request of a page carries. */
export const dashboardHeader = "x-gatehouse-dashboard";

export interface DashboardTestServer extends TestServer {
  /** PUBLIC_URL: the origin the dashboard accepts requests from. */
  origin: string;
  /** The owner's one-time setup token from `gatehouse init`'s dashboard_setup_url. */
  setupToken: string;
  /** The setup link, pointing at this server. */
  setupUrl: string;
}

/**
 * A test server whose PUBLIC_URL is its own address (the dashboard accepts
 * requests only from pages of PUBLIC_URL), so the port is chosen first.
 */
export async function startDashboardServer(
  options: TestServerOptions & { publicHost?: "127.0.0.1" | "localhost" } = {},
): Promise<DashboardTestServer> {
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    // "localhost" for browser tests with passkeys: an IP address cannot be a WebAuthn RP ID.
    const origin = `http://${options.publicHost ?? "127.0.0.1"}:${port}`;
    try {
      const server = await startTestServer({ ...options, env: { PORT: String(port), PUBLIC_URL: origin, ...options.env } });
      // A server over a data store initialised earlier (options.db) prints no credentials.
      const setupUrl = (server.credentials as InitialCredentials | null)?.dashboard_setup_url ?? "";
      const setupToken = setupUrl === "" ? "" : (new URLSearchParams(new URL(setupUrl).hash.slice(1)).get("token") ?? "");
      return { ...server, origin: new URL(server.app.config.publicUrl).origin, setupToken, setupUrl };
    } catch (error) {
      // Another test process took the port between the probe and the listen.
      if (attempt < 5 && (error as { code?: string }).code === "EADDRINUSE") continue;
      throw error;
    }
  }
}

export interface DashboardRequestOptions {
  cookie?: string;
  /** The Origin header; defaults to the server's PUBLIC_URL; null sends none. */
  origin?: string | null;
  /** Whether to send `X-Gatehouse-Dashboard: 1` (default true). */
  marked?: boolean;
  bearer?: string;
}

function dashboardHeaders(server: DashboardTestServer, options: DashboardRequestOptions): Record<string, string> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  const origin = options.origin === undefined ? server.origin : options.origin;
  if (origin !== null) headers.origin = origin;
  if (options.marked !== false) headers[dashboardHeader] = "1";
  if (options.cookie) headers.cookie = options.cookie;
  if (options.bearer) headers.authorization = `Bearer ${options.bearer}`;
  return headers;
}

/** The RPCs of svc.v1.DashboardAuthService (sign-in, setup, invitations, sign-out). */
export type DashboardAuthMethod =
  | "GetSignInState"
  | "InspectSetupLink"
  | "SetUpAccount"
  | "SignIn"
  | "BeginPasskeySignIn"
  | "FinishPasskeySignIn"
  | "SignOut"
  | "InspectInvitation"
  | "CreateInvitedAccount";

/** Calls a DashboardAuthService RPC (Connect JSON) the way the dashboard's pages do. */
export function dashboardAuthRpc(
  server: DashboardTestServer,
  method: DashboardAuthMethod | (string & {}),
  body: unknown,
  options: DashboardRequestOptions = {},
): Promise<Response> {
  return fetch(`${server.url}/svc.v1.DashboardAuthService/${method}`, {
    method: "POST",
    headers: { ...dashboardHeaders(server, options), "connect-protocol-version": "1" },
    body: JSON.stringify(body),
  });
}

/**
 * The members of `body` that the RPC's request message defines (by proto or
 * JSON name), for tests that send one set of fields to several RPCs: a field
 * a request does not define is refused (400) before anything else.
 */
export function requestOf(method: DashboardAuthMethod, body: Record<string, unknown>): Record<string, unknown> {
  const input = DashboardAuthService.methods.find((m) => m.name === method)?.input;
  if (!input) throw new Error(`DashboardAuthService has no method ${method}`);
  const names = new Set(input.fields.flatMap((f) => [f.name, f.jsonName]));
  return Object.fromEntries(Object.entries(body).filter(([name]) => names.has(name)));
}

/** Calls a DashboardService RPC (Connect JSON) the way the dashboard's pages do. */
export function dashboardRpc(
  server: DashboardTestServer,
  method: string,
  body: unknown,
  options: DashboardRequestOptions = {},
): Promise<Response> {
  return fetch(`${server.url}/svc.v1.DashboardService/${method}`, {
    method: "POST",
    headers: { ...dashboardHeaders(server, options), "connect-protocol-version": "1" },
    body: JSON.stringify(body),
  });
}

/** The `name=value` part of a Set-Cookie header, ready to send back as Cookie. */
export function cookieOf(response: Response): string {
  const setCookie = response.headers.get("set-cookie");
  if (!setCookie) throw new Error(`no Set-Cookie in the answer (status ${response.status})`);
  return setCookie.split(";")[0] as string;
}

export const ownerPassword = "correct horse battery staple 42";

/** Sets up the owner from the setup link and returns the session cookie. */
export async function setUpOwner(server: DashboardTestServer, email = "owner@example.com"): Promise<string> {
  const response = await dashboardAuthRpc(server, "SetUpAccount", {
    token: server.setupToken,
    email,
    display_name: "Olive Owner",
    password: ownerPassword,
  });
  if (response.status !== 200) throw new Error(`setup failed: ${response.status} ${await response.text()}`);
  return cookieOf(response);
}

/** Signs in with a password and returns the session cookie. */
export async function signIn(server: DashboardTestServer, email: string, password: string): Promise<string> {
  const response = await dashboardAuthRpc(server, "SignIn", { email, password });
  if (response.status !== 200) throw new Error(`sign-in failed: ${response.status} ${await response.text()}`);
  return cookieOf(response);
}

/** Bundles the dashboard UI into dist/dashboard (what `npm install` does), so browser tests run the current sources. */
export function buildDashboardUi(): void {
  const result = spawnSync(process.execPath, [join(process.cwd(), "scripts", "build-dashboard.mjs")], { encoding: "utf8" });
  if (result.status !== 0) throw new Error(`building the dashboard UI failed: ${result.stderr}`);
}

/** The token in a link's fragment (`...#token=...`). */
export function tokenOf(url: string): string {
  return new URLSearchParams(new URL(url).hash.slice(1)).get("token") ?? "";
}

export interface IssuedInvitation {
  invitationId: string;
  url: string;
  token: string;
}

/** Invites a person through InviteMember as the admin whose session `cookie` is; fails the test on any error. */
export async function invite(
  server: DashboardTestServer,
  cookie: string,
  input: { organizationId?: string; email: string; role?: "ROLE_ADMIN" | "ROLE_MEMBER"; displayName?: string },
): Promise<IssuedInvitation> {
  const response = await dashboardRpc(
    server,
    "InviteMember",
    {
      organizationId: input.organizationId ?? server.credentials.organization_id,
      email: input.email,
      displayName: input.displayName ?? "Invited Person",
      role: input.role ?? "ROLE_MEMBER",
    },
    { cookie },
  );
  const text = await response.text();
  if (response.status !== 200) throw new Error(`InviteMember failed: ${response.status} ${text}`);
  const body = JSON.parse(text) as { invitation: { invitationId: string }; invitationUrl: string };
  return { invitationId: body.invitation.invitationId, url: body.invitationUrl, token: tokenOf(body.invitationUrl) };
}

/** Accepts an invitation by creating its address's account (CreateInvitedAccount, the invitation page's RPC); answers the session. */
export async function createInvitedAccount(
  server: DashboardTestServer,
  token: string,
  password: string,
  displayName = "Invited Person",
): Promise<{ cookie: string; accountId: string }> {
  const response = await dashboardAuthRpc(server, "CreateInvitedAccount", { token, display_name: displayName, password });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`creating the invited account failed: ${response.status} ${text}`);
  return { cookie: cookieOf(response), accountId: (JSON.parse(text) as { accountId: string }).accountId };
}

/** A new operator of an organisation, signed in: invited by the admin of `adminCookie`, account created from the link. */
export async function addMember(
  server: DashboardTestServer,
  adminCookie: string,
  input: { organizationId?: string; email: string; role?: "ROLE_ADMIN" | "ROLE_MEMBER"; displayName?: string; password: string },
): Promise<{ cookie: string; accountId: string }> {
  const invited = await invite(server, adminCookie, input);
  return createInvitedAccount(server, invited.token, input.password, input.displayName);
}
