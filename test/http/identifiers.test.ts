import {
  dashboardRpc,
  ownerPassword,
  dashboardAuthRpc,
  setUpOwner,
  startDashboardServer,
  type DashboardTestServer,
} from "../support/dashboard-server.js";
import { callIdentity, enablePasswords, goodPassword, postRest, reasonOf, type JsonAnswer } from "../support/identity-client.js";

/**
 * Identifiers that look alike are one identity or none (docs/identity.md "Passwords"):
 * NFKC before comparing and storing, and control, format and invisible
 * characters (zero-width spaces, word joiners, bidirectional overrides, byte
 * order marks) refused with a violation, on every path that takes an
 * identifier, an operator's e-mail address or display name.
 */

interface Violated {
  details?: { debug?: { reason?: string; violations?: { field: string; description: string }[] } }[];
}

let server: DashboardTestServer;
let pk: string;
let sk: string;
let owner: string;

beforeAll(async () => {
  server = await startDashboardServer();
  pk = server.credentials.publishable_key;
  sk = server.credentials.secret_key;
  owner = await setUpOwner(server, "owner@example.com");
  await enablePasswords(server);
}, 60_000);
afterAll(() => server.close());

/** "erin@a.test" with the character added: inside, joined, or in front (a right-to-left override). */
const lookalikes = [
  ["U+200B", "erin\u200b@a.test"],
  ["U+2060", "erin@a\u2060.test"],
  ["U+202E", "\u202eerin@a.test"],
  ["U+FEFF", "er\ufeffin@a.test"],
] as const;

function violationOf(body: unknown): { field?: string; description?: string; reason?: string } {
  const detail = (body as Violated).details?.[0]?.debug;
  const violation = detail?.violations?.[0];
  return { field: violation?.field, description: violation?.description, reason: detail?.reason };
}

function expectRefused(answer: JsonAnswer | { status: number; body: unknown }, field: string, codePoint: string) {
  expect(answer.status).toBe(400);
  const violation = violationOf(answer.body);
  expect(violation.reason).toBe("invalid_argument");
  expect(violation.field).toBe(field);
  expect(violation.description).toContain("must not contain control, format or invisible characters");
  expect(violation.description).toContain(codePoint);
}

describe("end-user identifiers with invisible or bidirectional characters are refused", () => {
  test.each(lookalikes)(
    "%s: register, login, magic link, reset request and passkey begin refuse it; nothing is stored",
    async (codePoint, identifier) => {
      const db = server.app.database.client;
      const before = await db.identity.count();
      expectRefused(
        await postRest(server, "/identity/register/password", { identifier, password: goodPassword }, pk),
        "identifier",
        codePoint,
      );
      expectRefused(await postRest(server, "/v1/identity/register", { email: identifier, password: goodPassword }, pk), "email", codePoint);
      expectRefused(
        await postRest(server, "/identity/login/password", { identifier, password: goodPassword }, pk),
        "identifier",
        codePoint,
      );
      expectRefused(
        await postRest(server, "/v1/identity/login", { username: identifier, password: goodPassword }, pk),
        "username",
        codePoint,
      );
      expectRefused(await callIdentity(server, "GenerateMagicLink", { identifier }, sk), "identifier", codePoint);
      expectRefused(await postRest(server, "/v1/identity/reset-password", { identifier }, sk), "identifier", codePoint);
      expectRefused(await postRest(server, "/identity/register/begin", { identifier }, pk), "identifier", codePoint);
      expectRefused(await postRest(server, "/identity/login/begin", { identifier }, pk), "identifier", codePoint);
      expect(await db.identity.count()).toBe(before);
      // A failed login with such an identifier was never a login: nothing counts towards a lockout.
      expect(await db.loginFailure.count({ where: { organizationId: server.credentials.organization_id } })).toBe(0);
    },
  );

  test("the error never repeats the identifier", async () => {
    const answer = await postRest(
      server,
      "/identity/register/password",
      { identifier: "secret\u200bname@a.test", password: goodPassword },
      pk,
    );
    expect(answer.text).not.toContain("secret");
  });
});

describe("full-width and other compatibility forms are one identity (NFKC)", () => {
  test("a full-width registration, then the ASCII one, is 409; a login in either form signs in the one identity", async () => {
    const registered = await postRest<{ identity_id: string }>(
      server,
      "/identity/register/password",
      { identifier: "ｅｒｉｎ＠ａ．ｔｅｓｔ", password: goodPassword },
      pk,
    );
    expect(registered.status).toBe(200);
    const again = await postRest(server, "/identity/register/password", { identifier: "erin@a.test", password: goodPassword }, pk);
    expect({ status: again.status, reason: reasonOf(again) }).toEqual({ status: 409, reason: "identity_exists" });
    for (const typed of ["erin@a.test", " ＥＲＩＮ＠Ａ．ＴＥＳＴ ", "Erin@A.test"]) {
      const login = await postRest<{ identity_id: string }>(
        server,
        "/identity/login/password",
        { identifier: typed, password: goodPassword },
        pk,
      );
      expect({ typed, status: login.status, identity: login.body.identity_id }).toEqual({
        typed,
        status: 200,
        identity: registered.body.identity_id,
      });
    }
    const stored = await server.app.database.client.identity.findUnique({ where: { id: registered.body.identity_id } });
    expect(stored?.identifier).toBe("erin@a.test");
    // A magic link for the full-width form names the same identity.
    const link = await callIdentity<{ token: string }>(server, "GenerateMagicLink", { identifier: "ｅｒｉｎ＠ａ．ｔｅｓｔ" }, sk);
    const verified = await callIdentity<{ identityId: string }>(server, "VerifyMagicLink", { token: link.body.token }, sk);
    expect(verified.body.identityId).toBe(registered.body.identity_id);
  });
});

describe("operators' e-mail addresses and display names", () => {
  test.each(lookalikes)("%s in an e-mail address: invitation, sign-in and passkey sign-in refuse it", async (codePoint, email) => {
    const invited = await dashboardRpc(
      server,
      "InviteMember",
      { organizationId: server.credentials.organization_id, email, displayName: "Erin", role: "ROLE_MEMBER" },
      { cookie: owner },
    );
    expectRefused({ status: invited.status, body: await invited.json() }, "email", codePoint);
    const signIn = await dashboardAuthRpc(server, "SignIn", { email, password: ownerPassword });
    expectRefused({ status: signIn.status, body: await signIn.json() }, "email", codePoint);
    const passkey = await dashboardAuthRpc(server, "BeginPasskeySignIn", { email });
    expectRefused({ status: passkey.status, body: await passkey.json() }, "email", codePoint);
  });

  test("a display name with a right-to-left override or a zero-width space is refused", async () => {
    for (const [codePoint, displayName] of [
      ["U+202E", "\u202eEvil Admin"],
      ["U+200B", "Ev\u200bil"],
    ] as const) {
      const invited = await dashboardRpc(
        server,
        "InviteMember",
        { organizationId: server.credentials.organization_id, email: "erin@example.com", displayName, role: "ROLE_MEMBER" },
        { cookie: owner },
      );
      expectRefused({ status: invited.status, body: await invited.json() }, "display_name", codePoint);
    }
  });

  test("setup refuses such an e-mail address and display name, listing both", async () => {
    const other = await startDashboardServer();
    try {
      const answer = await dashboardAuthRpc(other, "SetUpAccount", {
        token: other.setupToken,
        email: "owner\u2060@example.com",
        displayName: "\u202eOwner",
        password: ownerPassword,
      });
      expect(answer.status).toBe(400);
      const fields = ((await answer.json()) as Violated).details?.[0]?.debug?.violations?.map((v) => v.field);
      expect(fields).toEqual(["email", "display_name"]);
    } finally {
      await other.close();
    }
  });

  test("an operator signs in with the full-width form of their e-mail address", async () => {
    const answer = await dashboardAuthRpc(server, "SignIn", { email: "ＯＷＮＥＲ＠ＥＸＡＭＰＬＥ．ＣＯＭ", password: ownerPassword });
    expect(answer.status).toBe(200);
  });
});
