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
  tokenOf,
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

const linkOf = (url: string) => new URLSearchParams(new URL(url).hash.slice(1)).get("link") ?? "";

describe("gatehouse operators sign-in-link", () => {
  test("prints a link once; it signs the operator in once, through SignInWithLink, and ends every other way in", async () => {
    const issued = runCli(["operators", "sign-in-link", "--email", "OWNER@example.com", "--json"], env);
    expect({ status: issued.status, stderr: issued.stderr }).toEqual({ status: 0, stderr: "" });
    const out = JSON.parse(issued.stdout) as { url: string; account_id: string; expires_at: string };
    expect(out.url).toMatch(new RegExp(`^${server.origin}/dashboard/sign-in#link=[A-Za-z0-9_-]{43}$`));
    const token = linkOf(out.url);

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

describe("gatehouse operators setup-link", () => {
  /** A further organisation (gatehouse orgs create), nobody set up yet. */
  function newOrganisation(name: string): { organization_id: string; dashboard_setup_url: string } {
    const created = runCli(["orgs", "create", "--name", name, "--json"], env);
    expect({ status: created.status, stderr: created.stderr }).toEqual({ status: 0, stderr: "" });
    return JSON.parse(created.stdout) as { organization_id: string; dashboard_setup_url: string };
  }
  const setUp = (token: string, email: string) =>
    dashboardAuthRpc(server, "SetUpAccount", { token, email, display_name: "New Owner", password: ownerPassword });

  test("issues a new owner setup link for an organisation nobody set up; the earlier links stop working; the new one sets up the owner", async () => {
    const org = newOrganisation("Lost link");
    const first = runCli(["operators", "setup-link", "--org", org.organization_id, "--json"], env);
    expect({ status: first.status, stderr: first.stderr }).toEqual({ status: 0, stderr: "" });
    const issued = JSON.parse(first.stdout) as { organization_id: string; dashboard_setup_url: string; expires_at: string };
    expect(issued.organization_id).toBe(org.organization_id);
    expect(issued.dashboard_setup_url).toMatch(new RegExp(`^${server.origin}/dashboard/setup#token=[A-Za-z0-9_-]{43}$`));
    expect(Date.parse(issued.expires_at) - Date.now()).toBeGreaterThan(6.9 * 24 * 3600 * 1000);
    // Issued again (as text): the previous one stops working too.
    const second = runCli(["operators", "setup-link", "--org", org.organization_id], env);
    expect({ status: second.status, stderr: second.stderr }).toEqual({ status: 0, stderr: "" });
    const url = second.stdout.split("\n")[0] ?? "";
    expect(url).toMatch(/\/dashboard\/setup#token=/);
    expect(second.stdout).toContain("earlier setup links no longer work");

    for (const old of [org.dashboard_setup_url, issued.dashboard_setup_url]) {
      const refused = await setUp(tokenOf(old), "someone@example.com");
      expect(refused.status).toBe(400);
      expect(JSON.stringify(await refused.json())).toContain("setup_link_used");
    }
    const done = await setUp(tokenOf(url), "new-owner@example.com");
    expect(done.status).toBe(200);
    const session = cookieOf(done);
    const listed = await dashboardRpc(server, "ListMembers", { organizationId: org.organization_id }, { cookie: session });
    expect(listed.status).toBe(200);
    expect(JSON.stringify(await listed.json())).toContain("new-owner@example.com");

    // Now the organisation has an operator: no setup link, the recovery is the way.
    const refused = runCli(["operators", "setup-link", "--org", org.organization_id, "--json"], env);
    expect(refused.status).toBe(1);
    expect(refused.stdout).toBe("");
    const error = JSON.parse(refused.stderr.trim()) as { code: string; reason?: string; message: string };
    expect(error.message).toContain("already has an operator");
    expect(error.message).toContain("gatehouse operators sign-in-link");
    expect(JSON.stringify(error)).toContain("organization_has_operator");
    // The owner's session and link are untouched by the refusal.
    expect((await dashboardRpc(server, "GetOperatorSession", {}, { cookie: session })).status).toBe(200);
  });

  test("the first organisation, set up in beforeAll, is refused; so are an unknown organisation and bad flags", () => {
    const orgs = JSON.parse(runCli(["orgs", "list", "--json"], env).stdout) as { organization_id: string }[];
    const first = runCli(["operators", "setup-link", "--org", orgs[0]?.organization_id ?? "", "--json"], env);
    expect(first.status).toBe(1);
    expect(first.stderr).toContain("organization_has_operator");

    const unknown = runCli(["operators", "setup-link", "--org", "00000000-0000-4000-8000-000000000000", "--json"], env);
    expect(unknown.status).toBe(1);
    expect(unknown.stdout).toBe("");
    expect(unknown.stderr).toContain("organization_not_found");
    const notAnId = runCli(["operators", "setup-link", "--org", "acme", "--json"], env);
    expect(notAnId.status).toBe(1);
    expect(notAnId.stderr).toContain("invalid_argument");

    expect(runCli(["operators", "setup-link"], env).status).toBe(2);
    expect(runCli(["operators", "setup-link", "--org"], env).status).toBe(2);
    expect(runCli(["operators", "setup-link", "--org", orgs[0]?.organization_id ?? "", "--ttl", "60"], env).status).toBe(2);
  });
});
