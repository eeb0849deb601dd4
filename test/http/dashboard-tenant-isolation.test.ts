import { randomUUID } from "node:crypto";
import { DashboardService } from "../../gen/svc/v1/dashboard_pb.js";
import { applyOk } from "../support/config-documents.js";
import { createApiKey } from "../support/credentials.js";
import {
  addMember,
  cookieOf,
  dashboardRpc,
  invite,
  ownerPassword,
  dashboardAuthRpc,
  requestOf,
  setUpOwner,
  startDashboardServer,
  tokenOf,
  type DashboardTestServer,
  type IssuedInvitation,
} from "../support/dashboard-server.js";
import { muteGatewayHangUps, watchGateway } from "../support/gateway-control.js";
import { callIdentity } from "../support/identity-client.js";
import {
  createCredentialIn,
  getAssertionIn,
  launchBrowser,
  openPasskeyPage,
  sdkIn,
  signedIn,
  type PasskeyPage,
  type TestBrowser,
} from "../support/passkey-browser.js";
import { ensureSdkBuilt, type OptionsJson } from "../support/passkey-client.js";
import { secretsApi } from "../support/secrets-client.js";

/**
 * Audit of every dashboard operation that takes an id (DashboardService and
 * DashboardAuthService): the admin of organisation A names rows of organisation
 * B. Each must answer exactly as for an id that does not exist (same status,
 * same body but for the id itself) and change nothing of B's. One test per
 * operation; B's rows are made through the real API (browser passkeys
 * included) and checked afterwards through the real API.
 */

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

const doc = (upstream: string) => `version: 1\nroutes:\n  - name: plants\n    path: /plants\n    upstream: ${upstream}\n`;

let server: DashboardTestServer;
let browser: TestBrowser;
let devices: PasskeyPage[] = [];
/** A's admin: every foreign call is theirs. */
let adminA: string;
let orgA: string;
/** B's rows, made by B's owner and B's keys. */
const b = {
  organizationId: "",
  owner: "",
  ownerAccountId: "",
  adminKey: "",
  publishableKey: "",
  secretKey: "",
  apiKeyId: "",
  apiKey: "",
  identityId: "",
  credentialId: "",
  sessionId: "",
  sessionToken: "",
  memberAccountId: "",
  invitation: { invitationId: "", url: "", token: "" } as IssuedInvitation,
  operatorPasskeyId: "",
  revisions: [] as number[],
  gatewayKeyId: "",
  gatewayKey: "",
  consumerId: "",
};
/** One of A's own identities, to pair with B's passkeys and sessions. */
let identityA = "";

async function call(cookie: string, method: string, body: Record<string, unknown>): Promise<Answer> {
  const response = await dashboardRpc(server, method, body, { cookie });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const asA = (method: string, body: Record<string, unknown>) => call(adminA, method, { organizationId: orgA, ...body });

/**
 * The foreign id's answer equals the unknown id's once each id is masked in
 * its own answer's human-readable parts (a message may name the id asked
 * for). Everything else, the error detail included, must be equal as is.
 */
function expectAlike(foreign: Answer, unknown: Answer, masks: [string, string][] = []): void {
  const mask = (answer: Answer, which: 0 | 1) => {
    const readable = (text: string) => masks.reduce((out, pair) => out.replaceAll(pair[which], "<id>"), text);
    const body = JSON.parse(JSON.stringify(answer.body)) as { message?: string; details?: { debug?: unknown }[] };
    if (typeof body.message === "string") body.message = readable(body.message);
    for (const detail of body.details ?? []) {
      if (detail.debug !== undefined) detail.debug = JSON.parse(readable(JSON.stringify(detail.debug))) as unknown;
    }
    return { status: answer.status, body };
  };
  expect(mask(foreign, 0)).toEqual(mask(unknown, 1));
}

async function device(): Promise<PasskeyPage> {
  const opened = await openPasskeyPage(browser, `${server.origin}/healthz`);
  devices.push(opened);
  return opened;
}

/** Adds a passkey on `on` to the operator account of `cookie`; answers its id. */
async function addOperatorPasskey(on: PasskeyPage, cookie: string): Promise<string> {
  const begun = await call(cookie, "BeginAddOperatorPasskey", {});
  const credential = await createCredentialIn(on.page, (begun.body as { options: OptionsJson }).options);
  const finished = await call(cookie, "FinishAddOperatorPasskey", { ceremonyId: begun.body.ceremonyId, credential, name: "B's key" });
  if (finished.status !== 200) throw new Error(`adding an operator passkey failed: ${JSON.stringify(finished.body)}`);
  return (finished.body as { passkey: { id: string } }).passkey.id;
}

const bSessionLives = async () => (await callIdentity(server, "ValidateSession", { token: b.sessionToken }, b.secretKey)).status === 200;
const bIdentityDetails = async () =>
  (await call(b.owner, "GetIdentityDetails", { organizationId: b.organizationId, identityId: b.identityId })).body as {
    passkeys?: { credentialId: string }[];
    liveSessions?: number;
  };

beforeAll(async () => {
  ensureSdkBuilt();
  server = await startDashboardServer({ publicHost: "localhost" });
  browser = await launchBrowser();
  adminA = await setUpOwner(server, "alice@a.test");
  orgA = server.credentials.organization_id;

  const org = await server.app.tenancy.createOrganization("Organisation B");
  b.organizationId = org.organizationId;
  b.publishableKey = org.publishableKey;
  b.secretKey = org.secretKey;
  const setup = await dashboardAuthRpc(server, "SetUpAccount", {
    token: tokenOf(org.dashboardSetupUrl),
    email: "bob@b.test",
    display_name: "Bob B",
    password: "bob's own passphrase",
  });
  b.owner = cookieOf(setup);
  b.ownerAccountId = ((await setup.json()) as { accountId: string }).accountId;
  b.adminKey = (await createApiKey(server, "admin", b.organizationId)).apiKey;
  const key = await server.app.tenancy.createApiKey({ organizationId: b.organizationId, name: "b-deploy", role: "member" });
  b.apiKeyId = key.id;
  b.apiKey = key.apiKey;

  // An identity of B with a passkey and a live session (the SDK in a page, B's publishable key).
  const user = await device();
  const registered = signedIn(
    await sdkIn(user.page, b.publishableKey, { method: "register", identifier: `b-user-${Date.now()}@example.com` }),
  );
  b.identityId = registered.identity_id;
  b.sessionToken = registered.session.token;
  const validated = await callIdentity<{ sessionId: string }>(server, "ValidateSession", { token: b.sessionToken }, b.secretKey);
  b.sessionId = validated.body.sessionId;
  const details = await bIdentityDetails();
  b.credentialId = details.passkeys?.[0]?.credentialId ?? "";

  // One of A's identities (magic link) to pair with B's passkey and session.
  const link = await callIdentity<{ token: string }>(
    server,
    "GenerateMagicLink",
    { identifier: "a-user@example.com" },
    server.credentials.secret_key,
  );
  identityA = (
    await callIdentity<{ identityId: string }>(server, "VerifyMagicLink", { token: link.body.token }, server.credentials.secret_key)
  ).body.identityId;

  const secrets = secretsApi(server, b.adminKey, b.organizationId);
  await secrets.put("B_ONLY_TOKEN", "b-production", "b's value");
  for (const upstream of ["http://127.0.0.1:8081", "http://127.0.0.1:8082", "http://127.0.0.1:8083"]) {
    b.revisions.push((await applyOk(server, b.adminKey, doc(upstream), { organizationId: b.organizationId })).revision);
  }
  b.memberAccountId = (
    await addMember(server, b.owner, { organizationId: b.organizationId, email: "bea@b.test", password: "bea's own passphrase" })
  ).accountId;
  b.invitation = await invite(server, b.owner, { organizationId: b.organizationId, email: "pending@b.test", role: "ROLE_ADMIN" });
  b.operatorPasskeyId = await addOperatorPasskey(await device(), b.owner);
  const gatewayKey = await call(b.owner, "CreateGatewayKey", { organizationId: b.organizationId, name: "b-edge" });
  b.gatewayKeyId = (gatewayKey.body as { gatewayKey: { id: string } }).gatewayKey.id;
  b.gatewayKey = (gatewayKey.body as { key: string }).key;
  const consumer = await call(b.owner, "CreateConsumerKey", { organizationId: b.organizationId, name: "b-partner" });
  b.consumerId = (consumer.body as { consumer: { consumerId: string } }).consumer.consumerId;
}, 120_000);

afterAll(async () => {
  await Promise.all(devices.map((d) => d.context.close()));
  devices = [];
  await browser?.close();
  await server?.close();
});

describe("every DashboardService operation that takes an id acts only on the caller's organisation", () => {
  test("RevokeApiKey: B's API key is as unknown as a key that does not exist, and keeps working", async () => {
    const unknown = randomUUID();
    expectAlike(await asA("RevokeApiKey", { apiKeyId: b.apiKeyId }), await asA("RevokeApiKey", { apiKeyId: unknown }), [
      [b.apiKeyId, unknown],
    ]);
    expect((await asA("RevokeApiKey", { apiKeyId: unknown })).status).toBe(404);
    expect((await server.call(`/organization/${b.organizationId}/config`, { bearer: b.apiKey })).status).toBe(200);
  });

  test("RevokeGatewayKey: B's gateway key is as unknown as a key that does not exist, and keeps working", async () => {
    const unknown = randomUUID();
    const foreign = await asA("RevokeGatewayKey", { gatewayKeyId: b.gatewayKeyId });
    expect(foreign.status).toBe(404);
    expectAlike(foreign, await asA("RevokeGatewayKey", { gatewayKeyId: unknown }), [[b.gatewayKeyId, unknown]]);
    expect((await server.call(`/organization/${b.organizationId}/config`, { bearer: b.gatewayKey })).status).toBe(200);
    const listed = await call(b.owner, "ListGatewayKeys", { organizationId: b.organizationId });
    expect(listed.body.gatewayKeys).toEqual([expect.not.objectContaining({ revokedAt: expect.anything() })]);
  });

  test("RevokeConsumerKey: B's consumer is as unknown as one that does not exist, and stays live", async () => {
    const unknown = randomUUID();
    const foreign = await asA("RevokeConsumerKey", { consumerId: b.consumerId });
    expect(foreign.status).toBe(404);
    expectAlike(foreign, await asA("RevokeConsumerKey", { consumerId: unknown }), [[b.consumerId, unknown]]);
    const listed = await call(b.owner, "ListConsumerKeys", { organizationId: b.organizationId, includeRevoked: true });
    expect(listed.body.consumers).toEqual([expect.objectContaining({ consumerId: b.consumerId })]);
    expect(listed.body.consumers).toEqual([expect.not.objectContaining({ revokedAt: expect.anything() })]);
  });

  test("ListGatewayKeys, ListConsumerKeys and ListConnectedGateways: nothing of B's is listed in A", async () => {
    muteGatewayHangUps();
    const stream = watchGateway(server.url, b.gatewayKey, { gatewayId: "b-edge.example" });
    expect((await stream.next()).event.case).toBe("snapshot");
    const theirs = await call(b.owner, "ListConnectedGateways", { organizationId: b.organizationId });
    expect(theirs.body.gateways).toEqual([expect.objectContaining({ gatewayId: "b-edge.example", connected: true })]);
    for (const [method, body] of [
      ["ListGatewayKeys", { includeRevoked: true }],
      ["ListConsumerKeys", { includeRevoked: true }],
      ["ListConnectedGateways", {}],
    ] as const) {
      const listed = await asA(method, body);
      expect({ method, status: listed.status, body: listed.body }).toEqual({ method, status: 200, body: {} });
    }
    stream.close();
  });

  test("GetIdentityDetails: B's identity is not found", async () => {
    const unknown = randomUUID();
    const foreign = await asA("GetIdentityDetails", { identityId: b.identityId });
    expect(foreign.status).toBe(404);
    expectAlike(foreign, await asA("GetIdentityDetails", { identityId: unknown }), [[b.identityId, unknown]]);
    expect(JSON.stringify(foreign.body)).not.toContain(b.credentialId);
  });

  test("ListIdentitySessions: B's identity is not found", async () => {
    const unknown = randomUUID();
    const foreign = await asA("ListIdentitySessions", { identityId: b.identityId });
    expect(foreign.status).toBe(404);
    expectAlike(foreign, await asA("ListIdentitySessions", { identityId: unknown }), [[b.identityId, unknown]]);
    expect(JSON.stringify(foreign.body)).not.toContain(b.sessionId);
  });

  test("RemoveIdentityPasskey: B's passkey stays, named through B's identity or through one of A's", async () => {
    const unknownIdentity = randomUUID();
    const unknownCredential = "Zm9yZWlnbi1jcmVkZW50aWFsLWlk";
    expectAlike(
      await asA("RemoveIdentityPasskey", { identityId: b.identityId, credentialId: b.credentialId }),
      await asA("RemoveIdentityPasskey", { identityId: unknownIdentity, credentialId: b.credentialId }),
      [[b.identityId, unknownIdentity]],
    );
    const throughA = await asA("RemoveIdentityPasskey", { identityId: identityA, credentialId: b.credentialId });
    expect(throughA.status).toBe(404);
    expectAlike(throughA, await asA("RemoveIdentityPasskey", { identityId: identityA, credentialId: unknownCredential }), [
      [b.credentialId, unknownCredential],
    ]);
    expect((await bIdentityDetails()).passkeys?.map((p) => p.credentialId)).toEqual([b.credentialId]);
  });

  test("RevokeIdentitySessions: B's session stays live, named through B's identity or through one of A's", async () => {
    const unknownIdentity = randomUUID();
    const unknownSession = randomUUID();
    for (const body of [{ identityId: b.identityId }, { identityId: b.identityId, sessionId: b.sessionId }]) {
      const foreign = await asA("RevokeIdentitySessions", body);
      expect(foreign.status).toBe(404);
      expectAlike(foreign, await asA("RevokeIdentitySessions", { ...body, identityId: unknownIdentity }), [
        [b.identityId, unknownIdentity],
      ]);
    }
    const throughA = await asA("RevokeIdentitySessions", { identityId: identityA, sessionId: b.sessionId });
    expect(throughA.status).toBe(404);
    expectAlike(throughA, await asA("RevokeIdentitySessions", { identityId: identityA, sessionId: unknownSession }), [
      [b.sessionId, unknownSession],
    ]);
    expect(await bSessionLives()).toBe(true);
  });

  test("DeleteEnvironmentSecret: B's secret is not found and stays", async () => {
    const foreign = await asA("DeleteEnvironmentSecret", { environment: "b-production", name: "B_ONLY_TOKEN" });
    expect(foreign.status).toBe(404);
    expectAlike(foreign, await asA("DeleteEnvironmentSecret", { environment: "b-production", name: "NO_SUCH_TOKEN" }), [
      ["B_ONLY_TOKEN", "NO_SUCH_TOKEN"],
    ]);
    const listed = await secretsApi(server, b.adminKey, b.organizationId).list("b-production");
    expect(listed.map((s) => s.name)).toEqual(["B_ONLY_TOKEN"]);
  });

  test("ListEnvironmentSecrets and ListSecretEnvironments: B's environment reads as an empty one", async () => {
    const foreign = await asA("ListEnvironmentSecrets", { environment: "b-production" });
    expect(foreign.status).toBe(200);
    expectAlike(foreign, await asA("ListEnvironmentSecrets", { environment: "nowhere" }));
    expect(JSON.stringify(foreign.body)).not.toContain("B_ONLY_TOKEN");
    const environments = await asA("ListSecretEnvironments", {});
    expect(JSON.stringify(environments.body)).not.toContain("b-production");
  });

  test("DiffConfigRevisions: a revision only B has is not found", async () => {
    const last = b.revisions[b.revisions.length - 1] as number;
    const foreign = await asA("DiffConfigRevisions", { fromRevision: 0, toRevision: last });
    expect(foreign.status).toBe(404);
    expectAlike(foreign, await asA("DiffConfigRevisions", { fromRevision: 0, toRevision: 999 }), [[String(last), "999"]]);
    expect(JSON.stringify(foreign.body)).not.toContain("8083");
  });

  test("RollbackConfigRevision: a revision only B has is not found, and neither A nor B changes", async () => {
    const first = b.revisions[0] as number;
    const aBefore = await asA("GetConfigDocument", {});
    const bBefore = await call(b.owner, "GetConfigDocument", { organizationId: b.organizationId });
    const foreign = await asA("RollbackConfigRevision", { revision: first });
    expect(foreign.status).toBe(404);
    expectAlike(foreign, await asA("RollbackConfigRevision", { revision: 999 }), [[String(first), "999"]]);
    expect(await asA("GetConfigDocument", {})).toEqual(aBefore);
    expect(await call(b.owner, "GetConfigDocument", { organizationId: b.organizationId })).toEqual(bBefore);
  });

  test("ChangeMemberRole: B's member is not a member here, and keeps their role there", async () => {
    const unknown = randomUUID();
    for (const accountId of [b.memberAccountId, b.ownerAccountId]) {
      const foreign = await asA("ChangeMemberRole", { accountId, role: "ROLE_ADMIN" });
      expect(foreign.status).toBe(404);
      expectAlike(foreign, await asA("ChangeMemberRole", { accountId: unknown, role: "ROLE_ADMIN" }), [[accountId, unknown]]);
    }
    const members = await call(b.owner, "ListMembers", { organizationId: b.organizationId });
    expect((members.body.members as { email: string; role: string }[]).map((m) => [m.email, m.role]).sort()).toEqual([
      ["bea@b.test", "ROLE_MEMBER"],
      ["bob@b.test", "ROLE_ADMIN"],
    ]);
  });

  test("RemoveMember: B's member is not a member here, and stays a member there", async () => {
    const unknown = randomUUID();
    const foreign = await asA("RemoveMember", { accountId: b.memberAccountId });
    expect(foreign.status).toBe(404);
    expectAlike(foreign, await asA("RemoveMember", { accountId: unknown }), [[b.memberAccountId, unknown]]);
    const members = await call(b.owner, "ListMembers", { organizationId: b.organizationId });
    expect((members.body.members as { accountId: string }[]).map((m) => m.accountId)).toContain(b.memberAccountId);
    expect((await dashboardAuthRpc(server, "SignIn", { email: "bea@b.test", password: "bea's own passphrase" })).status).toBe(200);
  });

  test("ReissueInvitation: B's invitation is not found here; B's link keeps working and no link of it is handed out", async () => {
    const unknown = randomUUID();
    const foreign = await asA("ReissueInvitation", { invitationId: b.invitation.invitationId });
    expect(foreign.status).toBe(404);
    expectAlike(foreign, await asA("ReissueInvitation", { invitationId: unknown }), [[b.invitation.invitationId, unknown]]);
    expect(JSON.stringify(foreign.body)).not.toContain("#token=");
    expect((await dashboardAuthRpc(server, "InspectInvitation", { token: b.invitation.token })).status).toBe(200);
  });

  test("RevokeInvitation: B's invitation is not found here and stays pending", async () => {
    const unknown = randomUUID();
    const foreign = await asA("RevokeInvitation", { invitationId: b.invitation.invitationId });
    expect(foreign.status).toBe(404);
    expectAlike(foreign, await asA("RevokeInvitation", { invitationId: unknown }), [[b.invitation.invitationId, unknown]]);
    const pending = await call(b.owner, "ListInvitations", { organizationId: b.organizationId });
    expect((pending.body.invitations as { invitationId: string }[]).map((i) => i.invitationId)).toEqual([b.invitation.invitationId]);
    expect((await dashboardAuthRpc(server, "InspectInvitation", { token: b.invitation.token })).status).toBe(200);
  });

  test("ListInvitations and ListMembers: nothing of B's is listed in A", async () => {
    const invitations = await asA("ListInvitations", { pageSize: 100 });
    const members = await asA("ListMembers", { pageSize: 100 });
    expect(JSON.stringify(invitations.body)).not.toContain("@b.test");
    expect(JSON.stringify(members.body)).not.toContain("@b.test");
  });

  test("AcceptInvitation: B's token for another address answers as an unknown token and stays usable", async () => {
    const passwords = { currentPassword: ownerPassword, newPassword: "a joining passphrase" };
    const foreign = await call(adminA, "AcceptInvitation", { token: b.invitation.token, ...passwords });
    expect(foreign.status).toBe(404);
    expectAlike(foreign, await call(adminA, "AcceptInvitation", { token: "U".repeat(43), ...passwords }));
    const session = await call(adminA, "GetOperatorSession", {});
    expect((session.body.organizations as { organizationId: string }[]).map((o) => o.organizationId)).toEqual([orgA]);
    expect((await dashboardAuthRpc(server, "InspectInvitation", { token: b.invitation.token })).status).toBe(200);
  });

  test("RemoveOperatorPasskey: another operator's passkey is as unknown as none, and stays", async () => {
    const unknown = randomUUID();
    const foreign = await call(adminA, "RemoveOperatorPasskey", { passkeyId: b.operatorPasskeyId });
    expect(foreign.status).toBe(404);
    expectAlike(foreign, await call(adminA, "RemoveOperatorPasskey", { passkeyId: unknown }), [[b.operatorPasskeyId, unknown]]);
    const mine = await call(adminA, "ListOperatorPasskeys", {});
    expect(JSON.stringify(mine.body)).not.toContain(b.operatorPasskeyId);
    const theirs = await call(b.owner, "ListOperatorPasskeys", {});
    expect((theirs.body.passkeys as { id: string }[]).map((p) => p.id)).toEqual([b.operatorPasskeyId]);
  });

  test("FinishAddOperatorPasskey: another operator's ceremony is as unknown as none, and its owner can still finish it", async () => {
    const on = await device();
    const begun = await call(b.owner, "BeginAddOperatorPasskey", {});
    const credential = await createCredentialIn(on.page, (begun.body as { options: OptionsJson }).options);
    const foreign = await call(adminA, "FinishAddOperatorPasskey", { ceremonyId: begun.body.ceremonyId, credential, name: "stolen" });
    expect(foreign.status).toBe(401);
    expectAlike(foreign, await call(adminA, "FinishAddOperatorPasskey", { ceremonyId: randomUUID(), credential, name: "stolen" }));
    expect((await call(adminA, "ListOperatorPasskeys", {})).body.passkeys ?? []).toEqual([]);
    const own = await call(b.owner, "FinishAddOperatorPasskey", { ceremonyId: begun.body.ceremonyId, credential, name: "B's second" });
    expect(own.status).toBe(200);
    expect((await call(b.owner, "RemoveOperatorPasskey", { passkeyId: (own.body.passkey as { id: string }).id })).status).toBe(200);
  });

  const organizationScoped = DashboardService.methods
    .filter((m) => m.input.fields.some((f) => f.name === "organization_id"))
    .map((m) => m.name);

  test("the organisation id is an id too: every operation that names one says so", () => {
    expect(organizationScoped.length).toBeGreaterThan(20);
    expect(organizationScoped).toEqual(
      expect.arrayContaining(["ListInvitations", "InviteMember", "ReissueInvitation", "RevokeInvitation"]),
    );
  });

  test.each(organizationScoped)("%s: B's organisation id answers as an unknown organisation's", async (method) => {
    const unknown = randomUUID();
    const foreign = await call(adminA, method, { organizationId: b.organizationId });
    expect(foreign.status).toBe(404);
    expectAlike(foreign, await call(adminA, method, { organizationId: unknown }), [[b.organizationId, unknown]]);
  });
});

describe("every DashboardAuthService RPC that takes a token, a session or a passkey acts only on its own", () => {
  test("SetUpAccount and InspectSetupLink: an invitation's token is no setup link; the invitation stays usable", async () => {
    const unknown = "U".repeat(43);
    const body = (token: string) => ({ token, email: "grab@a.test", display_name: "Grab", password: "a grabbing passphrase" });
    for (const action of ["InspectSetupLink", "SetUpAccount"] as const) {
      const foreign = await dashboardAuthRpc(server, action, requestOf(action, body(b.invitation.token)));
      const none = await dashboardAuthRpc(server, action, requestOf(action, body(unknown)));
      expect(foreign.status).toBe(404);
      expect(foreign.headers.get("set-cookie")).toBeNull();
      expect(await foreign.json()).toEqual(await none.json());
    }
    expect((await dashboardAuthRpc(server, "InspectInvitation", { token: b.invitation.token })).status).toBe(200);
  });

  test("InspectInvitation and CreateInvitedAccount: an owner's setup token is no invitation; the setup link stays usable", async () => {
    const fresh = await server.app.tenancy.createOrganization("Organisation C");
    const setupToken = tokenOf(fresh.dashboardSetupUrl);
    const body = (token: string) => ({ token, display_name: "Grab", password: "a grabbing passphrase" });
    for (const action of ["InspectInvitation", "CreateInvitedAccount"] as const) {
      const foreign = await dashboardAuthRpc(server, action, requestOf(action, body(setupToken)));
      const none = await dashboardAuthRpc(server, action, requestOf(action, body("U".repeat(43))));
      expect(foreign.status).toBe(404);
      expect(foreign.headers.get("set-cookie")).toBeNull();
      expect(await foreign.json()).toEqual(await none.json());
    }
    expect((await dashboardAuthRpc(server, "InspectSetupLink", { token: setupToken })).status).toBe(200);
  });

  test("SignOut ends the caller's own session only", async () => {
    const mine = cookieOf(await dashboardAuthRpc(server, "SignIn", { email: "alice@a.test", password: ownerPassword }));
    expect((await dashboardAuthRpc(server, "SignOut", {}, { cookie: mine })).status).toBe(200);
    expect((await call(mine, "GetOperatorSession", {})).status).toBe(401);
    expect((await call(b.owner, "GetOperatorSession", {})).status).toBe(200);
    expect((await call(adminA, "GetOperatorSession", {})).status).toBe(200);
  });

  test("FinishPasskeySignIn: a sign-in begun for A's admin is not finished by B's owner's passkey", async () => {
    const bKey = await device();
    await addOperatorPasskey(bKey, b.owner);
    const begun = await dashboardAuthRpc(server, "BeginPasskeySignIn", { email: "alice@a.test" });
    const challengeCookie = cookieOf(begun);
    const { options } = (await begun.json()) as { options: OptionsJson };
    const assertion = await getAssertionIn(bKey.page, options);
    const finish = await dashboardAuthRpc(server, "FinishPasskeySignIn", { credential: assertion }, { cookie: challengeCookie });
    expect(finish.status).toBe(401);
    expect(finish.headers.getSetCookie().some((c) => c.startsWith("gatehouse_dashboard="))).toBe(false);
  });
});
