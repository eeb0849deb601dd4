import { randomUUID } from "node:crypto";
import { DashboardService } from "../../gen/svc/v1/dashboard_pb.js";
import { DashboardAuthService } from "../../gen/svc/v1/dashboard_auth_pb.js";
import { hashToken } from "../../src/crypto/tokens.js";
import { issueOperatorSignInLink } from "../../src/composition/operator-links.js";
import { createTenancyStore } from "../../src/storage/tenancy-store.js";
import {
  addPasskey,
  apiKeyNamesOf,
  auth,
  call,
  fieldsOf,
  organizationOf,
  reasonOf,
  signInWith,
  signInWithPasskey,
} from "../support/dashboard-accounts.js";
import {
  addMember,
  cookieOf,
  createInvitedAccount,
  dashboardAuthRpc,
  invite,
  setUpOwner,
  startDashboardServer,
  tokenOf,
  type DashboardTestServer,
} from "../support/dashboard-server.js";
import { createSoftwareAuthenticator } from "../support/software-authenticator.js";

/**
 * docs/security.md, "The dashboard and operator accounts": no credential of
 * one organisation ever acts in another. One test (or a few) per dashboard
 * flow: invitations, setup links, sign-in links, passkeys, e-mail addresses,
 * role changes. In each, the attacker holds every credential organisation B
 * can give (its admin's session, its invitation links, accounts made from
 * them); the witness is organisation A, whose API keys must not change and
 * where the attacker's every credential must answer 401 or 404. A real
 * server over real HTTP; passkeys from a software authenticator.
 */

const attackerPassword = "mallory's chosen passphrase";
const ownPassword = "the invitee's own passphrase";

let server: DashboardTestServer;
let ownerA: string;
let orgA: string;
let orgB: { organizationId: string; cookie: string };
let sequence = 0;

beforeAll(async () => {
  // Every test here signs in often from one client address: room beyond the default 60 a minute.
  server = await startDashboardServer({ publicHost: "localhost", env: { DASHBOARD_SIGN_IN_LIMIT_PER_MINUTE: "1000" } });
  ownerA = await setUpOwner(server, "alice@a.test");
  orgA = server.credentials.organization_id;
  orgB = await organizationOf(server, { name: "Organisation B", email: "mallory@b.test", password: "mallory's admin passphrase" });
});
afterAll(() => server.close());

/** A fresh address per test. */
const address = (label: string) => `${label}.${++sequence}@corp.test`;

const cookieIn = (answer: { response: Response }) => cookieOf(answer.response);

/**
 * None of `cookies` acts in A: each answers CreateApiKey in A with 401 (no live
 * session) or 404 (not a member there), and A's API keys are unchanged.
 */
async function expectNoneActsInA(cookies: string[]): Promise<void> {
  const before = await apiKeyNamesOf(server, ownerA, orgA);
  for (const cookie of cookies) {
    const answer = await call(server, cookie, "CreateApiKey", { organizationId: orgA, name: "backdoor", role: "ROLE_ADMIN" });
    expect([401, 404]).toContain(answer.status);
  }
  expect(await apiKeyNamesOf(server, ownerA, orgA)).toEqual(before);
}

/** B's admin makes the account of `email` from B's link, with their password and a passkey. */
async function madeByB(email: string) {
  const byB = await invite(server, orgB.cookie, { organizationId: orgB.organizationId, email });
  const made = await createInvitedAccount(server, byB.token, attackerPassword);
  const authenticator = createSoftwareAuthenticator(server.origin);
  expect((await addPasskey(server, authenticator, made.cookie)).status).toBe(200);
  return { ...made, authenticator };
}

/** The recovery (the operator command's own function, in this process) spent on the sign-in page. */
async function recoverInProcess(email: string): Promise<string> {
  const link = await issueOperatorSignInLink(server.app, { email });
  const answer = await auth(server, "SignInWithLink", { token: link.token });
  expect(answer.status).toBe(200);
  return cookieIn(answer);
}

async function organizationsOf(cookie: string): Promise<string[]> {
  const session = await call<{ organizations?: { organizationId: string }[] }>(server, cookie, "GetOperatorSession", {});
  return (session.body.organizations ?? []).map((o) => o.organizationId).sort();
}

describe("invitations", () => {
  test("an account made from B's link is a member of B only, whatever A's invitations for its address", async () => {
    const email = address("invited-by-both");
    const byA = await invite(server, ownerA, { organizationId: orgA, email, role: "ROLE_ADMIN" });
    const made = await madeByB(email);
    expect(await organizationsOf(made.cookie)).toEqual([orgB.organizationId]);
    await expectNoneActsInA([made.cookie, orgB.cookie]);
    // A's invitation stays, for the person holding A's link.
    expect((await auth(server, "InspectInvitation", { token: byA.token })).status).toBe(200);
    const created = await auth(server, "CreateInvitedAccount", { token: byA.token, display_name: "X", password: ownPassword });
    expect({ status: created.status, reason: reasonOf(created.body) }).toEqual({ status: 409, reason: "account_exists" });
    expect(created.body.message).toContain("gatehouse operators sign-in-link");
  });

  test("joining needs the current password and a new one; refusals are listed by field, counted, and spend nothing", async () => {
    const email = address("joiner");
    const byA = await invite(server, ownerA, { organizationId: orgA, email });
    const made = await madeByB(email);
    const bare = await call(server, made.cookie, "AcceptInvitation", { token: byA.token });
    expect({ status: bare.status, fields: fieldsOf(bare.body) }).toEqual({ status: 400, fields: ["current_password", "new_password"] });
    const weak = await call(server, made.cookie, "AcceptInvitation", { token: byA.token, currentPassword: "x", newPassword: "password" });
    expect({ status: weak.status, fields: fieldsOf(weak.body) }).toEqual({ status: 400, fields: ["new_password"] });
    const wrong = await call(server, made.cookie, "AcceptInvitation", {
      token: byA.token,
      currentPassword: "not the password at all",
      newPassword: ownPassword,
    });
    expect({ status: wrong.status, reason: reasonOf(wrong.body), fields: fieldsOf(wrong.body) }).toEqual({
      status: 400,
      reason: "wrong_password",
      fields: ["current_password"],
    });
    expect(JSON.stringify(wrong.body)).not.toContain("not the password at all");
    expect(
      await server.app.database.client.loginFailure.count({ where: { organizationId: "dashboard", identifier: hashToken(email) } }),
    ).toBe(1);
    // Nothing was spent or changed: the link works and the account is in B only, with its password.
    expect((await auth(server, "InspectInvitation", { token: byA.token })).status).toBe(200);
    expect(await organizationsOf(made.cookie)).toEqual([orgB.organizationId]);
    expect((await signInWith(server, email, attackerPassword)).status).toBe(200);
  });

  test("a link accepted while signed in as another account answers as an unknown link and binds nothing", async () => {
    const email = address("someone");
    const byA = await invite(server, ownerA, { organizationId: orgA, email, role: "ROLE_ADMIN" });
    const passwords = { currentPassword: "mallory's admin passphrase", newPassword: "mallory's new passphrase" };
    const foreign = await call(server, orgB.cookie, "AcceptInvitation", { token: byA.token, ...passwords });
    const unknown = await call(server, orgB.cookie, "AcceptInvitation", { token: "U".repeat(43), ...passwords });
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual(unknown.body);
    expect(await organizationsOf(orgB.cookie)).toEqual([orgB.organizationId]);
    expect((await auth(server, "InspectInvitation", { token: byA.token })).status).toBe(200);
    await expectNoneActsInA([orgB.cookie]);
  });

  test("re-issuing is per organisation, and a re-issued link to an address with an account still replaces its credentials", async () => {
    const email = address("reissued");
    const first = await invite(server, ownerA, { organizationId: orgA, email });
    const made = await madeByB(email);
    // B re-issues its own invitations of other addresses as it likes: A's link keeps working.
    const another = await invite(server, orgB.cookie, { organizationId: orgB.organizationId, email: address("b-only") });
    expect(
      (await call(server, orgB.cookie, "ReissueInvitation", { organizationId: orgB.organizationId, invitationId: another.invitationId }))
        .status,
    ).toBe(200);
    expect((await call(server, orgB.cookie, "ReissueInvitation", { organizationId: orgA, invitationId: first.invitationId })).status).toBe(
      404,
    );
    expect((await auth(server, "InspectInvitation", { token: first.token })).status).toBe(200);
    // A re-issues: the old link is void, the new one needs the account's sign-in and a new password.
    const reissued = await call<{ invitationUrl: string }>(server, ownerA, "ReissueInvitation", {
      organizationId: orgA,
      invitationId: first.invitationId,
    });
    expect((await auth(server, "InspectInvitation", { token: first.token })).status).toBe(404);
    const holder = cookieIn(await signInWith(server, email, attackerPassword));
    const joined = await call(server, holder, "AcceptInvitation", {
      token: tokenOf(reissued.body.invitationUrl),
      currentPassword: attackerPassword,
      newPassword: ownPassword,
    });
    expect(joined.status).toBe(200);
    expect((await call(server, made.cookie, "GetOperatorSession", {})).status).toBe(401);
    expect((await signInWithPasskey(server, made.authenticator)).status).toBe(401);
    expect((await signInWith(server, email, attackerPassword)).status).toBe(401);
    expect(await organizationsOf(holder)).toEqual([orgA, orgB.organizationId].sort());
  });
});

describe("setup links", () => {
  test("an owner who sets up a new organisation with an address A invited gains nothing in A; the recovery takes it back", async () => {
    const email = address("owner-grab");
    const byA = await invite(server, ownerA, { organizationId: orgA, email, role: "ROLE_ADMIN" });
    const c = await server.app.tenancy.createOrganization("Organisation C");
    const grabbed = await auth(server, "SetUpAccount", {
      token: tokenOf(c.dashboardSetupUrl),
      email,
      display_name: "Mallory as owner",
      password: attackerPassword,
    });
    expect(grabbed.status).toBe(200);
    const attacker = cookieIn(grabbed);
    expect(await organizationsOf(attacker)).toEqual([c.organizationId]);
    await expectNoneActsInA([attacker]);

    const recovered = await recoverInProcess(email);
    expect((await call(server, attacker, "GetOperatorSession", {})).status).toBe(401);
    const joined = await call(server, recovered, "AcceptInvitation", { token: byA.token, newPassword: ownPassword });
    expect(joined.status).toBe(200);
    await expectNoneActsInA([attacker]);
    expect((await signInWith(server, email, attackerPassword)).status).toBe(401);
    // The address's person holds the account now, in A and in C.
    expect(await organizationsOf(recovered)).toEqual([orgA, c.organizationId].sort());
  });

  test("a setup link sets up an owner placeholder only, never an account a recovery left without a password", async () => {
    const email = address("recovered");
    await addMember(server, ownerA, { organizationId: orgA, email, password: ownPassword });
    await recoverInProcess(email);
    const account = await server.app.database.client.account.findUnique({ where: { email } });
    expect(account?.passwordHash).toBeNull();
    // No flow makes such a link; a store may still hold one.
    const token = "T".repeat(43);
    await createTenancyStore(server.app.database.client).createSetupToken({
      id: randomUUID(),
      accountId: account?.id ?? "",
      hash: hashToken(token),
      expiresAt: new Date(Date.now() + 3600_000),
    });
    for (const method of ["InspectSetupLink", "SetUpAccount"] as const) {
      const body = method === "SetUpAccount" ? { token, email: address("grab"), display_name: "G", password: attackerPassword } : { token };
      const answer = await auth(server, method, body);
      expect({ method, status: answer.status, reason: reasonOf(answer.body) }).toEqual({
        method,
        status: 404,
        reason: "setup_link_not_found",
      });
    }
  });
});

describe("sign-in links (the recovery)", () => {
  test("a recovery ends every other session, removes password and passkeys, voids other links; the person sets their own", async () => {
    const email = address("recovery");
    const member = await addMember(server, ownerA, { organizationId: orgA, email, password: attackerPassword });
    const authenticator = createSoftwareAuthenticator(server.origin);
    expect((await addPasskey(server, authenticator, member.cookie)).status).toBe(200);
    const second = cookieIn(await signInWith(server, email, attackerPassword));
    const spare = await issueOperatorSignInLink(server.app, { email });

    const recovered = await recoverInProcess(email);
    for (const cookie of [member.cookie, second]) expect((await call(server, cookie, "GetOperatorSession", {})).status).toBe(401);
    expect((await signInWith(server, email, attackerPassword)).status).toBe(401);
    expect((await signInWithPasskey(server, authenticator)).status).toBe(401);
    const spent = await auth(server, "SignInWithLink", { token: spare.token });
    expect({ status: spent.status, reason: reasonOf(spent.body) }).toEqual({ status: 400, reason: "sign_in_link_used" });
    await expectNoneActsInA([member.cookie, second]);

    // Without a password the account may still get a link, and its session sets one without a current password.
    expect((await issueOperatorSignInLink(server.app, { email })).accountId).toBe(member.accountId);
    const session = await call<{ operator: { hasPassword?: boolean } }>(server, recovered, "GetOperatorSession", {});
    expect(session.body.operator.hasPassword ?? false).toBe(false);
    expect((await call(server, recovered, "SetOperatorPassword", { newPassword: ownPassword })).status).toBe(200);
    const after = await call<{ operator: { hasPassword?: boolean } }>(server, recovered, "GetOperatorSession", {});
    expect(after.body.operator.hasPassword).toBe(true);
    const signedIn = await signInWith(server, email, ownPassword);
    expect(signedIn.status).toBe(200);
    // With a password, changing it needs that password, and ends the other sessions.
    const bare = await call(server, recovered, "SetOperatorPassword", { newPassword: "yet another passphrase" });
    expect({ status: bare.status, fields: fieldsOf(bare.body) }).toEqual({ status: 400, fields: ["current_password"] });
    const changed = await call(server, recovered, "SetOperatorPassword", {
      currentPassword: ownPassword,
      newPassword: "yet another passphrase",
    });
    expect(changed.status).toBe(200);
    expect((await call(server, cookieIn(signedIn), "GetOperatorSession", {})).status).toBe(401);
    expect((await call(server, recovered, "GetOperatorSession", {})).status).toBe(200);
  });

  test("of recoveries of one account at once with several links, one signs in and the others find their link void", async () => {
    const email = address("racing-recovery");
    await addMember(server, ownerA, { organizationId: orgA, email, password: ownPassword });
    const links = await Promise.all(Array.from({ length: 4 }, () => issueOperatorSignInLink(server.app, { email })));
    for (let round = 0; round < 3; round++) {
      const fresh =
        round === 0 ? links : await Promise.all(Array.from({ length: 4 }, () => issueOperatorSignInLink(server.app, { email })));
      const answers = await Promise.all(fresh.map((link) => auth(server, "SignInWithLink", { token: link.token })));
      expect(answers.map((a) => a.status).sort()).toEqual([200, 400, 400, 400]);
      for (const refused of answers.filter((a) => a.status !== 200)) expect(reasonOf(refused.body)).toBe("sign_in_link_used");
    }
  });

  test("an add-passkey ceremony begun by a session the recovery ended cannot be finished, by it or by the recovered one", async () => {
    const email = address("ceremony");
    const made = await madeByB(email);
    const begun = await call<{ ceremonyId: string; options: { challenge: string; rp: { id?: string }; user: { id: string } } }>(
      server,
      made.cookie,
      "BeginAddOperatorPasskey",
      {},
    );
    expect(begun.status).toBe(200);
    const credential = made.authenticator.create(begun.body.options);
    const recovered = await recoverInProcess(email);
    const byAttacker = await call(server, made.cookie, "FinishAddOperatorPasskey", {
      ceremonyId: begun.body.ceremonyId,
      credential,
      name: "",
    });
    expect(byAttacker.status).toBe(401);
    const byRecovered = await call(server, recovered, "FinishAddOperatorPasskey", {
      ceremonyId: begun.body.ceremonyId,
      credential,
      name: "",
    });
    expect({ status: byRecovered.status, reason: reasonOf(byRecovered.body) }).toEqual({ status: 401, reason: "ceremony_not_found" });
    expect((await call<{ passkeys?: unknown[] }>(server, recovered, "ListOperatorPasskeys", {})).body.passkeys ?? []).toEqual([]);
  });
});

describe("passkeys", () => {
  test("a passkey sign-in begun before a recovery cannot finish after it", async () => {
    const email = address("passkey-race");
    const made = await madeByB(email);
    const begun = await dashboardAuthRpc(server, "BeginPasskeySignIn", {});
    const options = ((await begun.json()) as { options: { challenge: string; rpId?: string } }).options;
    await recoverInProcess(email);
    const finished = await auth(
      server,
      "FinishPasskeySignIn",
      { credential: made.authenticator.get(options) },
      { cookie: cookieOf(begun) },
    );
    expect({ status: finished.status, reason: reasonOf(finished.body) }).toEqual({ status: 401, reason: "passkey_not_found" });
    expect(finished.response.headers.getSetCookie().some((c) => c.startsWith("gatehouse_dashboard="))).toBe(false);
  });

  test("joining A removes every passkey the account had; one added afterwards signs in to A and B", async () => {
    const email = address("passkey-join");
    const byA = await invite(server, ownerA, { organizationId: orgA, email });
    const made = await madeByB(email);
    const holder = cookieIn(await signInWith(server, email, attackerPassword));
    const joined = await call(server, holder, "AcceptInvitation", {
      token: byA.token,
      currentPassword: attackerPassword,
      newPassword: ownPassword,
    });
    expect(joined.status).toBe(200);
    expect((await signInWithPasskey(server, made.authenticator)).status).toBe(401);
    const own = createSoftwareAuthenticator(server.origin);
    expect((await addPasskey(server, own, holder)).status).toBe(200);
    const signedIn = await signInWithPasskey(server, own);
    expect(signedIn.status).toBe(200);
    expect(await organizationsOf(cookieIn(signedIn))).toEqual([orgA, orgB.organizationId].sort());
  });
});

describe("e-mail addresses", () => {
  test("no RPC changes an account's address: the only requests naming one invite, sign in, or set up an owner placeholder", () => {
    const withEmail = [DashboardService, DashboardAuthService].flatMap((service) =>
      service.methods.filter((m) => m.input.fields.some((f) => f.name === "email")).map((m) => `${service.name}/${m.name}`),
    );
    expect(withEmail.sort()).toEqual([
      "DashboardAuthService/BeginPasskeySignIn",
      "DashboardAuthService/SetUpAccount",
      "DashboardAuthService/SignIn",
      "DashboardService/InviteMember",
    ]);
  });

  test("an owner's setup cannot take an address that has an account, and leaves that account as it was", async () => {
    const email = address("taken");
    const member = await addMember(server, ownerA, { organizationId: orgA, email, password: ownPassword });
    const before = await server.app.database.client.account.findUnique({ where: { id: member.accountId } });
    const d = await server.app.tenancy.createOrganization("Organisation D");
    const taken = await auth(server, "SetUpAccount", {
      token: tokenOf(d.dashboardSetupUrl),
      email,
      display_name: "Grabber",
      password: attackerPassword,
    });
    expect({ status: taken.status, reason: reasonOf(taken.body) }).toEqual({ status: 409, reason: "email_taken" });
    expect(taken.response.headers.get("set-cookie")).toBeNull();
    expect(await server.app.database.client.account.findUnique({ where: { id: member.accountId } })).toEqual(before);
    expect((await call(server, member.cookie, "GetOperatorSession", {})).status).toBe(200);
  });
});

describe("role changes", () => {
  test("B's admin can neither change roles nor remove members of A, by A's id or through B", async () => {
    const member = await addMember(server, ownerA, { organizationId: orgA, email: address("a-member"), password: ownPassword });
    for (const [method, extra] of [
      ["ChangeMemberRole", { role: "ROLE_ADMIN" }],
      ["RemoveMember", {}],
    ] as const) {
      const inA = await call(server, orgB.cookie, method, { organizationId: orgA, accountId: member.accountId, ...extra });
      expect({ method, status: inA.status, reason: reasonOf(inA.body) }).toEqual({ method, status: 404, reason: "organization_not_found" });
      const viaB = await call(server, orgB.cookie, method, { organizationId: orgB.organizationId, accountId: member.accountId, ...extra });
      expect({ method, status: viaB.status, reason: reasonOf(viaB.body) }).toEqual({ method, status: 404, reason: "member_not_found" });
    }
    expect(await organizationsOf(member.cookie)).toEqual([orgA]);
  });

  test("a member of A can neither change roles nor remove anyone", async () => {
    const member = await addMember(server, ownerA, { organizationId: orgA, email: address("plain"), password: ownPassword });
    const owner = (await call<{ operator: { accountId: string } }>(server, ownerA, "GetOperatorSession", {})).body.operator.accountId;
    for (const [method, body] of [
      ["ChangeMemberRole", { accountId: member.accountId, role: "ROLE_ADMIN" }],
      ["ChangeMemberRole", { accountId: owner, role: "ROLE_MEMBER" }],
      ["RemoveMember", { accountId: owner }],
    ] as const) {
      const answer = await call(server, member.cookie, method, { organizationId: orgA, ...body });
      expect({ method, status: answer.status }).toEqual({ method, status: 403 });
    }
  });

  test("demoting and removing a shared account in B leaves its access to A and its credentials as they were", async () => {
    const email = address("shared");
    const inB = await addMember(server, orgB.cookie, {
      organizationId: orgB.organizationId,
      email,
      password: ownPassword,
      role: "ROLE_ADMIN",
    });
    const byA = await invite(server, ownerA, { organizationId: orgA, email, role: "ROLE_ADMIN" });
    expect(
      (
        await call(server, inB.cookie, "AcceptInvitation", {
          token: byA.token,
          currentPassword: ownPassword,
          newPassword: "the shared passphrase",
        })
      ).status,
    ).toBe(200);
    expect(
      (
        await call(server, orgB.cookie, "ChangeMemberRole", {
          organizationId: orgB.organizationId,
          accountId: inB.accountId,
          role: "ROLE_MEMBER",
        })
      ).status,
    ).toBe(200);
    expect(
      (await call(server, orgB.cookie, "RemoveMember", { organizationId: orgB.organizationId, accountId: inB.accountId })).status,
    ).toBe(200);
    expect(await organizationsOf(inB.cookie)).toEqual([orgA]);
    const key = await call(server, inB.cookie, "CreateApiKey", { organizationId: orgA, name: `shared ${sequence}`, role: "ROLE_MEMBER" });
    expect(key.status).toBe(200);
    expect((await signInWith(server, email, "the shared passphrase")).status).toBe(200);
  });

  test("within one organisation any admin may demote or remove another, its first admin included, never the last", async () => {
    const e = await organizationOf(server, { name: "Organisation E", email: address("e-owner"), password: ownPassword });
    const ownerId = (await call<{ operator: { accountId: string } }>(server, e.cookie, "GetOperatorSession", {})).body.operator.accountId;
    const second = await addMember(server, e.cookie, {
      organizationId: e.organizationId,
      email: address("e-admin"),
      password: ownPassword,
      role: "ROLE_ADMIN",
    });
    const demoted = await call(server, second.cookie, "ChangeMemberRole", {
      organizationId: e.organizationId,
      accountId: ownerId,
      role: "ROLE_MEMBER",
    });
    expect(demoted.status).toBe(200);
    const last = await call(server, second.cookie, "RemoveMember", { organizationId: e.organizationId, accountId: second.accountId });
    expect({ status: last.status, reason: reasonOf(last.body) }).toEqual({ status: 400, reason: "last_admin" });
    expect((await call(server, second.cookie, "RemoveMember", { organizationId: e.organizationId, accountId: ownerId })).status).toBe(200);
    // The first admin, removed from their only organisation, is disabled and signed out; A never saw any of it.
    expect((await call(server, e.cookie, "GetOperatorSession", {})).status).toBe(401);
    await expectNoneActsInA([second.cookie, e.cookie]);
  });
});
