import { issueOperatorSignInLink } from "../../src/composition/operator-links.js";
import { buildDashboardUi, dashboardRpc, setUpOwner, startDashboardServer, type DashboardTestServer } from "../support/dashboard-server.js";
import { closeAgents, reasonIn, requestFrom, type AddressedAnswer } from "../support/from-address.js";
import { enablePasswords, goodPassword, newIdentifier, setIdentitySettings } from "../support/identity-client.js";
import {
  createCredentialIn,
  getAssertionIn,
  launchBrowser,
  openPasskeyPage,
  type PasskeyPage,
  type TestBrowser,
} from "../support/passkey-browser.js";
import type { OptionsJson } from "../support/passkey-client.js";
import { createManualClock } from "../support/server.js";

/**
 * Lockout that an attacker cannot aim (docs/identity.md "Brute-force protection";
 * OWASP Authentication Cheat Sheet, "Account Lockout"): failures lock the
 * (identifier, client address) pair, and from other addresses the identifier
 * only waits growing delays; passkeys, magic links and one-time sign-in links
 * work whatever the password failures. For end users and operators alike.
 * Client addresses over loopback: sockets bound to 127.0.0.x.
 */

const manual = createManualClock(new Date("2026-11-22T10:00:00Z"));
const operatorEmail = "olive@example.com";
const ownerPassword = "correct horse battery staple 42";
let server: DashboardTestServer;
let pk: string;
let sk: string;
let other: { organizationId: string; publishableKey: string };
let browser: TestBrowser;
/** The end user's authenticator, and the operator's (each its own browser context). */
let device: PasskeyPage;
let operatorDevice: PasskeyPage;

beforeAll(async () => {
  buildDashboardUi();
  server = await startDashboardServer({
    publicHost: "localhost",
    clock: manual.clock,
    env: { DASHBOARD_SIGN_IN_LIMIT_PER_MINUTE: "100000" },
  });
  await setUpOwner(server, operatorEmail);
  pk = server.credentials.publishable_key;
  sk = server.credentials.secret_key;
  await enablePasswords(server, undefined, { rpId: "localhost", origins: [server.origin] });
  other = await server.app.tenancy.createOrganization("Other");
  await enablePasswords(server, other.organizationId);
  browser = await launchBrowser();
  device = await openPasskeyPage(browser, `${server.origin}/healthz`);
  operatorDevice = await openPasskeyPage(browser, `${server.origin}/healthz`);
}, 60_000);

afterAll(async () => {
  closeAgents();
  await device?.context.close();
  await operatorDevice?.context.close();
  await browser?.close();
  await server?.close();
});

const login = (from: string, identifier: string, password: string, key = pk) =>
  requestFrom(from, server.url, "/identity/login/password", {
    headers: { authorization: `Bearer ${key}` },
    json: { identifier, password },
  });

const dashboardHeaders = () => ({ origin: server.origin, "x-gatehouse-dashboard": "1" });

const operatorSignIn = (from: string, password: string, email = operatorEmail) =>
  requestFrom(from, server.url, "/svc.v1.DashboardAuthService/SignIn", { headers: dashboardHeaders(), json: { email, password } });

async function registered(label: string, key = pk): Promise<{ identifier: string; identityId: string }> {
  const identifier = newIdentifier(label);
  const answer = await requestFrom<{ identity_id: string }>("127.0.0.1", server.url, "/identity/register/password", {
    headers: { authorization: `Bearer ${key}` },
    json: { identifier, password: goodPassword },
  });
  expect(answer.status).toBe(200);
  return { identifier, identityId: answer.body.identity_id };
}

function refusal(answer: AddressedAnswer) {
  return { status: answer.status, reason: reasonIn(answer), retryAfter: Number(answer.headers["retry-after"]) };
}

/** Moves the clock past every window a test may have left open. */
afterEach(() => manual.advance(24 * 3600_000));

describe("end users: failures lock the (identifier, address) pair, not the identifier", () => {
  test("an attacker's failures from one address do not stop the owner from another address after the back-off", async () => {
    const { identifier } = await registered("owner");
    for (let i = 0; i < 5; i++) {
      expect((await login("127.0.0.2", identifier, `wrong guess ${i}`)).status).toBe(401);
      manual.advance(10_000);
    }
    // The attacker's address is locked, even with the right password, until its first failure leaves the window.
    expect(refusal(await login("127.0.0.2", identifier, goodPassword))).toEqual({
      status: 429,
      reason: "login_locked",
      retryAfter: 900 - 50,
    });
    // The owner elsewhere waits the first back-off step (1 s after the newest failure), then signs in.
    manual.advance(-10_000 + 500);
    expect(refusal(await login("127.0.0.3", identifier, goodPassword))).toEqual({ status: 429, reason: "login_throttled", retryAfter: 1 });
    manual.advance(500);
    expect((await login("127.0.0.3", identifier, goodPassword)).status).toBe(200);
    // The attacker is still locked out.
    expect(refusal(await login("127.0.0.2", identifier, goodPassword)).reason).toBe("login_locked");
  });

  test('the client that failed 5 times is refused even with the right password until the window passes (docs/identity.md, "Brute-force protection")', async () => {
    const { identifier } = await registered("contract");
    for (let i = 0; i < 5; i++) expect((await login("127.0.0.4", identifier, "wrong password")).status).toBe(401);
    for (let i = 0; i < 10; i++) {
      manual.advance(60_000);
      expect(refusal(await login("127.0.0.4", identifier, goodPassword))).toEqual({
        status: 429,
        reason: "login_locked",
        retryAfter: 900 - 60 * (i + 1),
      });
    }
    manual.advance(300_000);
    expect((await login("127.0.0.4", identifier, goodPassword)).status).toBe(200);
  });

  test("delays from anywhere double with each failure beyond the threshold, up to 300 s; refused attempts do not count", async () => {
    const { identifier } = await registered("backoff");
    for (let i = 0; i < 5; i++) expect((await login("127.0.0.10", identifier, "wrong password")).status).toBe(401);
    const seen: number[] = [];
    for (let failures = 5; failures <= 15; failures++) {
      // Failures come from fresh addresses (each may fail 5 times before its own lock).
      const from = `127.0.0.${11 + Math.floor((failures - 5) / 5)}`;
      const probe = refusal(await login(from, identifier, "wrong password"));
      expect(probe.reason).toBe("login_throttled");
      // A refused attempt leaves the delay as it was.
      expect(refusal(await login(from, identifier, "wrong password")).retryAfter).toBe(probe.retryAfter);
      seen.push(probe.retryAfter);
      manual.advance(probe.retryAfter * 1000);
      if (failures < 15) expect((await login(from, identifier, "wrong password")).status).toBe(401);
    }
    expect(seen).toEqual([1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
    expect((await login("127.0.0.20", identifier, goodPassword)).status).toBe(200);
  });

  test("the same identifier in another organisation is not affected", async () => {
    const here = await registered("twin");
    const identifier = here.identifier;
    const there = await requestFrom("127.0.0.1", server.url, "/identity/register/password", {
      headers: { authorization: `Bearer ${other.publishableKey}` },
      json: { identifier, password: goodPassword },
    });
    expect(there.status).toBe(200);
    for (let i = 0; i < 5; i++) expect((await login("127.0.0.5", identifier, "wrong password")).status).toBe(401);
    expect(refusal(await login("127.0.0.5", identifier, goodPassword)).reason).toBe("login_locked");
    expect((await login("127.0.0.5", identifier, goodPassword, other.publishableKey)).status).toBe(200);
  });

  test("a locked-out identity still signs in with a magic link and with a passkey, from the locked address", async () => {
    const { identifier, identityId } = await registered("escape");
    for (let i = 0; i < 5; i++) expect((await login("127.0.0.6", identifier, "wrong password")).status).toBe(401);
    expect(refusal(await login("127.0.0.6", identifier, goodPassword)).reason).toBe("login_locked");

    const generated = await requestFrom<{ token: string }>("127.0.0.1", server.url, "/svc.v1.IdentityService/GenerateMagicLink", {
      headers: { authorization: `Bearer ${sk}` },
      json: { identifier },
    });
    const verified = await requestFrom<{ identityId: string }>("127.0.0.6", server.url, "/svc.v1.IdentityService/VerifyMagicLink", {
      headers: { authorization: `Bearer ${pk}` },
      json: { token: generated.body.token },
    });
    expect({ status: verified.status, identityId: verified.body.identityId }).toEqual({ status: 200, identityId });

    // The backend adds a passkey to the identity; the user signs in with it.
    const begunAdd = await requestFrom<{ ceremonyId: string; options: OptionsJson }>(
      "127.0.0.1",
      server.url,
      "/svc.v1.IdentityService/BeginAddPasskey",
      { headers: { authorization: `Bearer ${sk}` }, json: { identity_id: identityId } },
    );
    expect(begunAdd.status).toBe(200);
    const credential = await createCredentialIn(device.page, begunAdd.body.options);
    const added = await requestFrom("127.0.0.1", server.url, "/svc.v1.IdentityService/FinishAddPasskey", {
      headers: { authorization: `Bearer ${sk}` },
      json: { ceremony_id: begunAdd.body.ceremonyId, credential },
    });
    expect(added.status).toBe(200);
    const begun = await requestFrom<{ ceremony_id: string; options: OptionsJson }>("127.0.0.6", server.url, "/identity/login/begin", {
      headers: { authorization: `Bearer ${pk}` },
      json: { identifier },
    });
    expect(begun.status).toBe(200);
    const assertion = await getAssertionIn(device.page, begun.body.options);
    const finished = await requestFrom<{ identity_id: string }>("127.0.0.6", server.url, "/identity/login/finish", {
      headers: { authorization: `Bearer ${pk}` },
      json: { ceremony_id: begun.body.ceremony_id, credential: assertion },
    });
    expect({ status: finished.status, identityId: finished.body.identity_id }).toEqual({ status: 200, identityId });
    // The password is still locked for that address.
    expect(refusal(await login("127.0.0.6", identifier, goodPassword)).reason).toBe("login_locked");
  }, 30_000);

  test("settings: threshold and window apply to the pair lock and the back-off", async () => {
    await setIdentitySettings(server, { lockoutThreshold: 2, lockoutWindowSeconds: 60 });
    try {
      const { identifier } = await registered("settings");
      for (let i = 0; i < 2; i++) expect((await login("127.0.0.7", identifier, "wrong password")).status).toBe(401);
      expect(refusal(await login("127.0.0.7", identifier, goodPassword))).toEqual({ status: 429, reason: "login_locked", retryAfter: 60 });
      expect(refusal(await login("127.0.0.8", identifier, goodPassword))).toEqual({
        status: 429,
        reason: "login_throttled",
        retryAfter: 1,
      });
      manual.advance(60_000);
      expect((await login("127.0.0.7", identifier, goodPassword)).status).toBe(200);
    } finally {
      await setIdentitySettings(server, { lockoutThreshold: 5, lockoutWindowSeconds: 900 });
    }
  });
});

describe("operators: failures lock the (e-mail address, client address) pair", () => {
  test("an attacker's ten wrong passwords from one address do not keep the operator out from another after the back-off", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) statuses.push((await operatorSignIn("127.0.0.2", `wrong password ${i}`)).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429, 429, 429, 429]);
    expect(refusal(await operatorSignIn("127.0.0.2", ownerPassword))).toEqual({ status: 429, reason: "login_locked", retryAfter: 900 });
    expect(refusal(await operatorSignIn("127.0.0.3", ownerPassword))).toEqual({ status: 429, reason: "login_throttled", retryAfter: 1 });
    manual.advance(1000);
    const signedIn = await operatorSignIn("127.0.0.3", ownerPassword);
    expect(signedIn.status).toBe(200);
    expect(String(signedIn.headers["set-cookie"])).toContain("gatehouse_dashboard=");
  });

  test("unknown e-mail addresses are counted the same way (no hint that they do not exist)", async () => {
    for (let i = 0; i < 5; i++) expect((await operatorSignIn("127.0.0.4", "wrong password", "ghost@example.com")).status).toBe(401);
    expect(refusal(await operatorSignIn("127.0.0.4", "wrong password", "ghost@example.com")).reason).toBe("login_locked");
  });

  test("an operator locked out of password sign-in signs in with a passkey from the locked address", async () => {
    const cookie = await signInFrom("127.0.0.1");
    const begunAdd = await dashboardRpc(server, "BeginAddOperatorPasskey", {}, { cookie });
    const { ceremonyId, options } = (await begunAdd.json()) as { ceremonyId: string; options: OptionsJson };
    const credential = await createCredentialIn(operatorDevice.page, options);
    const added = await dashboardRpc(server, "FinishAddOperatorPasskey", { ceremonyId, credential, name: "laptop" }, { cookie });
    expect(added.status).toBe(200);

    for (let i = 0; i < 5; i++) expect((await operatorSignIn("127.0.0.5", "wrong password")).status).toBe(401);
    expect(refusal(await operatorSignIn("127.0.0.5", ownerPassword)).reason).toBe("login_locked");
    const begun = await requestFrom<{ options: OptionsJson }>("127.0.0.5", server.url, "/svc.v1.DashboardAuthService/BeginPasskeySignIn", {
      headers: dashboardHeaders(),
      json: { email: operatorEmail },
    });
    expect(begun.status).toBe(200);
    const challengeCookie = String(begun.headers["set-cookie"]).split(";")[0] as string;
    const assertion = await getAssertionIn(operatorDevice.page, begun.body.options);
    const finished = await requestFrom("127.0.0.5", server.url, "/svc.v1.DashboardAuthService/FinishPasskeySignIn", {
      headers: { ...dashboardHeaders(), cookie: challengeCookie },
      json: { credential: assertion },
    });
    expect(finished.status).toBe(200);
  }, 30_000);
});

async function signInFrom(address: string): Promise<string> {
  const answer = await operatorSignIn(address, ownerPassword);
  expect(answer.status).toBe(200);
  return String(answer.headers["set-cookie"]).split(";")[0] as string;
}

describe("one-time dashboard sign-in links (for the operator command)", () => {
  const useLink = (token: string, from = "127.0.0.6") =>
    requestFrom<{ accountId: string }>(from, server.url, "/svc.v1.DashboardAuthService/SignInWithLink", {
      headers: dashboardHeaders(),
      json: { token },
    });

  test("a link signs a locked-out operator in, once; only its hash is stored", async () => {
    for (let i = 0; i < 5; i++) expect((await operatorSignIn("127.0.0.6", "wrong password")).status).toBe(401);
    expect(refusal(await operatorSignIn("127.0.0.6", ownerPassword)).reason).toBe("login_locked");
    const link = await issueOperatorSignInLink(server.app, { email: " Olive@Example.com " }, { clock: manual.clock });
    expect(link.url).toBe(`${server.origin}/dashboard/sign-in#link=${link.token}`);
    expect(link.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(link.expiresAt.getTime()).toBe(manual.clock().getTime() + 15 * 60_000);
    expect(JSON.stringify(await server.app.database.client.operatorSignInLink.findMany())).not.toContain(link.token);

    const used = await useLink(link.token);
    expect(used.status).toBe(200);
    const cookie = String(used.headers["set-cookie"]).split(";")[0] as string;
    const session = await dashboardRpc(server, "GetOperatorSession", {}, { cookie });
    expect(session.status).toBe(200);
    expect(((await session.json()) as { operator?: { email?: string } }).operator?.email).toBe(operatorEmail);

    expect(refusal(await useLink(link.token))).toMatchObject({ status: 400, reason: "sign_in_link_used" });
  });

  test("an expired link, an unknown one and an empty one are refused and start no session", async () => {
    const link = await issueOperatorSignInLink(server.app, { email: operatorEmail, ttlSeconds: 60 }, { clock: manual.clock });
    manual.advance(60_000);
    const expired = await useLink(link.token);
    expect(refusal(expired)).toMatchObject({ status: 400, reason: "sign_in_link_expired" });
    expect(expired.headers["set-cookie"]).toBeUndefined();
    expect(refusal(await useLink("A".repeat(43)))).toMatchObject({ status: 404, reason: "sign_in_link_not_found" });
    expect(refusal(await useLink(""))).toMatchObject({ status: 400, reason: "invalid_argument" });
  });

  test("of 10 concurrent uses of one link exactly one signs in", async () => {
    const link = await issueOperatorSignInLink(server.app, { email: operatorEmail }, { clock: manual.clock });
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => useLink(link.token, `127.0.5.${i + 1}`)));
    expect(answers.filter((a) => a.status === 200).length).toBe(1);
    for (const answer of answers) if (answer.status !== 200) expect(reasonIn(answer)).toBe("sign_in_link_used");
  });

  test("in the browser, the sign-in page spends the link from its fragment, signs in, and the token leaves the address bar", async () => {
    const link = await issueOperatorSignInLink(server.app, { email: operatorEmail }, { clock: manual.clock });
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(link.url);
      await page.waitForURL("**/dashboard/api-keys");
      await page.getByRole("heading", { name: "API keys", level: 1 }).waitFor();
      expect(page.url()).not.toContain(link.token);
      expect((await context.cookies()).some((c) => c.name === "gatehouse_dashboard")).toBe(true);
      // Opened again, the spent link says so on the sign-in page.
      const again = await context.newPage();
      await again.goto(link.url);
      await again.getByText("has already been used").waitFor();
    } finally {
      await context.close();
    }
  }, 30_000);

  test("a link for an unknown address, a malformed address or a bad lifetime is refused", async () => {
    await expect(issueOperatorSignInLink(server.app, { email: "nobody@example.com" }, { clock: manual.clock })).rejects.toMatchObject({
      reason: "account_not_found",
    });
    await expect(issueOperatorSignInLink(server.app, { email: "olive\u200b@example.com" }, { clock: manual.clock })).rejects.toMatchObject({
      reason: "invalid_argument",
    });
    await expect(
      issueOperatorSignInLink(server.app, { email: operatorEmail, ttlSeconds: 10 }, { clock: manual.clock }),
    ).rejects.toMatchObject({
      reason: "invalid_argument",
    });
  });
});
