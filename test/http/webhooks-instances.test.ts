import { withOperatorPlatform } from "../../src/composition/platform.js";
import { webhooksOf } from "../../src/composition/webhooks.js";
import { loadConfig } from "../../src/config.js";
import { isBuilt, spawnServer, type ServerProcess } from "../support/config-process.js";
import { createTestDatabase, openTestDatabase, testProvider, type TestDatabase } from "../support/database.js";
import { freePort } from "../support/free-port.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/**
 * docs/events.md, "Delivery": every `gatehouse serve` instance delivers, each
 * attempt is made by one of them (a claim with a lease: FOR UPDATE SKIP
 * LOCKED on PostgreSQL), and an instance killed with deliveries in flight
 * leaves them to another when its lease runs out. Two real processes on one
 * PostgreSQL database; on SQLite one process owns the file, so this file runs
 * with TEST_DATABASE_URL only.
 */
const describeOnPostgres = testProvider === "postgresql" && isBuilt() ? describe : describe.skip;

let db: TestDatabase;
let port: number;
let receiver: WebhookReceiver | undefined;
const servers: ServerProcess[] = [];
let org: string;
let apiKey: string;

const env = () => ({
  DATABASE_URL: db.url,
  GATEHOUSE_DATA_DIR: db.dataDir,
  WEBHOOKS_ALLOW_PRIVATE_NETWORKS: "true",
  // A short lease, so that a killed instance's deliveries are taken over within the test (the default is 30 s).
  WEBHOOKS_LEASE_SECONDS: "2",
});

async function start(): Promise<ServerProcess> {
  const server = await spawnServer(env());
  servers.push(server);
  return server;
}

async function rest(server: ServerProcess, method: string, path: string, body?: unknown) {
  const response = await fetch(`${server.url}/organization/${org}/webhooks${path}`, {
    method,
    headers: { authorization: `Bearer ${apiKey}`, ...(body ? { "content-type": "application/json" } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/** Sends `count` test events through the instances in turn, a few at a time; answers their event ids. */
async function sendTestEvents(through: ServerProcess[], endpointId: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 25) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(25, count - i) }, (_, j) =>
        rest(through[(i + j) % through.length] as ServerProcess, "POST", `/${endpointId}/test`, {}),
      ),
    );
    ids.push(...batch.map((sent) => sent.event_id as string));
  }
  return ids;
}

/** Each delivery of the endpoint: its status and how many attempts were recorded for it. */
async function deliveriesOf(endpointId: string) {
  const database = await openTestDatabase(db);
  try {
    const rows = await database.client.webhookDelivery.findMany({
      where: { endpointId },
      select: { eventId: true, status: true, _count: { select: { attemptLog: true } } },
    });
    return rows.map((row) => ({ eventId: row.eventId, status: row.status, attempts: row._count.attemptLog }));
  } finally {
    await database.close();
  }
}

async function untilDelivered(endpointId: string, count: number, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const rows = await deliveriesOf(endpointId);
    if (rows.filter((row) => row.status === "delivered").length === count || Date.now() > deadline) return rows;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

beforeAll(async () => {
  if (testProvider !== "postgresql" || !isBuilt()) return;
  db = await createTestDatabase();
  port = await freePort();
  const first = await start();
  if (!first.credentials) throw new Error("the first start printed no credentials");
  ({ organizationId: org, apiKey } = first.credentials);
  await start();
}, 60_000);
afterAll(async () => {
  await Promise.all(servers.map((server) => server.kill()));
  await receiver?.close();
  await db?.drop();
});

describeOnPostgres("two instances on one PostgreSQL database", () => {
  test("500 events while the receiver is down, then up: every event delivered once, each attempt made by one instance", async () => {
    const [a, b] = servers as [ServerProcess, ServerProcess];
    const created = await rest(a, "POST", "", { url: `http://127.0.0.1:${port}/down-then-up` });
    const endpointId = (created.endpoint as { endpoint_id: string }).endpoint_id;
    // The events are recorded while no instance runs (by the domain's own function, as an operator command
    // would), so that when the instances start, every first attempt is made at once, refused, and due again
    // about 5 s later: however long recording takes on a busy machine, the receiver is up by then.
    await Promise.all([a.stop(), b.stop()]);
    servers.splice(0);
    const ids = await withOperatorPlatform(loadConfig(env()), async (platform) => {
      const webhooks = webhooksOf(platform);
      const made: string[] = [];
      for (let i = 0; i < 500; i++) made.push((await webhooks.sendTestEvent(org, endpointId)).eventId);
      return made;
    });
    const [c, d] = await Promise.all([start(), start()]);
    expect(c.url).not.toBe(d.url);
    // Nobody listens: every first attempt is refused, by one instance or the other.
    const deadline = Date.now() + 20_000;
    while ((await deliveriesOf(endpointId)).some((row) => row.attempts === 0) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    receiver = await startWebhookReceiver(port);
    const rows = await untilDelivered(endpointId, 500, 30_000);
    expect(rows.filter((row) => row.status === "delivered")).toHaveLength(500);
    // The refused attempt and the one that delivered, never a third: no two instances tried one delivery at once.
    expect(rows.map((row) => row.attempts)).toEqual(Array(500).fill(2));
    // Each event reached the receiver exactly once, none lost.
    const received = receiver.received.filter((delivery) => delivery.path === "/down-then-up").map((delivery) => delivery.id);
    expect(new Set(received)).toEqual(new Set(ids));
    expect(received).toHaveLength(500);
  }, 120_000);

  test("an instance killed with deliveries in flight: the other takes them over when the lease runs out, and delivers them", async () => {
    const live = receiver as WebhookReceiver;
    const path = "/in-flight";
    // One instance alone holds the deliveries: the other is stopped, and started again once they are in flight.
    const [a, b] = servers as [ServerProcess, ServerProcess];
    await b.stop();
    live.answer = (d) => (d.path === path ? "hang" : { status: 200 });
    const created = await rest(a, "POST", "", { url: `http://127.0.0.1:${port}${path}` });
    const endpointId = (created.endpoint as { endpoint_id: string }).endpoint_id;
    const ids = await sendTestEvents([a], endpointId, 12);
    await live.until(12, (d) => d.path === path, 10_000);
    const restarted = await start();
    // A holds every delivery, its requests unanswered; B does not touch them while A's lease is renewed.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(live.received.filter((d) => d.path === path)).toHaveLength(12);
    const killedAt = Date.now();
    await a.kill();
    live.answer = () => ({ status: 200 });
    const rows = await untilDelivered(endpointId, 12, 30_000);
    const tookOver = Date.now() - killedAt;
    expect(rows.filter((row) => row.status === "delivered")).toHaveLength(12);
    const copies = live.received.filter((d) => d.path === path).map((d) => d.id);
    // At least once: each event reached the receiver from A (unanswered) and again from B.
    expect(new Set(copies)).toEqual(new Set(ids));
    expect(copies).toHaveLength(24);
    expect(tookOver).toBeLessThan(60_000);
    console.log(`webhooks: the surviving instance delivered a killed instance's 12 deliveries ${tookOver} ms after the kill (lease 2 s)`);
    await restarted.stop();
  }, 90_000);
});
