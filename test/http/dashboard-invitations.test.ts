import { randomUUID } from "node:crypto";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hashToken } from "../../src/crypto/tokens.js";
import { createPasswordHasher } from "../../src/domain/identity/password-hasher.js";
import { openDatabase } from "../../src/storage/database.js";
import { createTenancyStore } from "../../src/storage/tenancy-store.js";
import { applyMigrations } from "../../src/storage/migrate.js";
import { createTestDatabase, type TestDatabase } from "../support/database.js";
import {
  addMember,
  cookieOf,
  createInvitedAccount,
  dashboardRpc,
  invite,
  ownerPassword,
  dashboardAuthRpc,
  setUpOwner,
  signIn,
  startDashboardServer,
  requestOf,
  tokenOf,
  type DashboardRequestOptions,
  type DashboardTestServer,
} from "../support/dashboard-server.js";
import { callIdentity } from "../support/identity-client.js";
import { createManualClock } from "../support/server.js";

/**
 * Invitations of people to organisations (security finding: an admin of one
 * organisation could take over an account another organisation had invited,
 * and with it that organisation). Real servers, real dashboard sessions, two
 * organisations.
 */

interface ErrorBody {
  code: string;
  message: string;
  details?: { debug?: { reason?: string; violations?: { field: string; description: string }[] } }[];
}

interface InvitationJson {
  invitationId: string;
  email: string;
  displayName: string;
  role: string;
  createdAt: string;
  expiresAt: string;
  invitedBy?: string;
}

const reasonOf = (body: ErrorBody) => body.details?.[0]?.debug?.reason;
const fieldsOf = (body: ErrorBody) => (body.details?.[0]?.debug?.violations ?? []).map((v) => v.field).sort();

async function rpc<T = Record<string, unknown>>(
  server: DashboardTestServer,
  cookie: string,
  method: string,
  body: Record<string, unknown>,
  options: DashboardRequestOptions = {},
) {
  const response = await dashboardRpc(server, method, body, { cookie, ...options });
  return { status: response.status, headers: response.headers, body: (await response.json()) as T & ErrorBody };
}

async function auth<T = Record<string, unknown>>(
  server: DashboardTestServer,
  action: string,
  body: unknown,
  options: DashboardRequestOptions = {},
) {
  const response = await dashboardAuthRpc(server, action, body, options);
  return { status: response.status, response, body: (await response.json()) as T & ErrorBody };
}

/** The token of whatever link an answer carries (`...#token=<43 characters>`); "" when it carries none. */
function linkTokenIn(body: unknown): string {
  return /#token=([A-Za-z0-9_-]{43})/.exec(JSON.stringify(body))?.[1] ?? "";
}

const unknownToken = () =>
  Buffer.from(randomUUID() + randomUUID())
    .toString("base64url")
    .slice(0, 43);

/** A second organisation with its owner set up and signed in. */
async function secondOrganization(server: DashboardTestServer, email: string, name = "Organisation B") {
  const org = await server.app.tenancy.createOrganization(name);
  const setup = await dashboardAuthRpc(server, "SetUpAccount", {
    token: tokenOf(org.dashboardSetupUrl),
    email,
    display_name: "Mallory Admin",
    password: "mallory's own passphrase",
  });
  if (setup.status !== 200) throw new Error(`setup of ${name} failed: ${setup.status}`);
  return { organizationId: org.organizationId, cookie: cookieOf(setup), secretKey: org.secretKey };
}

describe("the reported takeover of an invited account across organisations", () => {
  let server: DashboardTestServer;
  let ownerA: string;
  let orgA: string;
  let b: Awaited<ReturnType<typeof secondOrganization>>;

  beforeAll(async () => {
    server = await startDashboardServer();
    ownerA = await setUpOwner(server, "alice@a.test");
    orgA = server.credentials.organization_id;
    b = await secondOrganization(server, "mallory@b.test");
  });
  afterAll(() => server.close());

  test("step by step, the admin of B gets no credential of the account A invited and nothing of A", async () => {
    const victim = "victim@corp.test";
    // 1. A's admin invites victim@corp.test as admin.
    const byA = await rpc(server, ownerA, "InviteMember", {
      organizationId: orgA,
      email: victim,
      displayName: "Victor",
      role: "ROLE_ADMIN",
    });
    expect(byA.status).toBe(200);
    const tokenA = linkTokenIn(byA.body);
    expect(tokenA).not.toBe("");

    // 2. B's admin invites the same address in B: the answer is a link of B's own.
    const byB = await rpc(server, b.cookie, "InviteMember", {
      organizationId: b.organizationId,
      email: victim,
      displayName: "Victor",
      role: "ROLE_MEMBER",
    });
    expect(byB.status).toBe(200);
    const tokenB = linkTokenIn(byB.body);
    expect(tokenB).not.toBe("");
    expect(tokenB).not.toBe(tokenA);

    // 3. B's admin opens the new link and sets their own e-mail and password: refused, no session.
    const setup = await dashboardAuthRpc(server, "SetUpAccount", {
      token: tokenB,
      email: "mallory+victim@b.test",
      display_name: "Mallory",
      password: "mallory's takeover passphrase",
    });
    expect(setup.status).toBe(404);
    expect(setup.headers.get("set-cookie")).toBeNull();

    // A's link was not voided by B's invitation: it still names A and the victim's address.
    const stillA = await auth<{ organizationName: string; email: string; role: string }>(server, "InspectInvitation", { token: tokenA });
    expect(stillA.status).toBe(200);
    expect(stillA.body).toMatchObject({ organizationName: "Default organisation", email: victim, role: "ROLE_ADMIN" });

    // What B's link can do: create the (unclaimed) address's account, a member of B and of nothing else.
    const created = await auth<{ organizationId: string }>(server, "CreateInvitedAccount", {
      token: tokenB,
      display_name: "Mallory",
      password: "mallory's takeover passphrase",
    });
    expect(created.status).toBe(200);
    expect(created.body.organizationId).toBe(b.organizationId);
    const mallory = cookieOf(created.response);

    // 4. GetOperatorSession lists B only, and A is out of reach: no admin key in A, no rotation of A's secret key.
    const session = await rpc<{ organizations: { organizationId: string; role: string }[] }>(server, mallory, "GetOperatorSession", {});
    expect(session.body.organizations).toEqual([expect.objectContaining({ organizationId: b.organizationId, role: "ROLE_MEMBER" })]);
    for (const [method, body] of [
      ["CreateApiKey", { name: "backdoor", role: "ROLE_ADMIN" }],
      ["RotateIdentityKey", { kind: "IDENTITY_KEY_KIND_SECRET" }],
      ["ListMembers", {}],
      ["ListInvitations", {}],
    ] as const) {
      const answer = await rpc(server, mallory, method, { organizationId: orgA, ...body });
      expect({ method, status: answer.status, reason: reasonOf(answer.body) }).toEqual({
        method,
        status: 404,
        reason: "organization_not_found",
      });
    }
    const secretStillWorks = await callIdentity(server, "GenerateMagicLink", { identifier: "probe@a.test" }, server.credentials.secret_key);
    expect(secretStillWorks.status).toBe(200);
    // B's token is spent; A's invitation needs A's token, which only A's admins were shown.
    const passwords = { currentPassword: "mallory's takeover passphrase", newPassword: "mallory's next passphrase" };
    expect(reasonOf((await rpc(server, mallory, "AcceptInvitation", { token: tokenB, ...passwords })).body)).toBe("invitation_not_found");
    expect(reasonOf((await rpc(server, mallory, "AcceptInvitation", { token: unknownToken(), ...passwords })).body)).toBe(
      "invitation_not_found",
    );
    const aInvitations = await rpc<{ invitations: InvitationJson[] }>(server, ownerA, "ListInvitations", { organizationId: orgA });
    expect(aInvitations.body.invitations.map((i) => [i.email, i.role])).toEqual([[victim, "ROLE_ADMIN"]]);
    expect(JSON.stringify(aInvitations.body)).not.toContain(tokenA);
  });

  test("an operator already set up in A keeps password, session and organisations when B invites them; B's link opens no door", async () => {
    const dana = await addMember(server, ownerA, { email: "dana@corp.test", password: "dana's own passphrase", role: "ROLE_ADMIN" });
    const passwordBefore = (await server.app.database.client.account.findUnique({ where: { id: dana.accountId } }))?.passwordHash;
    const byB = await rpc(server, b.cookie, "InviteMember", {
      organizationId: b.organizationId,
      email: "dana@corp.test",
      displayName: "Dana",
      role: "ROLE_ADMIN",
    });
    expect(byB.status).toBe(200);
    const tokenB = linkTokenIn(byB.body);
    // Neither door of the link gives B a credential for Dana's account.
    expect(
      (await dashboardAuthRpc(server, "SetUpAccount", { token: tokenB, email: "x@b.test", display_name: "X", password: "x's passphrase!" }))
        .status,
    ).toBe(404);
    const create = await auth(server, "CreateInvitedAccount", { token: tokenB, display_name: "X", password: "mallory's passphrase" });
    expect(create.status).toBe(409);
    expect(reasonOf(create.body)).toBe("account_exists");
    expect(create.response.headers.get("set-cookie")).toBeNull();
    const after = await server.app.database.client.account.findUnique({ where: { id: dana.accountId } });
    expect(after?.passwordHash).toBe(passwordBefore);
    expect((await signIn(server, "dana@corp.test", "dana's own passphrase")).length).toBeGreaterThan(0);
    // Invited is not joined: Dana is in B only once she accepts, signed in as herself, with B's token.
    const before = await rpc<{ organizations: { organizationId: string }[] }>(server, dana.cookie, "GetOperatorSession", {});
    expect(before.body.organizations.map((o) => o.organizationId)).toEqual([orgA]);
    const accepted = await rpc(server, dana.cookie, "AcceptInvitation", {
      token: tokenB,
      currentPassword: "dana's own passphrase",
      newPassword: "dana's new passphrase",
    });
    expect(accepted.status).toBe(200);
    const joined = await rpc<{ organizations: { organizationId: string }[] }>(server, dana.cookie, "GetOperatorSession", {});
    expect(joined.body.organizations.map((o) => o.organizationId).sort()).toEqual([orgA, b.organizationId].sort());
  });
});

describe("InviteMember answers alike for every address", () => {
  let server: DashboardTestServer;
  let owner: string;
  let other: Awaited<ReturnType<typeof secondOrganization>>;

  beforeAll(async () => {
    server = await startDashboardServer();
    owner = await setUpOwner(server);
    other = await secondOrganization(server, "boss@other.test", "Other organisation");
  });
  afterAll(() => server.close());

  /** An answer with what must differ (the address, ids, times, the token) replaced by their kind. */
  function shapeOf(answer: { status: number; headers: Headers; body: unknown }, email: string) {
    const text = JSON.stringify(answer.body)
      .replaceAll(email, "<email>")
      .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<uuid>")
      .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, "<time>")
      .replace(/#token=[A-Za-z0-9_-]{43}/g, "#token=<token>");
    const headers = [...answer.headers.keys()].filter((name) => name !== "date" && name !== "content-length" && name !== "x-request-id");
    return { status: answer.status, headers, body: JSON.parse(text) as unknown };
  }

  test("an address with a set-up account, one invited elsewhere and pending, and an unknown one get the same answer", async () => {
    const existing = "existing@corp.test";
    const pending = "pending@corp.test";
    const unknown = "unknown@corp.test";
    await addMember(server, other.cookie, { organizationId: other.organizationId, email: existing, password: "existing passphrase" });
    await invite(server, other.cookie, { organizationId: other.organizationId, email: pending });
    const accountsBefore = await server.app.database.client.account.findMany({ orderBy: { id: "asc" } });
    const tokensBefore = await server.app.database.client.accountSetupToken.findMany({ orderBy: { id: "asc" } });
    const membershipsBefore = await server.app.database.client.membership.findMany({
      orderBy: [{ organizationId: "asc" }, { accountId: "asc" }],
    });

    const answers = new Map<string, Awaited<ReturnType<typeof rpc<{ invitation: InvitationJson; invitationUrl: string }>>>>();
    for (const email of [existing, pending, unknown]) {
      answers.set(
        email,
        await rpc<{ invitation: InvitationJson; invitationUrl: string }>(server, owner, "InviteMember", {
          organizationId: server.credentials.organization_id,
          email,
          displayName: "Same Name",
          role: "ROLE_ADMIN",
        }),
      );
    }
    const shapes = [...answers].map(([email, answer]) => shapeOf(answer, email));
    expect(shapes[0]?.status).toBe(200);
    expect(shapes[1]).toEqual(shapes[0]);
    expect(shapes[2]).toEqual(shapes[0]);
    expect(Object.keys(answers.get(existing)?.body ?? {})).toEqual(Object.keys(answers.get(unknown)?.body ?? {}));
    expect(Object.keys(answers.get(existing)?.body.invitation ?? {})).toEqual(Object.keys(answers.get(unknown)?.body.invitation ?? {}));
    for (const answer of answers.values()) {
      const { createdAt, expiresAt } = answer.body.invitation;
      expect(Date.parse(expiresAt) - Date.parse(createdAt)).toBe(7 * 24 * 3600 * 1000);
      expect(answer.body.invitationUrl).toMatch(/\/dashboard\/invitation#token=[A-Za-z0-9_-]{43}$/);
    }
    // Inviting touched no account, no membership and no setup link anywhere.
    expect(await server.app.database.client.account.findMany({ orderBy: { id: "asc" } })).toEqual(accountsBefore);
    expect(await server.app.database.client.accountSetupToken.findMany({ orderBy: { id: "asc" } })).toEqual(tokensBefore);
    expect(await server.app.database.client.membership.findMany({ orderBy: [{ organizationId: "asc" }, { accountId: "asc" }] })).toEqual(
      membershipsBefore,
    );
  });

  test("every invalid field is listed, and a placeholder (.invalid) address is refused", async () => {
    const bad = await rpc(server, owner, "InviteMember", {
      organizationId: server.credentials.organization_id,
      email: "not an address",
      displayName: " ",
      role: "ROLE_UNSPECIFIED",
    });
    expect(bad.status).toBe(400);
    expect(fieldsOf(bad.body)).toEqual(["display_name", "email", "role"]);
    const placeholder = await rpc(server, owner, "InviteMember", {
      organizationId: server.credentials.organization_id,
      email: `owner+${other.organizationId}@setup.invalid`,
      displayName: "Owner",
      role: "ROLE_ADMIN",
    });
    expect(placeholder.status).toBe(400);
    expect(fieldsOf(placeholder.body)).toEqual(["email"]);
  });
});

describe("an invitation's token works once, and only for its address", () => {
  const manual = createManualClock(new Date());
  let server: DashboardTestServer;
  let owner: string;
  let org: string;

  beforeAll(async () => {
    server = await startDashboardServer({ clock: manual.clock });
    owner = await setUpOwner(server);
    org = server.credentials.organization_id;
  });
  afterAll(() => server.close());

  const createAccount = (token: string, password = "a racing passphrase") =>
    auth(server, "CreateInvitedAccount", { token, display_name: "Racer", password });

  test("of concurrent account creations with one token exactly one succeeds; the others answer as an unknown token does", async () => {
    const invited = await invite(server, owner, { email: "racer@example.com" });
    const attempts = await Promise.all(Array.from({ length: 6 }, () => createAccount(invited.token)));
    expect(attempts.filter((a) => a.status === 200)).toHaveLength(1);
    const unknown = await createAccount(unknownToken());
    expect(unknown.status).toBe(404);
    for (const refused of attempts.filter((a) => a.status !== 200)) {
      expect(refused.status).toBe(404);
      expect(refused.body).toEqual(unknown.body);
      expect(refused.response.headers.get("set-cookie")).toBeNull();
    }
    const db = server.app.database.client;
    const accounts = await db.account.findMany({ where: { email: "racer@example.com" } });
    expect(accounts).toHaveLength(1);
    expect(await db.membership.count({ where: { accountId: accounts[0]?.id } })).toBe(1);
    expect(await db.dashboardSession.count({ where: { accountId: accounts[0]?.id } })).toBe(1);
  });

  test("of concurrent acceptances by the invited account exactly one succeeds", async () => {
    const other = await secondOrganization(server, "boss@race.test", "Race organisation");
    const member = await addMember(server, owner, { email: "joiner@example.com", password: "a joining passphrase" });
    const invited = await invite(server, other.cookie, { organizationId: other.organizationId, email: "joiner@example.com" });
    const attempts = await Promise.all(
      Array.from({ length: 6 }, () =>
        rpc(server, member.cookie, "AcceptInvitation", {
          token: invited.token,
          currentPassword: "a joining passphrase",
          newPassword: "a joined passphrase",
        }),
      ),
    );
    expect(attempts.map((a) => a.status).sort()).toEqual([200, 404, 404, 404, 404, 404]);
    for (const refused of attempts.filter((a) => a.status !== 200)) expect(reasonOf(refused.body)).toBe("invitation_not_found");
    expect(await server.app.database.client.membership.count({ where: { accountId: member.accountId } })).toBe(2);
  });

  test("spent, revoked, replaced, unknown and someone else's tokens answer exactly alike on every door", async () => {
    const spent = await invite(server, owner, { email: "spent@example.com" });
    await createInvitedAccount(server, spent.token, "a spending passphrase");
    const revoked = await invite(server, owner, { email: "revoked@example.com" });
    expect((await rpc(server, owner, "RevokeInvitation", { organizationId: org, invitationId: revoked.invitationId })).status).toBe(200);
    const replaced = await invite(server, owner, { email: "replaced@example.com" });
    expect((await rpc(server, owner, "ReissueInvitation", { organizationId: org, invitationId: replaced.invitationId })).status).toBe(200);
    const someoneElses = await invite(server, owner, { email: "someone.else@example.com" });
    const signedIn = await addMember(server, owner, { email: "bystander@example.com", password: "a bystander passphrase" });

    const doors = {
      inspect: (token: string) => auth(server, "InspectInvitation", { token }),
      createAccount: (token: string) => createAccount(token),
      accept: (token: string) =>
        rpc(server, signedIn.cookie, "AcceptInvitation", {
          token,
          currentPassword: "a bystander passphrase",
          newPassword: "a bystander's new passphrase",
        }),
    };
    for (const [door, open] of Object.entries(doors)) {
      const baseline = await open(unknownToken());
      expect({ door, status: baseline.status, reason: reasonOf(baseline.body) }).toEqual({
        door,
        status: 404,
        reason: "invitation_not_found",
      });
      const cases: Record<string, string> = { spent: spent.token, revoked: revoked.token, replaced: replaced.token };
      // A token for another address is usable on the page that creates that address's account; accepting it as another account is not.
      if (door === "accept") cases.someoneElses = someoneElses.token;
      for (const [kind, token] of Object.entries(cases)) {
        const answer = await open(token);
        expect({ door, kind, status: answer.status, body: answer.body }).toEqual({ door, kind, status: 404, body: baseline.body });
      }
    }
    // Refusals spent nothing: the other address's invitation still works for that address.
    expect((await doors.inspect(someoneElses.token)).status).toBe(200);
  });

  test("an expired link answers as an unknown one, stays listed, and works again once re-issued", async () => {
    const invited = await invite(server, owner, { email: "late@example.com" });
    manual.advance(7 * 24 * 3600 * 1000);
    owner = await signIn(server, "owner@example.com", ownerPassword);
    const baseline = await auth(server, "InspectInvitation", { token: unknownToken() });
    for (const action of ["InspectInvitation", "CreateInvitedAccount"] as const) {
      const answer = await auth(
        server,
        action,
        requestOf(action, { token: invited.token, display_name: "Late", password: "a late passphrase" }),
      );
      expect({ action, status: answer.status, body: answer.body }).toEqual({ action, status: 404, body: baseline.body });
    }
    const listed = await rpc<{ invitations: InvitationJson[] }>(server, owner, "ListInvitations", { organizationId: org });
    const row = listed.body.invitations.find((i) => i.invitationId === invited.invitationId);
    expect(row && Date.parse(row.expiresAt)).toBe(manual.clock().getTime());
    const reissued = await rpc<{ invitation: InvitationJson; invitationUrl: string }>(server, owner, "ReissueInvitation", {
      organizationId: org,
      invitationId: invited.invitationId,
    });
    expect(reissued.status).toBe(200);
    expect(Date.parse(reissued.body.invitation.expiresAt)).toBe(manual.clock().getTime() + 7 * 24 * 3600 * 1000);
    expect((await createInvitedAccount(server, tokenOf(reissued.body.invitationUrl), "a late passphrase")).accountId).toMatch(
      /^[0-9a-f-]{36}$/,
    );
  });

  test("a refused account creation spends nothing: weak input is listed by field, an address with an account is told to sign in", async () => {
    const invited = await invite(server, owner, { email: "careful@example.com", displayName: "Carey" });
    const weak = await auth(server, "CreateInvitedAccount", { token: invited.token, display_name: "", password: "short" });
    expect(weak.status).toBe(400);
    expect(fieldsOf(weak.body)).toEqual(["display_name", "password"]);
    const missing = await auth(server, "CreateInvitedAccount", { display_name: "Carey", password: "a careful passphrase" });
    expect(missing.status).toBe(400);
    expect(fieldsOf(missing.body)).toEqual(["token"]);
    expect((await auth(server, "InspectInvitation", { token: invited.token })).status).toBe(200);

    await addMember(server, owner, { email: "taken@example.com", password: "the taken passphrase" });
    const other = await secondOrganization(server, "boss@taken.test", "Taken organisation");
    const elsewhere = await invite(server, other.cookie, { organizationId: other.organizationId, email: "taken@example.com" });
    const exists = await auth(server, "CreateInvitedAccount", {
      token: elsewhere.token,
      display_name: "T",
      password: "an attacker passphrase",
    });
    expect(exists.status).toBe(409);
    expect(reasonOf(exists.body)).toBe("account_exists");
    expect(exists.body.message).toContain("sign in as taken@example.com");
    expect((await auth(server, "InspectInvitation", { token: elsewhere.token })).status).toBe(200);
    expect((await signIn(server, "taken@example.com", "the taken passphrase")).length).toBeGreaterThan(0);
  });

  test("re-issuing replaces the link and its expiry; revoking ends it; both answer 404 for an invitation that is not pending here", async () => {
    const invited = await invite(server, owner, { email: "cycle@example.com" });
    const reissued = await rpc<{ invitation: InvitationJson; invitationUrl: string }>(server, owner, "ReissueInvitation", {
      organizationId: org,
      invitationId: invited.invitationId,
    });
    expect(reissued.status).toBe(200);
    expect(reissued.body.invitation).toMatchObject({ invitationId: invited.invitationId, email: "cycle@example.com" });
    expect((await auth(server, "InspectInvitation", { token: invited.token })).status).toBe(404);
    const fresh = tokenOf(reissued.body.invitationUrl);
    expect((await auth(server, "InspectInvitation", { token: fresh })).status).toBe(200);
    expect((await rpc(server, owner, "RevokeInvitation", { organizationId: org, invitationId: invited.invitationId })).status).toBe(200);
    expect((await auth(server, "InspectInvitation", { token: fresh })).status).toBe(404);
    const listed = await rpc<{ invitations?: InvitationJson[] }>(server, owner, "ListInvitations", { organizationId: org, pageSize: 100 });
    expect((listed.body.invitations ?? []).map((i) => i.invitationId)).not.toContain(invited.invitationId);
    for (const method of ["ReissueInvitation", "RevokeInvitation"]) {
      const gone = await rpc(server, owner, method, { organizationId: org, invitationId: invited.invitationId });
      expect({ method, status: gone.status, reason: reasonOf(gone.body) }).toEqual({ method, status: 404, reason: "invitation_not_found" });
      const malformed = await rpc(server, owner, method, { organizationId: org, invitationId: "not-a-uuid" });
      expect(fieldsOf(malformed.body)).toEqual(["invitation_id"]);
    }
  });

  test("an admin who is demoted or removed loses the links they made; re-issuing makes the re-issuing admin the inviter", async () => {
    const second = await addMember(server, owner, {
      email: "second.admin@example.com",
      role: "ROLE_ADMIN",
      password: "second admin passphrase",
    });
    const third = await addMember(server, owner, {
      email: "third.admin@example.com",
      role: "ROLE_ADMIN",
      password: "third admin passphrase",
    });
    const bySecond = await invite(server, second.cookie, { email: "from.second@example.com", role: "ROLE_ADMIN" });
    const reissuedByThird = await invite(server, second.cookie, { email: "reissued.by.third@example.com", role: "ROLE_ADMIN" });
    const byOwner = await invite(server, owner, { email: "from.owner@example.com" });
    const reissued = await rpc<{ invitation: InvitationJson; invitationUrl: string }>(server, third.cookie, "ReissueInvitation", {
      organizationId: org,
      invitationId: reissuedByThird.invitationId,
    });
    expect(reissued.body.invitation.invitedBy).toBe("Invited Person <third.admin@example.com>");

    // Demoted, the second admin's link stops working; the one the third admin re-issued and the owner's do not.
    expect(
      (await rpc(server, owner, "ChangeMemberRole", { organizationId: org, accountId: second.accountId, role: "ROLE_MEMBER" })).status,
    ).toBe(200);
    expect((await auth(server, "InspectInvitation", { token: bySecond.token })).status).toBe(404);
    expect((await auth(server, "InspectInvitation", { token: tokenOf(reissued.body.invitationUrl) })).status).toBe(200);
    expect((await auth(server, "InspectInvitation", { token: byOwner.token })).status).toBe(200);

    // Removed, the third admin's re-issued link stops working too.
    expect((await rpc(server, owner, "RemoveMember", { organizationId: org, accountId: third.accountId })).status).toBe(200);
    expect((await auth(server, "InspectInvitation", { token: tokenOf(reissued.body.invitationUrl) })).status).toBe(404);
    expect((await auth(server, "InspectInvitation", { token: byOwner.token })).status).toBe(200);
    const listed = await rpc<{ invitations: InvitationJson[] }>(server, owner, "ListInvitations", { organizationId: org, pageSize: 100 });
    const emails = listed.body.invitations.map((i) => i.email);
    expect(emails).toContain("from.owner@example.com");
    expect(emails).not.toContain("from.second@example.com");
    expect(emails).not.toContain("reissued.by.third@example.com");
  });

  test("a setup link never sets a new password on an account that has one", async () => {
    // A live setup token of a set-up account cannot be made through the API any more; a store may still hold one.
    const member = await addMember(server, owner, { email: "has.password@example.com", password: "the real passphrase" });
    const token = unknownToken();
    await createTenancyStore(server.app.database.client).createSetupToken({
      id: randomUUID(),
      accountId: member.accountId,
      hash: hashToken(token),
      expiresAt: new Date(manual.clock().getTime() + 3600_000),
    });
    const none = await auth(server, "SetUpAccount", {
      token: unknownToken(),
      email: "grab@example.com",
      display_name: "G",
      password: "a grabbing passphrase",
    });
    for (const action of ["InspectSetupLink", "SetUpAccount"] as const) {
      const body = { token, email: "grab@example.com", display_name: "G", password: "a grabbing passphrase" };
      const answer = await auth(server, action, requestOf(action, body));
      expect({ action, status: answer.status, reason: reasonOf(answer.body) }).toEqual({
        action,
        status: 404,
        reason: reasonOf(none.body),
      });
    }
    expect((await signIn(server, "has.password@example.com", "the real passphrase")).length).toBeGreaterThan(0);
  });

  test("members see pending invitations but cannot invite, re-issue or revoke", async () => {
    const member = await addMember(server, owner, { email: "reader@example.com", password: "a reading passphrase" });
    const invited = await invite(server, owner, { email: "pending.reader@example.com" });
    const listed = await rpc<{ invitations: InvitationJson[] }>(server, member.cookie, "ListInvitations", {
      organizationId: org,
      pageSize: 100,
    });
    expect(listed.status).toBe(200);
    expect(listed.body.invitations.map((i) => i.email)).toContain("pending.reader@example.com");
    for (const [method, body] of [
      ["InviteMember", { email: "x@example.com", displayName: "X", role: "ROLE_MEMBER" }],
      ["ReissueInvitation", { invitationId: invited.invitationId }],
      ["RevokeInvitation", { invitationId: invited.invitationId }],
    ] as const) {
      const answer = await rpc(server, member.cookie, method, { organizationId: org, ...body });
      expect({ method, status: answer.status }).toEqual({ method, status: 403 });
    }
    expect((await auth(server, "InspectInvitation", { token: invited.token })).status).toBe(200);
  });

  test("the invitation RPCs refuse other sites' pages, wrong media types, malformed and oversize bodies", async () => {
    const invited = await invite(server, owner, { email: "guarded@example.com" });
    for (const action of ["InspectInvitation", "CreateInvitedAccount"] as const) {
      const body = requestOf(action, { token: invited.token, display_name: "G", password: "a guarded passphrase" });
      expect((await dashboardAuthRpc(server, action, body, { origin: "https://evil.example" })).status).toBe(403);
      expect((await dashboardAuthRpc(server, action, body, { origin: null })).status).toBe(403);
      expect((await dashboardAuthRpc(server, action, body, { marked: false })).status).toBe(403);
      const url = `${server.url}/svc.v1.DashboardAuthService/${action}`;
      const headers = { origin: server.origin, "x-gatehouse-dashboard": "1" };
      const plain = await fetch(url, { method: "POST", headers: { ...headers, "content-type": "text/plain" }, body: JSON.stringify(body) });
      expect(plain.status).toBe(415);
      // A broken body is located, never repeated (it may hold a password).
      const broken = await fetch(url, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: '{"token": "x", "password": "hunter2-secret',
      });
      expect(broken.status).toBe(400);
      const brokenBody = (await broken.json()) as ErrorBody;
      expect(reasonOf(brokenBody)).toBe("malformed_json");
      expect(brokenBody.message).toMatch(/line 1, column \d+/);
      expect(JSON.stringify(brokenBody)).not.toContain("hunter2");
      const typed = await dashboardAuthRpc(server, action, { token: 42 });
      expect(typed.status).toBe(400);
      expect(((await typed.json()) as ErrorBody).message).toContain('field "token" must be a string');
      const unknownField = await dashboardAuthRpc(server, action, { token: invited.token, tokne: "typo" });
      expect(unknownField.status).toBe(400);
      expect(JSON.stringify(await unknownField.json())).not.toContain("typo");
      const oversize = await fetch(url, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: JSON.stringify({ token: "x".repeat(6 * 1024 * 1024) }),
      });
      expect(reasonOf((await oversize.json()) as ErrorBody)).toBe("body_too_large");
      expect((await dashboardAuthRpc(server, action, [])).status).toBe(400);
      expect((await dashboardAuthRpc(server, action, { token: "x".repeat(200) })).status).toBe(400);
    }
    const long = await auth(server, "CreateInvitedAccount", {
      token: invited.token,
      display_name: "x".repeat(20_000),
      password: "a guarded passphrase",
    });
    expect({ status: long.status, fields: fieldsOf(long.body) }).toEqual({ status: 400, fields: ["display_name"] });
    // Nothing was spent by any of it.
    expect((await auth(server, "InspectInvitation", { token: invited.token })).status).toBe(200);
  });
});

describe("upgrading a store that holds setup-link invitations (migration 0003)", () => {
  let db: TestDatabase;
  let server: DashboardTestServer | undefined;
  const staleToken = "S".repeat(43);
  const ownerBToken = "O".repeat(43);
  const ids = {
    orgA: randomUUID(),
    orgB: randomUUID(),
    owner: randomUUID(),
    pat: randomUUID(),
    sam: randomUUID(),
    placeholder: randomUUID(),
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    // The store as the previous release left it: migrations up to 0002 only.
    const earlier = mkdtempSync(join(tmpdir(), "gatehouse-migrations-"));
    const source = join(process.cwd(), "prisma", db.provider, "migrations");
    for (const name of ["0001_init", "0002_operator_passkeys"]) cpSync(join(source, name), join(earlier, name), { recursive: true });
    const target =
      db.provider === "sqlite"
        ? { provider: "sqlite" as const, file: join(db.dataDir, "gatehouse.db") }
        : { provider: "postgresql" as const, url: db.url };
    await applyMigrations(target, { migrationsDir: earlier });
    rmSync(earlier, { recursive: true, force: true });
    const old = await openDatabase(target, { migrate: false });
    try {
      const now = new Date();
      const week = new Date(now.getTime() + 7 * 24 * 3600 * 1000);
      const client = old.client;
      const hasher = createPasswordHasher();
      // Tables that later migrations gave more columns are written with plain SQL: the current client
      // would name those columns, which this store does not have yet.
      await client.$executeRaw`INSERT INTO "SystemState" ("key", "value") VALUES ('initialized', ${now.toISOString()})`;
      await client.$executeRaw`INSERT INTO "Organization" ("id", "name") VALUES (${ids.orgA}, 'Organisation A')`;
      await client.$executeRaw`INSERT INTO "Organization" ("id", "name") VALUES (${ids.orgB}, 'Organisation B')`;
      await client.account.create({
        data: {
          id: ids.owner,
          email: "owner@example.com",
          displayName: "Olive Owner",
          kind: "person",
          passwordHash: await hasher.hash(ownerPassword),
        },
      });
      await client.account.create({
        data: {
          id: ids.sam,
          email: "sam@example.com",
          displayName: "Sam",
          kind: "person",
          passwordHash: await hasher.hash("sam's passphrase"),
        },
      });
      // Invited by A and then by B, never set up: the account the old flaw let B take over. One live link, whose organisation nobody knows.
      await client.account.create({ data: { id: ids.pat, email: "pat@example.com", displayName: "Pat Pending", kind: "person" } });
      // B's owner placeholder from `gatehouse orgs create`, not set up yet.
      await client.account.create({
        data: { id: ids.placeholder, email: `owner+${ids.orgB}@setup.invalid`, displayName: "Owner", kind: "person" },
      });
      await client.membership.createMany({
        data: [
          { organizationId: ids.orgA, accountId: ids.owner, role: "admin" },
          { organizationId: ids.orgA, accountId: ids.sam, role: "member" },
          { organizationId: ids.orgA, accountId: ids.pat, role: "admin" },
          { organizationId: ids.orgB, accountId: ids.pat, role: "member" },
          { organizationId: ids.orgB, accountId: ids.placeholder, role: "admin" },
        ],
      });
      await client.accountSetupToken.create({
        data: { id: randomUUID(), accountId: ids.pat, hash: hashToken(staleToken), expiresAt: week },
      });
      await client.accountSetupToken.create({
        data: { id: randomUUID(), accountId: ids.placeholder, hash: hashToken(ownerBToken), expiresAt: week },
      });
    } finally {
      await old.close();
    }
    server = await startDashboardServer({ db });
  });
  afterAll(async () => {
    await server?.close();
    await db.drop();
  });

  test("each membership of a never-set-up invitee becomes an expired invitation of that organisation; the account and its link are gone", async () => {
    const client = server?.app.database.client;
    if (!client || !server) throw new Error("no server");
    const invitations = await client.invitation.findMany({ orderBy: { organizationId: "asc" } });
    expect(
      invitations
        .map((i) => ({ org: i.organizationId, email: i.email, role: i.role, name: i.displayName }))
        .sort((x, y) => x.org.localeCompare(y.org)),
    ).toEqual(
      [
        { org: ids.orgA, email: "pat@example.com", role: "admin", name: "Pat Pending" },
        { org: ids.orgB, email: "pat@example.com", role: "member", name: "Pat Pending" },
      ].sort((x, y) => x.org.localeCompare(y.org)),
    );
    for (const invitation of invitations) {
      expect(invitation.expiresAt.getTime()).toBeLessThanOrEqual(Date.now());
      expect(invitation.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    }
    expect(await client.account.findUnique({ where: { id: ids.pat } })).toBeNull();
    expect(await client.membership.count({ where: { accountId: ids.pat } })).toBe(0);
    expect(await client.accountSetupToken.count({ where: { accountId: ids.pat } })).toBe(0);
    // The old link opens nothing, on either page.
    expect((await auth(server, "InspectSetupLink", { token: staleToken })).status).toBe(404);
    expect((await auth(server, "InspectInvitation", { token: staleToken })).status).toBe(404);
    // Set-up accounts and their memberships are untouched.
    expect(await client.membership.count({ where: { accountId: { in: [ids.owner, ids.sam] } } })).toBe(2);
  });

  test("an admin sees the migrated invitation, re-issues it, and the invitee joins that organisation only", async () => {
    if (!server) throw new Error("no server");
    const owner = await signIn(server, "owner@example.com", ownerPassword);
    const listed = await rpc<{ invitations: InvitationJson[] }>(server, owner, "ListInvitations", { organizationId: ids.orgA });
    expect(listed.body.invitations).toEqual([expect.objectContaining({ email: "pat@example.com", role: "ROLE_ADMIN" })]);
    expect(listed.body.invitations[0]?.invitedBy ?? "").toBe("");
    const reissued = await rpc<{ invitationUrl: string }>(server, owner, "ReissueInvitation", {
      organizationId: ids.orgA,
      invitationId: listed.body.invitations[0]?.invitationId,
    });
    expect(reissued.status).toBe(200);
    const pat = await createInvitedAccount(server, tokenOf(reissued.body.invitationUrl), "pat's new passphrase", "Pat");
    const session = await rpc<{ organizations: { organizationId: string; role: string }[] }>(server, pat.cookie, "GetOperatorSession", {});
    expect(session.body.organizations).toEqual([expect.objectContaining({ organizationId: ids.orgA, role: "ROLE_ADMIN" })]);
  });

  test("an organisation owner's setup link from before the upgrade keeps working", async () => {
    if (!server) throw new Error("no server");
    const inspect = await auth(server, "InspectSetupLink", { token: ownerBToken });
    expect(inspect.status).toBe(200);
    // proto3 JSON leaves out a field at its default: the empty e-mail address is absent.
    expect(inspect.body).toEqual({ displayName: "Owner" });
    const setup = await dashboardAuthRpc(server, "SetUpAccount", {
      token: ownerBToken,
      email: "bea@example.com",
      display_name: "Bea",
      password: "bea's new passphrase",
    });
    expect(setup.status).toBe(200);
    const session = await rpc<{ organizations: { organizationId: string }[] }>(server, cookieOf(setup), "GetOperatorSession", {});
    expect(session.body.organizations.map((o) => o.organizationId)).toEqual([ids.orgB]);
  });
});
