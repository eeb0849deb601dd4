import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { callIdentity, postRest, reasonOf, setIdentitySettings, type JsonAnswer } from "./identity-client.js";
import { startTestServer, type TestServer, type TestServerOptions } from "./server.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/**
 * Builds the browser SDK (dist/sdk) when it is missing or older than its
 * sources, so a single test file can run without `npm run build` first.
 */
export function ensureSdkBuilt(): void {
  const bundle = join(root, "dist", "sdk", "gatehouse.js");
  const sources = join(root, "src", "sdk");
  const built = existsSync(bundle) ? statSync(bundle).mtimeMs : 0;
  const newest = Math.max(...readdirSync(sources).map((name) => statSync(join(sources, name)).mtimeMs));
  if (built >= newest && existsSync(join(root, "dist", "sdk", "example.html"))) return;
  const result = spawnSync(process.execPath, [join(root, "scripts", "build-sdk.mjs"), "--no-types"], { cwd: root, stdio: "inherit" });
  if (result.status !== 0) throw new Error("building the browser SDK failed");
}

/** The WebAuthn options of a begin call (PublicKeyCredential*OptionsJSON). */
export type OptionsJson = Record<string, unknown> & { challenge: string };

export interface Begun {
  ceremony_id: string;
  options: OptionsJson;
}

export interface SignedInJson {
  identity_id: string;
  session: { token: string; expires_at: string };
}

/** A server whose organisation's relying party is the browser's http://localhost:<port>. */
export interface PasskeyServer {
  server: TestServer;
  /** http://localhost:<port>: a secure context, and a valid RP ID ("localhost"). */
  origin: string;
  organizationId: string;
  publishableKey: string;
  secretKey: string;
}

/**
 * Starts a real server and points the organisation's relying party at
 * localhost: the server listens on 127.0.0.1 with an ephemeral port, so the
 * RP ID and origin are set once the port is known (as an operator would with
 * `gatehouse settings set`).
 */
export async function startPasskeyServer(options: TestServerOptions = {}): Promise<PasskeyServer> {
  const server = await startTestServer(options);
  const port = new URL(server.url).port;
  const origin = `http://localhost:${port}`;
  await setIdentitySettings(server, { rpId: "localhost", origins: [origin], ipLimitPerMinute: 100_000 });
  return {
    server,
    origin,
    organizationId: server.credentials.organization_id,
    publishableKey: server.credentials.publishable_key,
    secretKey: server.credentials.secret_key,
  };
}

/** A second organisation on the same server, its relying party on the same localhost origin. */
export async function createPasskeyOrganization(target: PasskeyServer) {
  const org = await target.server.app.tenancy.createOrganization(`Passkey organisation ${Math.random().toString(36).slice(2, 8)}`);
  await setIdentitySettings(target.server, { rpId: "localhost", origins: [target.origin], ipLimitPerMinute: 100_000 }, org.organizationId);
  return org;
}

export const beginRegistration = (s: PasskeyServer, identifier: string, key = s.publishableKey) =>
  postRest<Begun>(s.server, "/identity/register/begin", { identifier }, key);

export const finishRegistration = (s: PasskeyServer, ceremonyId: string, credential: unknown, key = s.publishableKey) =>
  postRest<SignedInJson & { credential_id: string }>(s.server, "/identity/register/finish", { ceremony_id: ceremonyId, credential }, key);

export const beginLogin = (s: PasskeyServer, identifier?: string, key = s.publishableKey) =>
  postRest<Begun>(s.server, "/identity/login/begin", identifier === undefined ? {} : { identifier }, key);

export const finishLogin = (s: PasskeyServer, ceremonyId: string, credential: unknown, key = s.publishableKey) =>
  postRest<SignedInJson>(s.server, "/identity/login/finish", { ceremony_id: ceremonyId, credential }, key);

/** BeginAddPasskey (secret key), over Connect JSON. */
export const beginAddPasskey = (s: PasskeyServer, identityId: string, key = s.secretKey) =>
  callIdentity<{ ceremonyId: string; options: OptionsJson }>(s.server, "BeginAddPasskey", { identityId }, key);

export const finishAddPasskey = (s: PasskeyServer, ceremonyId: string, credential: unknown, name = "", key = s.secretKey) =>
  callIdentity<{ credentialId: string }>(s.server, "FinishAddPasskey", { ceremonyId, credential, name }, key);

export const removePasskey = (s: PasskeyServer, identityId: string, credentialId: string, key = s.secretKey) =>
  callIdentity(s.server, "RemovePasskey", { identityId, credentialId }, key);

/** ValidateSession with the organisation's secret key. */
export const validateSession = (s: PasskeyServer, token: string, key = s.secretKey) =>
  callIdentity<{ identityId: string; sessionId: string; expiresAt: string }>(s.server, "ValidateSession", { token }, key);

/** What a refused ceremony must not have created: rows of the organisation, counted in the database. */
export async function countRows(s: PasskeyServer, organizationId = s.organizationId) {
  const db = s.server.app.database.client;
  const [identities, passkeys, sessions] = await Promise.all([
    db.identity.count({ where: { organizationId } }),
    db.passkey.count({ where: { organizationId } }),
    db.identitySession.count({ where: { organizationId } }),
  ]);
  return { identities, passkeys, sessions };
}

/** The stored passkey row (for asserting what was kept). */
export function storedPasskey(s: PasskeyServer, credentialId: string) {
  return s.server.app.database.client.passkey.findUnique({ where: { id: credentialId } });
}

/** The status and stable reason of an error answer. */
export function refusal(answer: JsonAnswer<unknown>) {
  return { status: answer.status, code: (answer.body as { code?: string }).code, reason: reasonOf(answer as JsonAnswer) };
}

/** A fresh identifier per test. */
export function newPasskeyIdentifier(label = "passkey"): string {
  return `${label}.${Math.random().toString(36).slice(2, 10)}@example.com`;
}
