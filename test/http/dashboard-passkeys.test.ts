import { createManualClock } from "../support/server.js";
import {
  addMember,
  cookieOf,
  dashboardRpc,
  dashboardAuthRpc,
  setUpOwner,
  startDashboardServer,
  type DashboardRequestOptions,
  type DashboardTestServer,
} from "../support/dashboard-server.js";
import {
  createCredentialIn,
  getAssertionIn,
  launchBrowser,
  openForeignOrigin,
  openPasskeyPage,
  type PasskeyPage,
  type TestBrowser,
} from "../support/passkey-browser.js";
import type { OptionsJson } from "../support/passkey-client.js";

/**
 * docs/dashboard.md, "Passkey sign-in": operators sign in by password or by a
 * passkey of their platform account. Real WebAuthn responses from headless Chromium's virtual
 * authenticator, against a server whose PUBLIC_URL is http://localhost:<port>
 * (the dashboard's relying party is its own host).
 */

interface ErrorBody {
  code: string;
  message: string;
  details?: { debug?: { reason?: string; violations?: { field: string }[] } }[];
}

interface PasskeyInfo {
  id: string;
  name: string;
  createdAt: string;
  lastUsedAt?: string;
  credentialId: string;
}

const reasonOf = (body: ErrorBody) => body.details?.[0]?.debug?.reason;

/** Every Set-Cookie of an answer, by cookie name: value and attributes. */
function setCookies(response: Response): Map<string, string> {
  const all = new Map<string, string>();
  for (const line of response.headers.getSetCookie()) {
    const name = line.slice(0, line.indexOf("="));
    all.set(name, line);
  }
  return all;
}

const manual = createManualClock(new Date());
let server: DashboardTestServer;
let browser: TestBrowser;
let owner: string;
const devices: PasskeyPage[] = [];

beforeAll(async () => {
  server = await startDashboardServer({ publicHost: "localhost", clock: manual.clock });
  owner = await setUpOwner(server, "owner@example.com");
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await Promise.all(devices.map((d) => d.context.close()));
  await browser?.close();
  await server?.close();
});

/** A browser page of the dashboard's origin with an authenticator of its own. */
async function device(): Promise<PasskeyPage> {
  const opened = await openPasskeyPage(browser, `${server.origin}/healthz`);
  devices.push(opened);
  return opened;
}

async function rpc<T>(method: string, body: Record<string, unknown>, cookie: string, options: DashboardRequestOptions = {}) {
  const response = await dashboardRpc(server, method, body, { cookie, ...options });
  return { status: response.status, body: (await response.json()) as T & ErrorBody };
}

/** Adds a passkey on `on` to the account of `cookie`, through the dashboard's RPCs. */
async function addPasskey(on: PasskeyPage, cookie: string, name = ""): Promise<PasskeyInfo> {
  const begun = await rpc<{ ceremonyId: string; options: OptionsJson }>("BeginAddOperatorPasskey", {}, cookie);
  expect(begun.status).toBe(200);
  const credential = await createCredentialIn(on.page, begun.body.options);
  const finished = await rpc<{ passkey: PasskeyInfo }>(
    "FinishAddOperatorPasskey",
    { ceremonyId: begun.body.ceremonyId, credential, name },
    cookie,
  );
  expect(finished.status).toBe(200);
  return finished.body.passkey;
}

/** BeginPasskeySignIn: the options and this browser's challenge cookie. */
async function beginSignIn(email?: string) {
  const response = await dashboardAuthRpc(server, "BeginPasskeySignIn", email === undefined ? {} : { email });
  expect(response.status).toBe(200);
  const body = (await response.json()) as { options: OptionsJson; expiresAt: string };
  return { options: body.options, cookie: cookieOf(response), setCookie: response.headers.get("set-cookie") ?? "" };
}

async function finishSignIn(credential: unknown, cookie: string | undefined, options: DashboardRequestOptions = {}) {
  const response = await dashboardAuthRpc(server, "FinishPasskeySignIn", { credential }, { ...(cookie ? { cookie } : {}), ...options });
  return { response, status: response.status, body: (await response.json()) as ErrorBody & { accountId: string; expiresAt: string } };
}

/** A whole passkey sign-in on `on`; answers the finish. */
async function signInWithPasskey(on: PasskeyPage, email?: string) {
  const begun = await beginSignIn(email);
  const assertion = await getAssertionIn(on.page, begun.options);
  return finishSignIn(assertion, begun.cookie);
}

async function expectRefused(answer: { status: number; body: ErrorBody }, reason: string) {
  expect({ status: answer.status, code: answer.body.code, reason: reasonOf(answer.body) }).toEqual({
    status: 401,
    code: "unauthenticated",
    reason,
  });
}

const sessionCount = () => server.app.database.client.dashboardSession.count();

describe("a signed-in operator adds, lists and removes their own passkeys", () => {
  let laptop: PasskeyPage;

  beforeAll(async () => {
    laptop = await device();
  });

  test("creation options name the dashboard's relying party and the account, and require a discoverable, verified passkey", async () => {
    const begun = await rpc<{ ceremonyId: string; options: Record<string, unknown> }>("BeginAddOperatorPasskey", {}, owner);
    expect(begun.status).toBe(200);
    const options = begun.body.options as {
      rp: { id: string };
      user: { id: string; name: string; displayName: string };
      authenticatorSelection: { residentKey: string; userVerification: string };
    };
    expect(options.rp.id).toBe("localhost");
    expect(options.user.name).toBe("owner@example.com");
    expect(options.user.displayName).toBe("Olive Owner");
    const session = await rpc<{ operator: { accountId: string } }>("GetOperatorSession", {}, owner);
    expect(Buffer.from(options.user.id, "base64url").toString("utf8")).toBe(session.body.operator.accountId);
    expect(options.authenticatorSelection).toMatchObject({ residentKey: "required", userVerification: "required" });
    // The challenge lives in the database, not in the client.
    const stored = await server.app.database.client.operatorPasskeyChallenge.findUnique({ where: { id: begun.body.ceremonyId } });
    expect(stored).toMatchObject({ kind: "add_passkey", accountId: session.body.operator.accountId, usedAt: null });
  });

  test("an added passkey is listed with its name, creation time and no last use; the next ceremony excludes it", async () => {
    const added = await addPasskey(laptop, owner, "  Work laptop ");
    expect(added).toMatchObject({ name: "Work laptop", createdAt: manual.clock().toISOString() });
    expect(added.lastUsedAt).toBeUndefined();
    const listed = await rpc<{ passkeys: PasskeyInfo[] }>("ListOperatorPasskeys", {}, owner);
    expect(listed.body.passkeys).toEqual([expect.objectContaining({ id: added.id, name: "Work laptop" })]);
    const again = await rpc<{ options: { excludeCredentials: { id: string }[] } }>("BeginAddOperatorPasskey", {}, owner);
    expect(again.body.options.excludeCredentials.map((c) => c.id)).toEqual([added.credentialId]);
    // Only the public key is stored.
    const row = await server.app.database.client.operatorPasskey.findUnique({ where: { id: added.id } });
    expect(row?.credentialId).toBe(added.credentialId);
  });

  test("a passkey without a name is called Passkey; a name with control characters is refused by field", async () => {
    const phone = await device();
    const added = await addPasskey(phone, owner);
    expect(added.name).toBe("Passkey");
    const begun = await rpc<{ ceremonyId: string }>("BeginAddOperatorPasskey", {}, owner);
    const bad = await rpc("FinishAddOperatorPasskey", { ceremonyId: begun.body.ceremonyId, credential: {}, name: "bad\u0007name" }, owner);
    expect(bad.status).toBe(400);
    expect(bad.body.details?.[0]?.debug?.violations?.map((v) => v.field)).toEqual(expect.arrayContaining(["name", "credential.id"]));
    expect((await rpc("RemoveOperatorPasskey", { passkeyId: added.id }, owner)).status).toBe(200);
  });

  test("a registration ceremony answers once, and only for the account that began it", async () => {
    const other = await device();
    const begun = await rpc<{ ceremonyId: string; options: OptionsJson }>("BeginAddOperatorPasskey", {}, owner);
    const credential = await createCredentialIn(other.page, begun.body.options);
    const finish = (cookie: string) =>
      rpc("FinishAddOperatorPasskey", { ceremonyId: begun.body.ceremonyId, credential, name: "x" }, cookie);
    const { cookie: second } = await addMember(server, owner, {
      email: "second@example.com",
      displayName: "Sam Second",
      password: "a good second passphrase",
    });
    await expectRefused(await finish(second), "ceremony_not_found");
    const first = await finish(owner);
    expect(first.status).toBe(200);
    await expectRefused(await finish(owner), "ceremony_used");
    const listed = await rpc<{ passkeys: PasskeyInfo[] }>("ListOperatorPasskeys", {}, second);
    expect(listed.body.passkeys ?? []).toEqual([]);
    // Removing another account's passkey is as unknown as a passkey that does not exist.
    const ownerPasskeys = await rpc<{ passkeys: PasskeyInfo[] }>("ListOperatorPasskeys", {}, owner);
    const target = ownerPasskeys.body.passkeys.find((p) => p.name === "x") as PasskeyInfo;
    expect((await rpc("RemoveOperatorPasskey", { passkeyId: target.id }, second)).status).toBe(404);
    expect((await rpc("RemoveOperatorPasskey", { passkeyId: "not-a-uuid" }, owner)).status).toBe(400);
    expect((await rpc("RemoveOperatorPasskey", { passkeyId: target.id }, owner)).status).toBe(200);
  });

  test("a registration ceremony expires after 5 minutes", async () => {
    const begun = await rpc<{ ceremonyId: string; options: OptionsJson }>("BeginAddOperatorPasskey", {}, owner);
    const credential = await createCredentialIn((await device()).page, begun.body.options);
    manual.advance(5 * 60_000 + 1);
    await expectRefused(
      await rpc("FinishAddOperatorPasskey", { ceremonyId: begun.body.ceremonyId, credential, name: "late" }, owner),
      "ceremony_expired",
    );
  });
});

describe("sign-in with a passkey", () => {
  let laptop: PasskeyPage;

  beforeAll(async () => {
    laptop = await device();
    await addPasskey(laptop, owner, "Sign-in laptop");
  });

  test("without typing anything, the passkey signs the operator in with the same session cookie as a password", async () => {
    const out = await dashboardAuthRpc(server, "SignOut", {}, { cookie: owner });
    expect(out.status).toBe(200);
    expect((await rpc("GetOperatorSession", {}, owner)).status).toBe(401);

    const begun = await beginSignIn();
    // The challenge cookie: HttpOnly, SameSite=Strict, as long as the ceremony.
    expect(begun.setCookie).toMatch(/^gatehouse_dashboard_passkey=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=300$/);
    expect(begun.options).not.toHaveProperty("allowCredentials");
    expect(begun.options).toMatchObject({ rpId: "localhost", userVerification: "required" });
    const assertion = await getAssertionIn(laptop.page, begun.options);
    const finished = await finishSignIn(assertion, begun.cookie);
    expect(finished.status).toBe(200);
    const cookies = setCookies(finished.response);
    expect(cookies.get("gatehouse_dashboard")).toMatch(
      /^gatehouse_dashboard=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=43200$/,
    );
    expect(cookies.get("gatehouse_dashboard_passkey")).toContain("Max-Age=0");
    owner = cookieOf(finished.response);

    const session = await rpc<{ operator: { email: string; accountId: string } }>("GetOperatorSession", {}, owner);
    expect(session.status).toBe(200);
    expect(session.body.operator.email).toBe("owner@example.com");
    expect(finished.body.accountId).toBe(session.body.operator.accountId);
    expect((await rpc("ListApiKeys", { organizationId: server.credentials.organization_id }, owner)).status).toBe(200);
    const listed = await rpc<{ passkeys: PasskeyInfo[] }>("ListOperatorPasskeys", {}, owner);
    expect(listed.body.passkeys.find((p) => p.name === "Sign-in laptop")?.lastUsedAt).toBe(manual.clock().toISOString());
  });

  test("after typing the e-mail address, that account's passkey signs in and no other does; the options do not tell the two apart", async () => {
    const known = await beginSignIn("  OWNER@example.com ");
    const unknown = await beginSignIn("nobody@example.com");
    expect(Object.keys(known.options).sort()).toEqual(Object.keys(unknown.options).sort());
    expect(known.options).not.toHaveProperty("allowCredentials");
    expect((await finishSignIn(await getAssertionIn(laptop.page, known.options), known.cookie)).status).toBe(200);
    await expectRefused(await finishSignIn(await getAssertionIn(laptop.page, unknown.options), unknown.cookie), "passkey_not_allowed");
  });

  test("a finish without this browser's challenge cookie, or with another ceremony's, is refused and starts no session", async () => {
    const before = await sessionCount();
    const begun = await beginSignIn();
    const assertion = await getAssertionIn(laptop.page, begun.options);
    await expectRefused(await finishSignIn(assertion, undefined), "ceremony_missing");
    await expectRefused(await finishSignIn(assertion, `gatehouse_dashboard_passkey=${"A".repeat(43)}`), "ceremony_not_found");
    const other = await beginSignIn();
    await expectRefused(await finishSignIn(assertion, other.cookie), "passkey_challenge_mismatch");
    expect(await sessionCount()).toBe(before);
  });

  test("a replayed answer is refused: a challenge answers once", async () => {
    const begun = await beginSignIn();
    const assertion = await getAssertionIn(laptop.page, begun.options);
    expect((await finishSignIn(assertion, begun.cookie)).status).toBe(200);
    const before = await sessionCount();
    await expectRefused(await finishSignIn(assertion, begun.cookie), "ceremony_used");
    expect(await sessionCount()).toBe(before);
  });

  test("of concurrent finishes of one challenge exactly one signs in", async () => {
    const begun = await beginSignIn();
    const assertion = await getAssertionIn(laptop.page, begun.options);
    const answers = await Promise.all(Array.from({ length: 5 }, () => finishSignIn(assertion, begun.cookie)));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 401, 401, 401, 401]);
  });

  test("a challenge expires after 5 minutes", async () => {
    const begun = await beginSignIn();
    const assertion = await getAssertionIn(laptop.page, begun.options);
    manual.advance(5 * 60_000);
    await expectRefused(await finishSignIn(assertion, begun.cookie), "ceremony_expired");
  });

  test("a passkey the dashboard does not know is refused", async () => {
    const stranger = await device();
    // A passkey created for this relying party but never registered (the ceremony was not finished).
    const begun = await rpc<{ options: OptionsJson }>("BeginAddOperatorPasskey", {}, owner);
    await createCredentialIn(stranger.page, begun.body.options);
    await expectRefused(await signInWithPasskey(stranger), "passkey_not_found");
  });

  test("answers made on a page of another origin are refused, for registration and sign-in", async () => {
    const roaming = await device();
    await addPasskey(roaming, owner, "Roaming key");
    const blank = await device();
    const registration = await rpc<{ ceremonyId: string; options: OptionsJson }>("BeginAddOperatorPasskey", {}, owner);
    const signIn = await beginSignIn();
    // http://localhost:1 may use the RP ID "localhost", but it is not the dashboard's origin.
    const credential = await createCredentialIn(await openForeignOrigin(blank, "http://localhost:1"), registration.body.options);
    await expectRefused(
      await rpc("FinishAddOperatorPasskey", { ceremonyId: registration.body.ceremonyId, credential, name: "foreign" }, owner),
      "passkey_origin_mismatch",
    );
    const page = await openForeignOrigin(roaming, "http://localhost:1");
    await expectRefused(await finishSignIn(await getAssertionIn(page, signIn.options), signIn.cookie), "passkey_origin_mismatch");
    expect((await rpc<{ passkeys: PasskeyInfo[] }>("ListOperatorPasskeys", {}, owner)).body.passkeys.map((p) => p.name)).not.toContain(
      "foreign",
    );
  });

  test("passkey sign-in requests from another site's page are refused (no login CSRF)", async () => {
    const begin = await dashboardAuthRpc(server, "BeginPasskeySignIn", {}, { origin: "https://evil.example" });
    expect(begin.status).toBe(403);
    expect(begin.headers.get("set-cookie")).toBeNull();
    const begun = await beginSignIn();
    const assertion = await getAssertionIn(laptop.page, begun.options);
    expect((await finishSignIn(assertion, begun.cookie, { origin: "https://evil.example" })).status).toBe(403);
    expect((await finishSignIn(assertion, begun.cookie, { marked: false })).status).toBe(403);
    // Refused before the challenge was touched: the page itself can still finish.
    expect((await finishSignIn(assertion, begun.cookie)).status).toBe(200);
  });

  test("a malformed answer is a 400 listing its fields", async () => {
    const begun = await beginSignIn();
    const response = await finishSignIn({ id: "!!", type: "nope" }, begun.cookie);
    expect(response.status).toBe(400);
    const fields = response.body.details?.[0]?.debug?.violations?.map((v) => v.field) ?? [];
    expect(fields).toEqual(expect.arrayContaining(["credential.id", "credential.type", "credential.rawId"]));
    const notObject = await dashboardAuthRpc(server, "FinishPasskeySignIn", { credential: "text" }, { cookie: begun.cookie });
    expect(notObject.status).toBe(400);
  });

  test("a removed passkey stops signing in at once", async () => {
    const spare = await device();
    const added = await addPasskey(spare, owner, "Spare");
    expect((await signInWithPasskey(spare)).status).toBe(200);
    expect((await rpc("RemoveOperatorPasskey", { passkeyId: added.id }, owner)).status).toBe(200);
    const listed = await rpc<{ passkeys: PasskeyInfo[] }>("ListOperatorPasskeys", {}, owner);
    expect(listed.body.passkeys.map((p) => p.id)).not.toContain(added.id);
    await expectRefused(await signInWithPasskey(spare), "passkey_not_found");
  });

  test("the passkey of an account removed from its organisation signs in no more", async () => {
    const { cookie: leaver, accountId: leaverId } = await addMember(server, owner, {
      email: "leaver@example.com",
      displayName: "Lee Leaver",
      password: "a good leaving passphrase",
    });
    const theirs = await device();
    await addPasskey(theirs, leaver, "Leaver's phone");
    expect((await signInWithPasskey(theirs)).status).toBe(200);

    const removed = await rpc("RemoveMember", { organizationId: server.credentials.organization_id, accountId: leaverId }, owner);
    expect(removed.status).toBe(200);
    await expectRefused(await signInWithPasskey(theirs), "passkey_not_found");
    expect(await server.app.database.client.operatorPasskey.count({ where: { accountId: leaverId } })).toBe(0);
  });

  test("a passkey whose account was disabled is refused even while its row remains", async () => {
    const { cookie, accountId: disabledId } = await addMember(server, owner, {
      email: "disabled@example.com",
      displayName: "Dee Disabled",
      password: "a good disabled passphrase",
    });
    const theirs = await device();
    await addPasskey(theirs, cookie, "Disabled's key");
    await server.app.database.client.account.update({ where: { id: disabledId }, data: { disabledAt: manual.clock() } });
    await expectRefused(await signInWithPasskey(theirs), "account_disabled");
  });
});

describe("challenges are kept in the database and purged once expired", () => {
  test("expired challenges are deleted on a later begin, the live one kept", async () => {
    const db = server.app.database.client.operatorPasskeyChallenge;
    const key = await device();
    await addPasskey(key, owner, "Purge check");
    await beginSignIn();
    await rpc("BeginAddOperatorPasskey", {}, owner);
    expect(await db.count()).toBeGreaterThanOrEqual(3);
    // Past every challenge's expiry and the purge interval (10 minutes of the clock), the next begin clears them.
    manual.advance(11 * 60_000);
    const fresh = await beginSignIn();
    const left = await db.findMany();
    expect(left).toHaveLength(1);
    expect(left[0]?.expiresAt.getTime()).toBe(manual.clock().getTime() + 5 * 60_000);
    // The one left is the live one: it still signs in.
    expect((await finishSignIn(await getAssertionIn(key.page, fresh.options), fresh.cookie)).status).toBe(200);
  });
});

describe("with PUBLIC_URL at an IP address", () => {
  let ipServer: DashboardTestServer;
  beforeAll(async () => {
    ipServer = await startDashboardServer();
  });
  afterAll(() => ipServer.close());

  test("operator passkeys are unavailable, saying what PUBLIC_URL to use", async () => {
    const cookie = await setUpOwner(ipServer);
    const begin = await dashboardRpc(ipServer, "BeginAddOperatorPasskey", {}, { cookie });
    expect(begin.status).toBe(400);
    const body = (await begin.json()) as ErrorBody;
    expect(reasonOf(body)).toBe("passkeys_unavailable");
    expect(body.message).toContain("http://localhost:");
    expect((await dashboardAuthRpc(ipServer, "BeginPasskeySignIn", {})).status).toBe(400);
    expect((await dashboardRpc(ipServer, "ListOperatorPasskeys", {}, { cookie })).status).toBe(200);
  });
});
