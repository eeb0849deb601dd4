import { isBuilt } from "../support/config-process.js";
import {
  addPasskey,
  apiKeyNamesOf,
  auth,
  call,
  fieldsOf,
  organizationOf,
  reasonOf,
  recover,
  signInWithPasskey,
  signInWith,
} from "../support/dashboard-accounts.js";
import { createInvitedAccount, invite, setUpOwner, startDashboardServer, type DashboardTestServer } from "../support/dashboard-server.js";
import { createSoftwareAuthenticator } from "../support/software-authenticator.js";

/**
 * The reported pre-hijacking of an operator account (issue 20, item 3; the
 * class is "account pre-hijacking", Sudhodanan and Paverd, USENIX Security
 * 2022). Organisation A invites an address as admin; the admin of
 * organisation B invites the same address, makes its account through B's link
 * with a password (and a passkey) of their own, and waits. The person of the
 * address finds A's link answering "account exists", recovers the account with
 * `gatehouse operators sign-in-link` (run here as a real process on the
 * server's store) and accepts A's invitation. Each step below states what the
 * attacker must NOT be able to do from then on; the witness is organisation A
 * and its API keys. A real server, real dashboard sessions, a software
 * authenticator for the attacker's passkey.
 */

const attackerPassword = "mallory's chosen passphrase";
const victimPassword = "victor's very own passphrase";

let server: DashboardTestServer;
let ownerA: string;
let orgA: string;
let orgB: { organizationId: string; cookie: string };

beforeAll(async () => {
  if (!isBuilt()) throw new Error("dist/ is not built (npm test builds it): the recovery runs the built CLI");
  server = await startDashboardServer({ publicHost: "localhost" });
  ownerA = await setUpOwner(server, "alice@a.test");
  orgA = server.credentials.organization_id;
  orgB = await organizationOf(server, { name: "Organisation B", email: "mallory@b.test", password: "mallory's admin passphrase" });
});
afterAll(() => server.close());

/**
 * Steps 1 and 2 of the report: A invites `victim` as admin; B's admin invites
 * the same address, makes its account from B's link with their own password
 * and adds a passkey of their own. A's link then answers "account exists".
 */
async function preHijack(victim: string) {
  const byA = await invite(server, ownerA, { organizationId: orgA, email: victim, role: "ROLE_ADMIN" });
  const byB = await invite(server, orgB.cookie, { organizationId: orgB.organizationId, email: victim, role: "ROLE_MEMBER" });
  const attacker = await createInvitedAccount(server, byB.token, attackerPassword, "Victor (made by Mallory)");
  const authenticator = createSoftwareAuthenticator(server.origin);
  const added = await addPasskey(server, authenticator, attacker.cookie);
  if (added.status !== 200) throw new Error(`the attacker's passkey was refused: ${added.status}`);
  const exists = await auth(server, "CreateInvitedAccount", { token: byA.token, display_name: "Victor", password: victimPassword });
  if (exists.status !== 409 || reasonOf(exists.body) !== "account_exists") throw new Error(`A's link answered ${exists.status}`);
  return { tokenA: byA.token, attacker, authenticator, keysOfA: await apiKeyNamesOf(server, ownerA, orgA) };
}

describe("the reported attack: B's admin pre-makes the account A invited, the victim recovers it and joins A", () => {
  const victim = "v@corp.test";
  let setup: Awaited<ReturnType<typeof preHijack>>;
  let recovered: { cookie: string; accountId: string };

  beforeAll(async () => {
    setup = await preHijack(victim);
  });

  test("step 3, recovery: the sign-in link (gatehouse operators sign-in-link, a real process) ends the attacker's session", async () => {
    recovered = await recover(server, victim);
    expect(recovered.accountId).toBe(setup.attacker.accountId);
    const stale = await call(server, setup.attacker.cookie, "GetOperatorSession", {});
    expect({ status: stale.status, reason: reasonOf(stale.body) }).toEqual({ status: 401, reason: "dashboard_session_expired" });
    // The recovered session is the account's only one.
    const live = await call<{ operator: { email: string; hasPassword?: boolean } }>(server, recovered.cookie, "GetOperatorSession", {});
    expect(live.status).toBe(200);
    expect(live.body.operator.email).toBe(victim);
  });

  test("step 3, recovery: the password and the passkey the attacker set sign in no more", async () => {
    const password = await signInWith(server, victim, attackerPassword);
    expect({ status: password.status, reason: reasonOf(password.body) }).toEqual({ status: 401, reason: "invalid_credentials" });
    expect(password.response.headers.get("set-cookie")).toBeNull();
    const passkey = await signInWithPasskey(server, setup.authenticator);
    expect({ status: passkey.status, reason: reasonOf(passkey.body) }).toEqual({ status: 401, reason: "passkey_not_found" });
    const session = await call<{ operator: { hasPassword?: boolean } }>(server, recovered.cookie, "GetOperatorSession", {});
    expect(session.body.operator.hasPassword ?? false).toBe(false);
    const passkeys = await call<{ passkeys?: unknown[] }>(server, recovered.cookie, "ListOperatorPasskeys", {});
    expect(passkeys.body.passkeys ?? []).toEqual([]);
  });

  test("step 4: the victim accepts A's invitation, choosing their own password, and is an admin of A", async () => {
    const accepted = await call<{ organization: { organizationId: string; role: string } }>(server, recovered.cookie, "AcceptInvitation", {
      token: setup.tokenA,
      newPassword: victimPassword,
    });
    expect(accepted.status).toBe(200);
    expect(accepted.body.organization).toMatchObject({ organizationId: orgA, role: "ROLE_ADMIN" });
    const again = await signInWith(server, victim, victimPassword);
    expect(again.status).toBe(200);
  });

  test("step 5: the attacker cannot act in A: CreateApiKey answers unauthenticated with every credential they held, and A has no new key", async () => {
    const withOldSession = await call(server, setup.attacker.cookie, "CreateApiKey", {
      organizationId: orgA,
      name: "backdoor",
      role: "ROLE_ADMIN",
    });
    expect({ status: withOldSession.status, code: withOldSession.body.code }).toEqual({ status: 401, code: "unauthenticated" });
    expect((await signInWith(server, victim, attackerPassword)).status).toBe(401);
    expect((await signInWithPasskey(server, setup.authenticator)).status).toBe(401);
    // B's admin as themselves: A is not theirs.
    const asThemselves = await call(server, orgB.cookie, "CreateApiKey", { organizationId: orgA, name: "backdoor", role: "ROLE_ADMIN" });
    expect({ status: asThemselves.status, reason: reasonOf(asThemselves.body) }).toEqual({ status: 404, reason: "organization_not_found" });
    expect(await apiKeyNamesOf(server, ownerA, orgA)).toEqual(setup.keysOfA);
  });
});

describe("a variant: the attacker hands the victim the password they chose", () => {
  const victim = "w@corp.test";
  let setup: Awaited<ReturnType<typeof preHijack>>;

  beforeAll(async () => {
    setup = await preHijack(victim);
  });

  test("joining A with the attacker's password needs a new one, and ends every credential the attacker held", async () => {
    const signedIn = await signInWith(server, victim, attackerPassword);
    expect(signedIn.status).toBe(200);
    const cookie = (signedIn.response.headers.get("set-cookie") ?? "").split(";")[0] as string;

    // Accepting as the account is not enough: the acceptance replaces its password.
    const bare = await call(server, cookie, "AcceptInvitation", { token: setup.tokenA });
    expect({ status: bare.status, fields: fieldsOf(bare.body) }).toEqual({ status: 400, fields: ["current_password", "new_password"] });
    const accepted = await call(server, cookie, "AcceptInvitation", {
      token: setup.tokenA,
      currentPassword: attackerPassword,
      newPassword: victimPassword,
    });
    expect(accepted.status).toBe(200);

    const withOldSession = await call(server, setup.attacker.cookie, "CreateApiKey", {
      organizationId: orgA,
      name: "backdoor",
      role: "ROLE_ADMIN",
    });
    expect(withOldSession.status).toBe(401);
    expect((await signInWith(server, victim, attackerPassword)).status).toBe(401);
    expect((await signInWithPasskey(server, setup.authenticator)).status).toBe(401);
    expect(await apiKeyNamesOf(server, ownerA, orgA)).toEqual(setup.keysOfA);
    // The victim's own session goes on, now an admin of A.
    const made = await call(server, cookie, "CreateApiKey", { organizationId: orgA, name: "victor's key", role: "ROLE_MEMBER" });
    expect(made.status).toBe(200);
  });
});
