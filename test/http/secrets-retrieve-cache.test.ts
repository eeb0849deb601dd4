import { connectCall } from "../support/credentials.js";
import { dropChangeFeedConnections, testProvider } from "../support/database.js";
import { defaultClient, secretsApi } from "../support/secrets-client.js";
import { createManualClock, startTestServer, type TestServer } from "../support/server.js";

/**
 * Retrieves read an environment's stored values (ciphertexts, never
 * plaintext) from memory while the change feed vouches for them: every write
 * and delete is announced to every instance sharing the database. The
 * instance that wrote serves the change from its next retrieve; another one
 * as soon as the announcement arrives. Every retrieve is still audited, each
 * with its own event.
 */
let a: TestServer;
let b: TestServer;
let onA: ReturnType<typeof secretsApi>;
let onB: ReturnType<typeof secretsApi>;

beforeAll(async () => {
  // Time stands still: nothing expires, so only announcements can make an instance read again.
  const clock = createManualClock().clock;
  a = await startTestServer({ clock });
  b = await startTestServer({ db: a.db, clock });
  onA = secretsApi(a, a.credentials.api_key);
  onB = secretsApi(b, a.credentials.api_key, a.credentials.organization_id);
});
afterAll(async () => {
  await b.close();
  await a.close();
});

/** Retries a read until it satisfies the check (an announcement crosses instances asynchronously on PostgreSQL). */
async function eventually<T>(read: () => Promise<T>, check: (value: T) => boolean, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (check(value) || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const versionOf = async (api: typeof onA, environment: string, name: string) =>
  (await api.retrieve(environment)).secrets.find((s) => s.name === name)?.version;

test("the instance that wrote serves the change from its next retrieve", async () => {
  await onA.put("OWN", "own-writes", "first");
  expect((await onA.retrieve("own-writes")).secrets.map((s) => [s.name, s.version, s.value])).toEqual([["OWN", 1, "first"]]);
  await onA.put("OWN", "own-writes", "second");
  expect((await onA.retrieve("own-writes")).secrets.map((s) => [s.name, s.version, s.value])).toEqual([["OWN", 2, "second"]]);
  await onA.put("ADDED", "own-writes", "added");
  expect((await onA.retrieve("own-writes")).secrets.map((s) => s.name)).toEqual(["ADDED", "OWN"]);
  expect((await onA.deleteResponse("OWN", "own-writes")).status).toBe(200);
  const gone = await onA.retrieveResponse({
    environment: "own-writes",
    names: ["OWN"],
    tags: [],
    public_key_pem: defaultClient().publicKeyPem,
  });
  expect(gone.status).toBe(404);
  expect((await onA.retrieve("own-writes")).secrets.map((s) => s.name)).toEqual(["ADDED"]);
});

test("another instance serves a write or a delete once its announcement has arrived", async () => {
  await onA.put("SHARED", "across", "v1");
  expect(await versionOf(onB, "across", "SHARED")).toBe(1);
  await onA.put("SHARED", "across", "v2");
  expect(
    await eventually(
      () => versionOf(onB, "across", "SHARED"),
      (v) => v === 2,
    ),
  ).toBe(2);
  expect((await onB.retrieve("across")).secrets[0]?.value).toBe("v2");
  expect((await onA.deleteResponse("SHARED", "across")).status).toBe(200);
  expect(
    await eventually(
      () => versionOf(onB, "across", "SHARED"),
      (v) => v === undefined,
    ),
  ).toBeUndefined();
});

test("every retrieve is audited with an event of its own, however many run at once", async () => {
  await onA.put("COUNTED", "audited-retrieves", "x");
  const count = () =>
    a.app.database.client.secretAuditEvent.count({
      where: { organizationId: a.credentials.organization_id, action: "retrieve", environment: "audited-retrieves" },
    });
  const before = await count();
  await Promise.all(Array.from({ length: 24 }, (_, i) => (i % 2 ? onA : onB).retrieve("audited-retrieves")));
  expect((await count()) - before).toBe(24);
  const response = await connectCall(
    a,
    "/svc.v1.SecretsService/ListSecretAuditEvents",
    { organizationId: a.credentials.organization_id, pageSize: 100 },
    a.credentials.api_key,
  );
  const events = ((await response.json()) as { events: { action: string; environment: string; names: string[] }[] }).events;
  expect(
    events.filter((e) => e.action === "retrieve" && e.environment === "audited-retrieves" && e.names.join() === "COUNTED"),
  ).toHaveLength(24);
});

const postgresOnly = testProvider === "postgresql" ? test : test.skip;
postgresOnly(
  "PostgreSQL: after the change feed's connection is lost, another instance still comes to serve every later write",
  async () => {
    await onA.put("RECONNECT", "feed-lost", "before");
    expect(await versionOf(onB, "feed-lost", "RECONNECT")).toBe(1);
    expect(await dropChangeFeedConnections(a.db.url)).toBeGreaterThan(0);
    await onA.put("RECONNECT", "feed-lost", "while the feed was down");
    expect(
      await eventually(
        () => versionOf(onB, "feed-lost", "RECONNECT"),
        (v) => v === 2,
      ),
    ).toBe(2);
    await onA.put("RECONNECT", "feed-lost", "after");
    expect(
      await eventually(
        () => versionOf(onB, "feed-lost", "RECONNECT"),
        (v) => v === 3,
      ),
    ).toBe(3);
  },
);
