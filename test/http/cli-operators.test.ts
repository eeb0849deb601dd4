import { runCli } from "../support/cli.js";
import { isBuilt } from "../support/config-process.js";
import {
  cookieOf,
  dashboardAuthRpc,
  dashboardRpc,
  type DashboardTestServer,
  ownerPassword,
  setUpOwner,
  startDashboardServer,
} from "../support/dashboard-server.js";

/**
 * `gatehouse operators sign-in-link`: the operator command that gives a
 * locked-out operator a one-time way into the dashboard (as a user runs it, in
 * a subprocess, on the server's store).
 */
let server: DashboardTestServer;
let env: Record<string, string>;
/** The owner's session from the setup link, before any recovery. */
let ownerSession: string;

beforeAll(async () => {
  if (!isBuilt()) throw new Error("dist/ is not built (npm test builds it)");
  server = await startDashboardServer();
  ownerSession = await setUpOwner(server, "owner@example.com");
  env = { DATABASE_URL: server.db.url, GATEHOUSE_DATA_DIR: server.db.dataDir, PUBLIC_URL: server.origin };
});
afterAll(() => server.close());

const tokenOf = (url: string) => new URLSearchParams(new URL(url).hash.slice(1)).get("link") ?? "";

describe("gatehouse operators sign-in-link", () => {
  test("prints a link once; it signs the operator in once, through SignInWithLink, and ends every other way in", async () => {
    const issued = runCli(["operators", "sign-in-link", "--email", "OWNER@example.com", "--json"], env);
    expect({ status: issued.status, stderr: issued.stderr }).toEqual({ status: 0, stderr: "" });
    const out = JSON.parse(issued.stdout) as { url: string; account_id: string; expires_at: string };
    expect(out.url).toMatch(new RegExp(`^${server.origin}/dashboard/sign-in#link=[A-Za-z0-9_-]{43}$`));
    const token = tokenOf(out.url);

    const first = await dashboardAuthRpc(server, "SignInWithLink", { token });
    expect(first.status).toBe(200);
    expect(((await first.json()) as { accountId: string }).accountId).toBe(out.account_id);
    expect(cookieOf(first)).not.toBe("");

    const again = await dashboardAuthRpc(server, "SignInWithLink", { token });
    expect(again.status).toBe(400);
    expect(JSON.stringify(await again.json())).toContain("sign_in_link_used");

    // The recovery ended the earlier session and removed the password (docs/dashboard.md, "One-time sign-in links").
    expect((await dashboardRpc(server, "GetOperatorSession", {}, { cookie: ownerSession })).status).toBe(401);
    expect((await dashboardAuthRpc(server, "SignIn", { email: "owner@example.com", password: ownerPassword })).status).toBe(401);
  });

  test("an address without an account, a lifetime out of range and a missing --email are refused with the right exit code", () => {
    const unknown = runCli(["operators", "sign-in-link", "--email", "nobody@example.com", "--json"], env);
    expect(unknown.status).toBe(1);
    expect(JSON.parse(unknown.stderr.trim()) as { code: string }).toMatchObject({ code: expect.any(String) });
    expect(runCli(["operators", "sign-in-link", "--email", "owner@example.com", "--ttl", "5"], env).status).toBe(2);
    expect(runCli(["operators", "sign-in-link"], env).status).toBe(2);
  });
});
