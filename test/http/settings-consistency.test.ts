import { runCli } from "../support/cli.js";
import { dashboardRpc, type DashboardTestServer, setUpOwner, startDashboardServer } from "../support/dashboard-server.js";

/**
 * Identity settings that cannot work together are refused on every path that
 * changes them (the operator CLI and the dashboard's UpdateIdentitySettings),
 * by the one check of the identity domain, with the rule they break: WebAuthn
 * Level 3, §5.1.3 / §13.4.9, "the RP ID must be equal to the origin's effective
 * domain, or a registrable domain suffix of the origin's effective domain".
 */
const webauthnRule =
  "the RP ID must be equal to the origin's effective domain, or a registrable domain suffix of the origin's effective domain";

let server: DashboardTestServer;
let owner: string;
let org: string;
let env: Record<string, string>;

beforeAll(async () => {
  server = await startDashboardServer();
  owner = await setUpOwner(server);
  org = server.credentials.organization_id;
  env = { DATABASE_URL: server.db.url, GATEHOUSE_DATA_DIR: server.db.dataDir, PUBLIC_URL: server.origin };
});
afterAll(() => server.close());

const stored = () => server.app.database.client.identitySettings.findUnique({ where: { organizationId: org } });
const settingsSet = (...assignments: string[]) => runCli(["settings", "set", "--org", org, ...assignments], env);

interface ErrorBody {
  code: string;
  details?: { debug?: { reason?: string; violations?: { field: string; description: string }[] } }[];
}

async function updateFromDashboard(change: Record<string, unknown>) {
  const current = (await (await dashboardRpc(server, "GetIdentitySettings", { organizationId: org }, { cookie: owner })).json()) as {
    settings: Record<string, unknown>;
  };
  const response = await dashboardRpc(
    server,
    "UpdateIdentitySettings",
    { organizationId: org, settings: { ...current.settings, ...change } },
    { cookie: owner },
  );
  return { status: response.status, body: (await response.json()) as ErrorBody & { settings?: Record<string, unknown> } };
}

describe("gatehouse settings set refuses settings that cannot work together", () => {
  afterEach(() => {
    expect(settingsSet("rp_id=", "origins=").status).toBe(0);
  });

  test("an origin outside the RP ID is refused with WebAuthn's rule, and nothing changes", async () => {
    const before = await stored();
    const answer = settingsSet("password=true", "rp_id=example.org", "origins=https://app.example.com");
    expect(answer.status).toBe(1);
    expect(answer.stdout).toBe("");
    expect(answer.stderr).toContain('origins[0]: origin https://app.example.com is not within rp_id "example.org"');
    expect(answer.stderr).toContain(webauthnRule);
    expect(await stored()).toEqual(before);
  });

  test("with --json the refusal is one JSON line naming the rule's code", () => {
    const answer = runCli(["settings", "set", "--org", org, "rp_id=example.org", "origins=https://app.example.com", "--json"], env);
    expect(answer.status).toBe(1);
    expect(answer.stdout).toBe("");
    expect(answer.stderr.trimEnd().split("\n")).toHaveLength(1);
    expect(JSON.parse(answer.stderr)).toMatchObject({
      code: "inconsistent_identity_settings",
      message: expect.stringContaining(webauthnRule),
      violations: [{ field: "origins[0]", description: expect.stringContaining(webauthnRule) }],
    });
  });

  test("an http origin is refused unless it is localhost", () => {
    const answer = settingsSet("rp_id=example.com", "origins=http://app.example.com");
    expect(answer.status).toBe(1);
    expect(answer.stderr).toContain("origins[0]: origin http://app.example.com must be https");
    expect(settingsSet("rp_id=localhost", "origins=http://localhost:3000").status).toBe(0);
  });

  test("an IP address is refused as RP ID", () => {
    const answer = settingsSet("rp_id=192.0.2.1", "origins=https://192.0.2.1");
    expect(answer.status).toBe(1);
    expect(answer.stderr).toContain('rp_id: rp_id "192.0.2.1" is an IP address');
  });

  test("a change of one of the pair is checked against the other as stored", async () => {
    expect(settingsSet("rp_id=example.com", "origins=https://app.example.com").status).toBe(0);
    const before = await stored();
    const rpOnly = settingsSet("rp_id=example.org");
    expect(rpOnly.status).toBe(1);
    expect(rpOnly.stderr).toContain('origins[0]: origin https://app.example.com is not within rp_id "example.org"');
    expect(await stored()).toEqual(before);
    expect(settingsSet("rp_id=example.org", "origins=https://example.org").status).toBe(0);
  });

  test("a chosen RP ID is checked against the origin of PUBLIC_URL when origins are left to it", () => {
    const answer = settingsSet("rp_id=example.com");
    expect(answer.status).toBe(1);
    expect(answer.stderr).toContain("(from PUBLIC_URL, as origins is empty)");
    // On the loopback default the relying party is localhost, which PUBLIC_URL's localhost origin satisfies.
    expect(settingsSet("rp_id=localhost").status).toBe(0);
  });
});

describe("the dashboard's UpdateIdentitySettings applies the same check", () => {
  test("an origin outside the RP ID is 400 with the rule, on the field's path, and nothing changes", async () => {
    const before = await stored();
    const answer = await updateFromDashboard({ rpId: "example.org", origins: ["https://app.example.com"], password: true });
    expect(answer.status).toBe(400);
    expect(answer.body.code).toBe("invalid_argument");
    expect(answer.body.details?.[0]?.debug?.reason).toBe("inconsistent_identity_settings");
    expect(answer.body.details?.[0]?.debug?.violations).toEqual([
      { field: "settings.origins[0]", description: expect.stringContaining(webauthnRule) },
    ]);
    expect(await stored()).toEqual(before);
  });

  test("an http origin other than localhost and an IP RP ID are refused", async () => {
    const http = await updateFromDashboard({ rpId: "example.com", origins: ["http://app.example.com"] });
    expect(http.status).toBe(400);
    expect(http.body.details?.[0]?.debug?.violations?.map((v) => v.field)).toEqual(["settings.origins[0]"]);
    const ip = await updateFromDashboard({ rpId: "192.0.2.1", origins: [] });
    expect(ip.status).toBe(400);
    expect(ip.body.details?.[0]?.debug?.violations?.map((v) => v.field)).toEqual(["settings.rp_id"]);
  });

  test("a consistent pair is saved, and empty values return to PUBLIC_URL's", async () => {
    const saved = await updateFromDashboard({ rpId: "example.com", origins: ["https://example.com", "https://app.example.com"] });
    expect(saved.status).toBe(200);
    expect(saved.body.settings).toMatchObject({ rpId: "example.com", origins: ["https://example.com", "https://app.example.com"] });
    const reset = await updateFromDashboard({ rpId: "", origins: [] });
    expect(reset.status).toBe(200);
    expect(await stored()).toMatchObject({ rpId: null, origins: null });
  });
});
