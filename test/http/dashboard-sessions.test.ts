import { hashToken } from "../../src/crypto/tokens.js";
import { createManualClock } from "../support/server.js";
import {
  cookieOf,
  dashboardRpc,
  ownerPassword,
  dashboardAuthRpc,
  setUpOwner,
  signIn,
  startDashboardServer,
  type DashboardTestServer,
} from "../support/dashboard-server.js";

interface ErrorBody {
  code: string;
  message: string;
}

describe("the owner's one-time setup link", () => {
  let server: DashboardTestServer;
  beforeAll(async () => {
    server = await startDashboardServer();
  });
  afterAll(() => server.close());

  test("gatehouse init prints a setup link to PUBLIC_URL's dashboard with a 43-character token", () => {
    expect(server.setupUrl).toMatch(new RegExp(`^${server.origin.replace(/[.]/g, "\\.")}/dashboard/setup#token=[A-Za-z0-9_-]{43}$`));
  });

  test("inspecting the link shows no placeholder e-mail and spends nothing", async () => {
    const response = await dashboardAuthRpc(server, "InspectSetupLink", { token: server.setupToken });
    expect(response.status).toBe(200);
    // proto3 JSON leaves out a field at its default: the empty e-mail address is absent.
    expect(await response.json()).toEqual({ displayName: "Owner" });
  });

  test("setup refuses weak input, listing every problem, and leaves the link usable", async () => {
    const response = await dashboardAuthRpc(server, "SetUpAccount", {
      token: server.setupToken,
      email: "not-an-email",
      display_name: "",
      password: "short",
    });
    expect(response.status).toBe(400);
    const body = (await response.json()) as ErrorBody;
    expect(body.message).toContain("email");
    expect(body.message).toContain("display_name");
    expect(body.message).toContain("password");
    expect((await dashboardAuthRpc(server, "InspectSetupLink", { token: server.setupToken })).status).toBe(200);
  });

  test("of concurrent uses of the link exactly one sets up the account; later uses are refused", async () => {
    const attempts = await Promise.all(
      Array.from({ length: 4 }, (_, i) =>
        dashboardAuthRpc(server, "SetUpAccount", {
          token: server.setupToken,
          email: `owner${i}@example.com`,
          display_name: "Olive Owner",
          password: ownerPassword,
        }),
      ),
    );
    const statuses = attempts.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 400)).toHaveLength(3);
    const winner = attempts.find((r) => r.status === 200) as Response;
    const setCookie = winner.headers.get("set-cookie") ?? "";
    expect(setCookie).toMatch(/^gatehouse_dashboard=[A-Za-z0-9_-]{43}; /);
    expect(setCookie).toContain("HttpOnly");
    expect(setCookie).toContain("SameSite=Strict");
    expect(setCookie).toContain("Path=/");
    expect(setCookie).not.toContain("Secure");
    const again = await dashboardAuthRpc(server, "SetUpAccount", {
      token: server.setupToken,
      email: "late@example.com",
      display_name: "Late",
      password: ownerPassword,
    });
    expect(again.status).toBe(400);
    expect(((await again.json()) as ErrorBody).message).toContain("already been used");
  });

  test("an unknown setup token is 404", async () => {
    const response = await dashboardAuthRpc(server, "InspectSetupLink", { token: "A".repeat(43) });
    expect(response.status).toBe(404);
  });

  test("setup and sign-in from another site's page are refused (no login CSRF)", async () => {
    const response = await dashboardAuthRpc(
      server,
      "SignIn",
      { email: "owner0@example.com", password: ownerPassword },
      { origin: "https://evil.example" },
    );
    expect(response.status).toBe(403);
    const unmarked = await dashboardAuthRpc(server, "SignIn", { email: "owner0@example.com", password: ownerPassword }, { marked: false });
    expect(unmarked.status).toBe(403);
  });
});

describe("operator sign-in, sign-out and session lifetime", () => {
  const manual = createManualClock();
  let server: DashboardTestServer;
  let email: string;

  beforeAll(async () => {
    server = await startDashboardServer({ clock: manual.clock });
    email = "ops@example.com";
    await setUpOwner(server, email);
  });
  afterAll(() => server.close());

  test("a wrong password and an unknown e-mail give the same 401", async () => {
    const wrong = await dashboardAuthRpc(server, "SignIn", { email, password: "not the password at all" });
    const unknown = await dashboardAuthRpc(server, "SignIn", { email: "nobody@example.com", password: ownerPassword });
    expect(wrong.status).toBe(401);
    expect(unknown.status).toBe(401);
    expect(((await wrong.json()) as ErrorBody).message).toBe(((await unknown.json()) as ErrorBody).message);
    expect(wrong.headers.get("set-cookie")).toBeNull();
  });

  test("the e-mail address is matched as typed in any case and with spaces around it", async () => {
    const cookie = await signIn(server, "  OPS@Example.COM ", ownerPassword);
    const response = await dashboardRpc(server, "GetOperatorSession", {}, { cookie });
    expect(response.status).toBe(200);
    const body = (await response.json()) as {
      operator: { email: string; displayName: string };
      organizations: { organizationId: string; role: string }[];
    };
    expect(body.operator).toMatchObject({ email, displayName: "Olive Owner" });
    expect(body.organizations).toEqual([
      { organizationId: server.credentials.organization_id, name: "Default organisation", role: "ROLE_ADMIN" },
    ]);
  });

  test("only the hash of the session cookie is stored", async () => {
    const cookie = await signIn(server, email, ownerPassword);
    const token = cookie.split("=")[1] as string;
    const rows = await server.app.database.client.dashboardSession.findMany();
    expect(rows.length).toBeGreaterThan(0);
    expect(JSON.stringify(rows)).not.toContain(token);
  });

  test("sign-out ends the session at once and removes the cookie", async () => {
    const cookie = await signIn(server, email, ownerPassword);
    expect((await dashboardRpc(server, "GetOperatorSession", {}, { cookie })).status).toBe(200);
    const out = await dashboardAuthRpc(server, "SignOut", {}, { cookie });
    expect(out.status).toBe(200);
    expect(out.headers.get("set-cookie")).toContain("Max-Age=0");
    expect((await dashboardRpc(server, "GetOperatorSession", {}, { cookie })).status).toBe(401);
  });

  test("a session ends after 30 idle minutes, and activity keeps it alive up to 12 hours", async () => {
    const cookie = await signIn(server, email, ownerPassword);
    // Active every 20 minutes: still signed in after 11 h 40 min.
    for (let i = 0; i < 35; i++) {
      manual.advance(20 * 60_000);
      expect((await dashboardRpc(server, "GetOperatorSession", {}, { cookie })).status).toBe(200);
      // The touch of lastSeenAt lands asynchronously; let it.
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    manual.advance(20 * 60_000);
    const last = await dashboardRpc(server, "GetOperatorSession", {}, { cookie });
    expect(last.status).toBe(401);
    expect(((await last.json()) as ErrorBody).message).toContain("expired");

    const idle = await signIn(server, email, ownerPassword);
    manual.advance(29 * 60_000);
    expect((await dashboardRpc(server, "GetOperatorSession", {}, { cookie: idle })).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 50));
    manual.advance(30 * 60_000 + 1);
    const response = await dashboardRpc(server, "GetOperatorSession", {}, { cookie: idle });
    expect(response.status).toBe(401);
    expect(((await response.json()) as ErrorBody).message).toContain("idle");
  });

  test("after 5 failed sign-ins for one e-mail address from one client in 15 minutes, that client gets 429 with Retry-After", async () => {
    // The rest of the rule (other addresses, passkeys, sign-in links) is in lockout.test.ts.
    const target = "locked@example.com";
    for (let i = 0; i < 5; i++) {
      expect((await dashboardAuthRpc(server, "SignIn", { email: target, password: "wrong password" })).status).toBe(401);
    }
    const refused = await dashboardAuthRpc(server, "SignIn", { email: target, password: "wrong password" });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
  });
});

describe("ended sessions are purged from the database", () => {
  const manual = createManualClock();
  let server: DashboardTestServer;
  const email = "purge@example.com";

  beforeAll(async () => {
    server = await startDashboardServer({ clock: manual.clock });
    await setUpOwner(server, email);
  });
  afterAll(() => server.close());

  const sessionIds = async () => (await server.app.database.client.dashboardSession.findMany({ select: { id: true } })).map((s) => s.id);
  /** The stored session of a cookie (only the token's hash is stored). */
  const idOf = async (cookie: string) => {
    const row = await server.app.database.client.dashboardSession.findFirst({ where: { hash: hashToken(cookie.split("=")[1] ?? "") } });
    return row?.id;
  };

  test("a later sign-in deletes sessions that ended (idle, expired or signed out and idle), and keeps live ones", async () => {
    const idle = await signIn(server, email, ownerPassword);
    const signedOut = await signIn(server, email, ownerPassword);
    await dashboardAuthRpc(server, "SignOut", {}, { cookie: signedOut });
    const idleId = await idOf(idle);
    const signedOutId = await idOf(signedOut);
    expect(idleId).toBeDefined();
    expect(await sessionIds()).toEqual(expect.arrayContaining([idleId, signedOutId]));

    manual.advance(20 * 60_000);
    const live = await signIn(server, email, ownerPassword);
    const liveId = await idOf(live);
    // 20 minutes idle is not yet the end of a session: nothing is deleted.
    expect(await sessionIds()).toEqual(expect.arrayContaining([idleId, signedOutId, liveId]));

    manual.advance(15 * 60_000);
    // 35 minutes idle: ended. The live session, 15 minutes idle, is not.
    expect((await dashboardRpc(server, "GetOperatorSession", {}, { cookie: idle })).status).toBe(401);
    const next = await signIn(server, email, ownerPassword);
    const left = await sessionIds();
    expect(left).not.toContain(idleId);
    expect(left).not.toContain(signedOutId);
    expect(left).toEqual(expect.arrayContaining([liveId, await idOf(next)]));
    expect((await dashboardRpc(server, "GetOperatorSession", {}, { cookie: live })).status).toBe(200);
    expect((await dashboardRpc(server, "GetOperatorSession", {}, { cookie: idle })).status).toBe(401);
  });

  test("a session past its absolute lifetime is deleted even if it was used a minute ago", async () => {
    const busy = await signIn(server, email, ownerPassword);
    const busyId = await idOf(busy);
    // Used every 20 minutes for 12 hours: what its requests record is lastSeenAt.
    for (let i = 0; i < 36; i++) {
      manual.advance(20 * 60_000);
      await server.app.database.client.dashboardSession.update({ where: { id: busyId as string }, data: { lastSeenAt: manual.clock() } });
    }
    manual.advance(60_000);
    await signIn(server, email, ownerPassword);
    expect(await sessionIds()).not.toContain(busyId);
  });
});

describe("over https", () => {
  let server: DashboardTestServer;
  beforeAll(async () => {
    server = await startDashboardServer({ env: { PUBLIC_URL: "https://gatehouse.example" } });
  });
  afterAll(() => server.close());

  test("the cookie is Secure and __Host- prefixed, and only pages of the https origin are accepted", async () => {
    expect(server.origin).toBe("https://gatehouse.example");
    const response = await dashboardAuthRpc(server, "SetUpAccount", {
      token: server.setupToken,
      email: "tls@example.com",
      display_name: "T",
      password: ownerPassword,
    });
    expect(response.status).toBe(200);
    const setCookie = response.headers.get("set-cookie") ?? "";
    expect(setCookie).toMatch(/^__Host-gatehouse_dashboard=/);
    expect(setCookie).toContain("; Secure");
    const cookie = cookieOf(response);
    expect((await dashboardRpc(server, "GetOperatorSession", {}, { cookie })).status).toBe(200);
    expect((await dashboardRpc(server, "GetOperatorSession", {}, { cookie, origin: "http://gatehouse.example" })).status).toBe(403);
  });
});
