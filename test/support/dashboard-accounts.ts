import { runCli } from "./cli.js";
import {
  cookieOf,
  dashboardAuthRpc,
  dashboardRpc,
  tokenOf,
  type DashboardRequestOptions,
  type DashboardTestServer,
} from "./dashboard-server.js";
import type { SoftwareAuthenticator } from "./software-authenticator.js";

/** Who can do what with operator accounts across organisations: helpers of the tests that ask it. */

export interface ErrorBody {
  code: string;
  message: string;
  details?: { debug?: { reason?: string; violations?: { field: string; description: string }[] } }[];
}

export interface Answer<T> {
  status: number;
  body: T & ErrorBody;
  response: Response;
}

export const reasonOf = (body: ErrorBody) => body.details?.[0]?.debug?.reason;
export const fieldsOf = (body: ErrorBody) => (body.details?.[0]?.debug?.violations ?? []).map((v) => v.field).sort();

async function answerOf<T>(response: Response): Promise<Answer<T>> {
  return { status: response.status, body: (await response.json()) as T & ErrorBody, response };
}

/** A DashboardService RPC with the session of `cookie`. */
export async function call<T = Record<string, unknown>>(
  server: DashboardTestServer,
  cookie: string,
  method: string,
  body: Record<string, unknown>,
  options: DashboardRequestOptions = {},
): Promise<Answer<T>> {
  return answerOf<T>(await dashboardRpc(server, method, body, { cookie, ...options }));
}

/** A DashboardAuthService RPC (no session needed). */
export async function auth<T = Record<string, unknown>>(
  server: DashboardTestServer,
  method: string,
  body: Record<string, unknown>,
  options: DashboardRequestOptions = {},
): Promise<Answer<T>> {
  return answerOf<T>(await dashboardAuthRpc(server, method, body, options));
}

/** A new organisation whose owner set it up from its setup link (with `email`), signed in. */
export async function organizationOf(server: DashboardTestServer, input: { name: string; email: string; password: string }) {
  const org = await server.app.tenancy.createOrganization(input.name);
  const setup = await dashboardAuthRpc(server, "SetUpAccount", {
    token: tokenOf(org.dashboardSetupUrl),
    email: input.email,
    display_name: `${input.name} owner`,
    password: input.password,
  });
  if (setup.status !== 200) throw new Error(`setting up ${input.name} failed: ${setup.status} ${await setup.text()}`);
  return { organizationId: org.organizationId, cookie: cookieOf(setup) };
}

/** Adds a passkey made by `authenticator` to the account of `cookie` (BeginAdd/FinishAddOperatorPasskey). */
export async function addPasskey(
  server: DashboardTestServer,
  authenticator: SoftwareAuthenticator,
  cookie: string,
): Promise<Answer<unknown>> {
  const begun = await call<{ ceremonyId: string; options: { challenge: string; rp: { id?: string }; user: { id: string } } }>(
    server,
    cookie,
    "BeginAddOperatorPasskey",
    {},
  );
  if (begun.status !== 200) return begun;
  return call(server, cookie, "FinishAddOperatorPasskey", {
    ceremonyId: begun.body.ceremonyId,
    credential: authenticator.create(begun.body.options),
    name: "",
  });
}

/** A whole passkey sign-in with the authenticator's newest passkey; answers FinishPasskeySignIn. */
export async function signInWithPasskey(
  server: DashboardTestServer,
  authenticator: SoftwareAuthenticator,
): Promise<Answer<{ accountId: string }>> {
  const begun = await dashboardAuthRpc(server, "BeginPasskeySignIn", {});
  if (begun.status !== 200) throw new Error(`BeginPasskeySignIn failed: ${begun.status} ${await begun.text()}`);
  const options = ((await begun.json()) as { options: { challenge: string; rpId?: string } }).options;
  return auth(server, "FinishPasskeySignIn", { credential: authenticator.get(options) }, { cookie: cookieOf(begun) });
}

/** Password sign-in; answers the RPC (its cookie on success). */
export function signInWith(server: DashboardTestServer, email: string, password: string): Promise<Answer<{ accountId: string }>> {
  return auth(server, "SignIn", { email, password });
}

/** The server's data store for an operator command run as its own process. */
export function operatorEnvOf(server: DashboardTestServer): Record<string, string> {
  return { DATABASE_URL: server.db.url, GATEHOUSE_DATA_DIR: server.db.dataDir, PUBLIC_URL: server.origin };
}

/**
 * The documented recovery: `gatehouse operators sign-in-link --email <address>`
 * run as a process (the built CLI on the server's store), its link spent
 * through SignInWithLink as the sign-in page does. Answers the session cookie.
 */
export async function recover(server: DashboardTestServer, email: string): Promise<{ cookie: string; accountId: string }> {
  const issued = runCli(["operators", "sign-in-link", "--email", email, "--json"], operatorEnvOf(server));
  if (issued.status !== 0) throw new Error(`gatehouse operators sign-in-link exited ${issued.status}: ${issued.stderr}`);
  const { url } = JSON.parse(issued.stdout) as { url: string };
  const token = new URLSearchParams(new URL(url).hash.slice(1)).get("link") ?? "";
  const signedIn = await dashboardAuthRpc(server, "SignInWithLink", { token });
  const text = await signedIn.text();
  if (signedIn.status !== 200) throw new Error(`SignInWithLink failed: ${signedIn.status} ${text}`);
  return { cookie: cookieOf(signedIn), accountId: (JSON.parse(text) as { accountId: string }).accountId };
}

/** The names of an organisation's API keys, revoked ones included, as its admin of `cookie` lists them. */
export async function apiKeyNamesOf(server: DashboardTestServer, cookie: string, organizationId: string): Promise<string[]> {
  const listed = await call<{ apiKeys?: { name: string }[] }>(server, cookie, "ListApiKeys", {
    organizationId,
    includeRevoked: true,
    pageSize: 100,
  });
  if (listed.status !== 200) throw new Error(`ListApiKeys failed: ${listed.status}`);
  return (listed.body.apiKeys ?? []).map((k) => k.name).sort();
}
