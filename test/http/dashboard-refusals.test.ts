import { DashboardService } from "../../gen/svc/v1/dashboard_pb.js";
import { createApiKey } from "../support/credentials.js";
import { dashboardRpc, setUpOwner, startDashboardServer, type DashboardTestServer } from "../support/dashboard-server.js";

/**
 * docs/dashboard.md, "Security": none of the dashboard's operations is reachable with
 * an API, publishable or secret key, and every one needs the signed-in session
 * of a page of the platform's own origin.
 */
describe("every DashboardService RPC refuses what is not a signed-in dashboard page", () => {
  let server: DashboardTestServer;
  let cookie: string;
  let adminKey: string;
  let memberKey: string;

  beforeAll(async () => {
    server = await startDashboardServer();
    cookie = await setUpOwner(server);
    adminKey = server.credentials.api_key;
    memberKey = (await createApiKey(server, "member")).apiKey;
  });
  afterAll(() => server.close());

  const methods = DashboardService.methods.map((m) => m.name);
  /** RPCs about the signed-in operator's own account name no organisation. */
  const accountLevel = new Set([
    "GetOperatorSession",
    "AcceptInvitation",
    "ListOperatorPasskeys",
    "BeginAddOperatorPasskey",
    "FinishAddOperatorPasskey",
    "RemoveOperatorPasskey",
    "SetOperatorPassword",
  ]);
  const bodyOf = (method: string) => (accountLevel.has(method) ? {} : { organizationId: server.credentials.organization_id });

  test("the service has the operations of the dashboard's pages", () => {
    expect(methods).toEqual(
      expect.arrayContaining([
        "GetOperatorSession",
        "ListApiKeys",
        "CreateApiKey",
        "RevokeApiKey",
        "GetIdentityKeys",
        "RotateIdentityKey",
        "GetIdentitySettings",
        "UpdateIdentitySettings",
        "SearchIdentities",
        "GetIdentityDetails",
        "ListIdentitySessions",
        "RemoveIdentityPasskey",
        "RevokeIdentitySessions",
        "ListSecretEnvironments",
        "ListEnvironmentSecrets",
        "DeleteEnvironmentSecret",
        "GetConfigDocument",
        "ListConfigHistory",
        "DiffConfigRevisions",
        "RollbackConfigRevision",
        "ListMembers",
        "ListInvitations",
        "InviteMember",
        "ReissueInvitation",
        "RevokeInvitation",
        "AcceptInvitation",
        "ChangeMemberRole",
        "RemoveMember",
        "ListOperatorPasskeys",
        "BeginAddOperatorPasskey",
        "FinishAddOperatorPasskey",
        "RemoveOperatorPasskey",
        "SetOperatorPassword",
      ]),
    );
  });

  test.each(methods)("%s: an admin API key, a member API key, the publishable key and the secret key get 403", async (method) => {
    for (const bearer of [adminKey, memberKey, server.credentials.publishable_key, server.credentials.secret_key]) {
      const response = await dashboardRpc(server, method, bodyOf(method), { bearer });
      expect({ bearer: bearer.slice(0, 3), status: response.status }).toEqual({ bearer: bearer.slice(0, 3), status: 403 });
      expect(((await response.json()) as { code: string }).code).toBe("permission_denied");
    }
    // A key next to a valid session cookie is refused all the same.
    const both = await dashboardRpc(server, method, bodyOf(method), { bearer: adminKey, cookie });
    expect(both.status).toBe(403);
  });

  test.each(methods)("%s: without the session cookie, or with an unknown one, 401", async (method) => {
    const none = await dashboardRpc(server, method, bodyOf(method));
    expect(none.status).toBe(401);
    expect(((await none.json()) as { code: string }).code).toBe("unauthenticated");
    const forged = await dashboardRpc(server, method, bodyOf(method), { cookie: `gatehouse_dashboard=${"A".repeat(43)}` });
    expect(forged.status).toBe(401);
  });

  test.each(methods)("%s: a cross-site origin, no origin, or no dashboard header gets 403 even with the cookie", async (method) => {
    for (const options of [{ origin: "https://evil.example" }, { origin: "null" }, { origin: null }, { marked: false }]) {
      const response = await dashboardRpc(server, method, bodyOf(method), { cookie, ...options });
      expect({ options, status: response.status }).toEqual({ options, status: 403 });
      const body = (await response.json()) as { code: string; message: string };
      expect(body.code).toBe("permission_denied");
    }
  });

  test.each(methods)("%s: the signed-in page itself passes authentication", async (method) => {
    const response = await dashboardRpc(server, method, bodyOf(method), { cookie });
    // Some requests here lack fields (400) or name nothing that exists (404); none is refused as a caller.
    expect([200, 400, 404]).toContain(response.status);
  });

  test("an organisation the operator is not a member of is 404, an empty organization_id 400", async () => {
    const other = await server.app.tenancy.createOrganization("Elsewhere");
    const response = await dashboardRpc(server, "ListApiKeys", { organizationId: other.organizationId }, { cookie });
    expect(response.status).toBe(404);
    const empty = await dashboardRpc(server, "ListApiKeys", { organizationId: "" }, { cookie });
    expect(empty.status).toBe(400);
  });

  test("the stock Connect handler (a request with a timeout) applies the same rules", async () => {
    const viaStock = (options: { cookie?: string; bearer?: string; origin?: string }) =>
      fetch(`${server.url}/svc.v1.DashboardService/ListApiKeys`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "connect-protocol-version": "1",
          "connect-timeout-ms": "10000",
          "x-gatehouse-dashboard": "1",
          origin: options.origin ?? server.origin,
          ...(options.cookie ? { cookie: options.cookie } : {}),
          ...(options.bearer ? { authorization: `Bearer ${options.bearer}` } : {}),
        },
        body: JSON.stringify({ organizationId: server.credentials.organization_id }),
      });
    expect((await viaStock({})).status).toBe(401);
    expect((await viaStock({ bearer: adminKey })).status).toBe(403);
    expect((await viaStock({ bearer: server.credentials.secret_key })).status).toBe(403);
    expect((await viaStock({ cookie, origin: "https://evil.example" })).status).toBe(403);
    expect((await viaStock({ cookie })).status).toBe(200);
  });
});
