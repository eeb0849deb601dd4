import { addMember, setUpOwner, startDashboardServer, type DashboardTestServer } from "../support/dashboard-server.js";

/**
 * docs/security.md, "Events (webhooks)": webhooks are managed by admins only,
 * with an admin API key or an admin's dashboard session; a request that rides
 * on the dashboard cookie is held to the dashboard's cross-site checks, one
 * that carries a key is authenticated by the key alone.
 */
let server: DashboardTestServer;
let org: string;
let owner: string;
let member: string;
let memberKey: string;

beforeAll(async () => {
  server = await startDashboardServer();
  org = server.credentials.organization_id;
  owner = await setUpOwner(server);
  member = (await addMember(server, owner, { email: "member@example.com", password: "member password 12345" })).cookie;
  memberKey = (await server.app.tenancy.createApiKey({ organizationId: org, name: "member key", role: "member" })).apiKey;
});
afterAll(() => server?.close());

async function list(headers: Record<string, string>): Promise<{ status: number; reason: string | undefined }> {
  const response = await fetch(`${server.url}/svc.v1.WebhooksService/ListWebhookEndpoints`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ organizationId: org }),
  });
  const body = (await response.json()) as { details?: { debug?: { reason?: string } }[] };
  return { status: response.status, reason: body.details?.[0]?.debug?.reason };
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
const page = (cookie: string, origin = server.origin) => ({ cookie, origin, "x-gatehouse-dashboard": "1" });

test("an admin API key, or an admin's session from a dashboard page: allowed", async () => {
  expect(await list(bearer(server.credentials.api_key))).toEqual({ status: 200, reason: undefined });
  expect(await list(page(owner))).toEqual({ status: 200, reason: undefined });
  // A key authenticates by itself: no Origin needed, and a cookie beside it is not used.
  expect(await list({ ...bearer(server.credentials.api_key), origin: "https://elsewhere.example" })).toEqual({
    status: 200,
    reason: undefined,
  });
});

test("members, organisations' keys and no credential: refused", async () => {
  expect(await list(bearer(memberKey))).toEqual({ status: 403, reason: "role_insufficient" });
  expect(await list(page(member))).toEqual({ status: 403, reason: "role_insufficient" });
  expect(await list(bearer(server.credentials.secret_key))).toEqual({ status: 403, reason: "wrong_credential_kind" });
  expect(await list(bearer(server.credentials.publishable_key))).toEqual({ status: 403, reason: "wrong_credential_kind" });
  expect(await list({})).toMatchObject({ status: 403, reason: "cross_site_request" });
  expect(await list({ origin: server.origin, "x-gatehouse-dashboard": "1" })).toMatchObject({ status: 401 });
});

test("the session cookie from a page of another site, or without the dashboard's header: refused before anything else", async () => {
  expect(await list(page(owner, "https://attacker.example"))).toEqual({ status: 403, reason: "cross_site_request" });
  expect(await list({ cookie: owner, origin: server.origin })).toEqual({ status: 403, reason: "cross_site_request" });
  expect(await list({ cookie: owner })).toEqual({ status: 403, reason: "cross_site_request" });
});

describe("abuse by an admin of one organisation", () => {
  const rest = async (method: string, path: string, key: string, body?: unknown) => {
    const response = await server.call(path, {
      method,
      bearer: key,
      ...(body !== undefined ? { headers: { "content-type": "application/json" }, body: JSON.stringify(body) } : {}),
    });
    const text = await response.text();
    return { status: response.status, body: (text === "" ? {} : JSON.parse(text)) as Record<string, unknown> };
  };

  test("creations sent all at once cannot pass the limit of 50 endpoints", async () => {
    const key = server.credentials.api_key;
    try {
      const answers = await Promise.all(
        Array.from({ length: 70 }, (_, i) => rest("POST", `/organization/${org}/webhooks`, key, { url: `https://example.com/hook/${i}` })),
      );
      expect(answers.filter((a) => a.status === 200).length).toBe(50);
      expect(await server.app.database.client.webhookEndpoint.count({ where: { organizationId: org } })).toBe(50);
    } finally {
      await server.app.database.client.webhookEndpoint.deleteMany({ where: { organizationId: org } });
    }
  });

  test("another organisation's endpoint and delivery, by id: unknown through every path; its events never reach it", async () => {
    const other = await server.app.tenancy.createOrganization("Other organisation");
    const otherKey = (await server.app.tenancy.createApiKey({ organizationId: other.organizationId, name: "other admin", role: "admin" }))
      .apiKey;
    const ownKey = server.credentials.api_key;
    const created = await rest("POST", `/organization/${org}/webhooks`, ownKey, { url: "https://example.com/victim" });
    const endpointId = (created.body.endpoint as { endpoint_id: string }).endpoint_id;
    const sent = await rest("POST", `/organization/${org}/webhooks/${endpointId}/test`, ownKey, {});
    const deliveryId = sent.body.delivery_id as string;
    const theirs = await rest("POST", `/organization/${other.organizationId}/webhooks`, otherKey, { url: "https://example.com/thief" });
    const theirEndpoint = (theirs.body.endpoint as { endpoint_id: string }).endpoint_id;
    const tries: [string, string, unknown?][] = [];
    for (const base of [`/organization/${other.organizationId}/webhooks`, `/organization/${org}/webhooks`]) {
      tries.push(
        ["GET", `${base}/${endpointId}`],
        ["PUT", `${base}/${endpointId}`, { url: "https://example.com/stolen" }],
        ["POST", `${base}/${endpointId}/rotate-secret`, {}],
        ["POST", `${base}/${endpointId}/test`, {}],
        ["GET", `${base}/${endpointId}/deliveries`],
        ["GET", `${base}/${endpointId}/deliveries/${deliveryId}/attempts`],
        ["GET", `${base}/${theirEndpoint}/deliveries/${deliveryId}/attempts`],
        ["POST", `${base}/${theirEndpoint}/deliveries/${deliveryId}/redeliver`, {}],
        ["DELETE", `${base}/${endpointId}`],
      );
    }
    for (const [method, path, body] of tries) {
      const answer = await rest(method, path, otherKey, body);
      expect({ method, path, status: answer.status }).toEqual({ method, path, status: 404 });
    }
    const still = await rest("GET", `/organization/${org}/webhooks/${endpointId}`, ownKey);
    expect(still.body.endpoint).toMatchObject({ url: "https://example.com/victim", endpoint_id: endpointId });
    // Events of the first organisation are scheduled for its endpoints only.
    await server.app.tenancy.createApiKey({ organizationId: org, name: "an event", role: "member" });
    const scheduled = await server.app.database.client.webhookDelivery.findMany({
      where: { endpointId: theirEndpoint },
      select: { event: { select: { organizationId: true } } },
    });
    expect(scheduled.every((d) => d.event.organizationId === other.organizationId)).toBe(true);
    expect(await server.app.database.client.webhookDelivery.count({ where: { endpointId } })).toBeGreaterThanOrEqual(2);
    expect((await rest("DELETE", `/organization/${org}/webhooks/${endpointId}`, ownKey)).status).toBe(200);
    expect((await rest("DELETE", `/organization/${other.organizationId}/webhooks/${theirEndpoint}`, otherKey)).status).toBe(200);
  });
});
