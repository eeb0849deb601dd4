import { runCli } from "../support/cli.js";
import { createTestDatabase, type TestDatabase } from "../support/database.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { startWebhookReceiver, verifyDelivery, type WebhookReceiver } from "../support/webhook-receiver.js";

/**
 * `gatehouse webhooks create|list|rotate-secret|deliveries|redeliver`: operator
 * commands on the data store directly, beside a running server on the same
 * store, which delivers what they queue (told at once: NOTIFY on PostgreSQL,
 * the notice file beside the database on SQLite).
 */
let db: TestDatabase;
let env: Record<string, string>;
let server: TestServer;
let receiver: WebhookReceiver;
let org: string;

beforeAll(async () => {
  db = await createTestDatabase();
  env = { DATABASE_URL: db.url, GATEHOUSE_DATA_DIR: db.dataDir, WEBHOOKS_ALLOW_PRIVATE_NETWORKS: "true" };
  server = await startTestServer({ db, env: { WEBHOOKS_ALLOW_PRIVATE_NETWORKS: "true" } });
  org = server.credentials.organization_id;
  receiver = await startWebhookReceiver();
}, 60_000);
afterAll(async () => {
  await receiver?.close();
  await server?.close();
  await db?.drop();
});

function json<T = Record<string, unknown>>(args: string[]): { status: number | null; body: T } {
  const answer = runCli([...args, "--json"], env);
  const text = answer.status === 0 ? answer.stdout : answer.stderr;
  return { status: answer.status, body: JSON.parse(text) as T };
}

test("create prints the secret once; list, rotate-secret, deliveries and redeliver work on the same endpoint", async () => {
  const created = json<{ endpoint_id: string; secret: string; event_types: string[] }>([
    "webhooks",
    "create",
    "--org",
    org,
    "--url",
    `${receiver.url}/cli`,
    "--event-types",
    "config.applied,webhook.test",
  ]);
  expect(created.status).toBe(0);
  expect(created.body.secret).toMatch(/^whsec_/);
  expect(created.body.event_types).toEqual(["config.applied", "webhook.test"]);
  const endpointId = created.body.endpoint_id;

  const listed = json<{ endpoint_id: string; enabled: boolean; url: string }[]>(["webhooks", "list", "--org", org]);
  expect(listed.body).toEqual([expect.objectContaining({ endpoint_id: endpointId, enabled: true, url: `${receiver.url}/cli` })]);
  expect(JSON.stringify(listed.body)).not.toContain("whsec_");
  const table = runCli(["webhooks", "list", "--org", org], env);
  expect(table.stdout).toMatch(/^ENDPOINT_ID\s+STATUS\s+EVENT_TYPES\s+URL\n/);

  // A change made through the API reaches the endpoint, signed with the secret the command printed.
  const put = await server.call(`/organization/${org}/config`, {
    method: "PUT",
    bearer: server.credentials.api_key,
    headers: { "content-type": "application/yaml" },
    body: "version: 1\ndomains:\n  - name: cli.example.com\n",
  });
  expect(put.status).toBe(200);
  const [first] = await receiver.until(1, (d) => d.path === "/cli");
  expect(verifyDelivery(created.body.secret, first!)).toMatchObject({ type: "config.applied" });

  // The attempt is recorded once the receiver's answer is in.
  for (let i = 0; i < 100; i++) {
    const row = await server.app.database.client.webhookDelivery.findFirst({ where: { endpointId } });
    if (row?.status === "delivered") break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const rotated = json<{ secret: string; previous_secret_expires_at: string }>(["webhooks", "rotate-secret", "--org", org, endpointId]);
  expect(rotated.status).toBe(0);
  expect(rotated.body.secret).not.toBe(created.body.secret);

  const deliveries = json<{ delivery_id: string; status: string; event_type: string; last_attempt: { status_code: number } }[]>([
    "webhooks",
    "deliveries",
    "--org",
    org,
    endpointId,
  ]);
  expect(deliveries.body).toEqual([
    expect.objectContaining({
      status: "delivered",
      event_type: "config.applied",
      last_attempt: expect.objectContaining({ status_code: 200 }),
    }),
  ]);

  // Sent again by the command in its own process: the server delivers it at once, signed with both secrets now.
  const again = json<{ status: string }>(["webhooks", "redeliver", "--org", org, deliveries.body[0]!.delivery_id]);
  expect(again.body).toEqual({ delivery_id: deliveries.body[0]!.delivery_id, status: "pending" });
  const copies = await receiver.until(2, (d) => d.path === "/cli", 10_000);
  expect(copies[1]?.id).toBe(first?.id);
  expect(verifyDelivery(rotated.body.secret, copies[1]!)).toMatchObject({ type: "config.applied" });
  expect(verifyDelivery(created.body.secret, copies[1]!)).toMatchObject({ type: "config.applied" });
});

test("bad input: a clear error, exit 1, nothing stored", () => {
  const refused = json<{ code: string; message: string }>(["webhooks", "create", "--org", org, "--url", "ftp://example.com/x"]);
  expect(refused.status).toBe(1);
  expect(refused.body).toMatchObject({ code: "invalid_argument" });
  expect(refused.body.message).toContain("url: must be an absolute https or http URL");
  const unknownType = json<{ code: string; message: string }>([
    "webhooks",
    "create",
    "--org",
    org,
    "--url",
    "https://example.com/x",
    "--event-types",
    "identity.creatd",
  ]);
  expect(unknownType.body.message).toContain("event_types[0]: must be one of the event types");
  const unknownOrg = json<{ code: string }>(["webhooks", "list", "--org", "9b2f3c4d-0000-4000-8000-000000000000"]);
  expect(unknownOrg).toMatchObject({ status: 1, body: { code: "organization_not_found" } });
  const notAnId = json<{ code: string }>(["webhooks", "rotate-secret", "--org", org, "nope"]);
  expect(notAnId).toMatchObject({ status: 1, body: { code: "invalid_argument" } });
  expect(runCli(["webhooks", "deliveries", "--org", org, "x", "--limit", "0"], env).status).toBe(2);
  expect(json<unknown[]>(["webhooks", "list", "--org", org]).body).toHaveLength(1);
});
