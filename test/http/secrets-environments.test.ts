import { createApiKey, createOtherOrganization } from "../support/credentials.js";
import { secretsApi } from "../support/secrets-client.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * SecretsService.ListEnvironments: the environments that hold a secret, so a
 * client can tell a typo in an environment name from an empty environment
 * (`gatehouse secrets pull --env prodution` names the environments that exist).
 */
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

const path = "/svc.v1.SecretsService/ListEnvironments";

function listEnvironments(bearer: string | undefined, organizationId = server.credentials.organization_id) {
  return server.call(path, {
    method: "POST",
    ...(bearer ? { bearer } : {}),
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ organizationId }),
  });
}

describe("ListEnvironments", () => {
  test("lists the environments holding a secret, once each, in byte order; an emptied one disappears", async () => {
    const admin = server.credentials.api_key;
    expect(await (await listEnvironments(admin)).json()).toEqual({});
    const api = secretsApi(server, admin);
    await api.put("A", "staging", "a");
    await api.put("B", "production", "b");
    await api.put("C", "production", "c");
    await api.put("D", "qa", "d");
    await api.put("E", "dev_2", "e");
    const answer = await listEnvironments(admin);
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({ environments: ["dev_2", "production", "qa", "staging"] });

    expect((await api.deleteResponse("A", "staging")).status).toBe(200);
    expect(((await (await listEnvironments(admin)).json()) as { environments: string[] }).environments).toEqual([
      "dev_2",
      "production",
      "qa",
    ]);
  });

  test("another organisation's environments are not listed, and its id is not reachable", async () => {
    const other = await createOtherOrganization(server);
    await secretsApi(server, other.adminKey, other.organizationId).put("X", "their-env", "x");
    const ours = (await (await listEnvironments(server.credentials.api_key)).json()) as { environments: string[] };
    expect(ours.environments).not.toContain("their-env");
    expect(await (await listEnvironments(other.adminKey, other.organizationId)).json()).toEqual({ environments: ["their-env"] });
    expect((await listEnvironments(server.credentials.api_key, other.organizationId)).status).toBe(404);
  });

  test("needs an admin API key: none is 401, a member 403, a secret or publishable key 403", async () => {
    expect((await listEnvironments(undefined)).status).toBe(401);
    expect((await listEnvironments("gk_not-a-real-key-at-all-but-well-formed-123456")).status).toBe(401);
    expect((await listEnvironments((await createApiKey(server, "member")).apiKey)).status).toBe(403);
    expect((await listEnvironments(server.credentials.secret_key)).status).toBe(403);
    expect((await listEnvironments(server.credentials.publishable_key)).status).toBe(403);
  });
});
