import { putConfig, reasonOf, type ErrorJson } from "../support/config-documents.js";
import { testProvider } from "../support/database.js";
import { enablePasswords, goodPassword, newIdentifier, postRest } from "../support/identity-client.js";
import { secretsApi } from "../support/secrets-client.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * docs/events.md, "Guarantees": an event is recorded in the transaction of the
 * change that causes it. A change that is refused (400, 409, 412) or rolls back
 * leaves no event; every change that commits has exactly one, also with many
 * writers at once. (A process killed between the write and the commit:
 * test/http/config-crash.test.ts.)
 */
let server: TestServer;
let org: string;

beforeAll(async () => {
  server = await startTestServer();
  org = server.credentials.organization_id;
  await enablePasswords(server);
});
afterAll(() => server?.close());

/** The outbox's events of a type, as recorded. */
async function events(type: string) {
  const rows = await server.app.database.client.event.findMany({ where: { organizationId: org, type }, orderBy: { createdAt: "asc" } });
  return rows.map((row) => (JSON.parse(row.payload) as { data: Record<string, unknown> }).data);
}

async function counts() {
  const rows = await server.app.database.client.event.groupBy({ by: ["type"], where: { organizationId: org }, _count: { _all: true } });
  return Object.fromEntries(rows.map((row) => [row.type, row._count._all]));
}

const domains = (name: string) => `version: 1\ndomains:\n  - name: ${name}\n`;

describe("a refused change records no event", () => {
  test("400: an invalid document; 412: an If-Match that does not match; 409: an identifier taken, a referenced secret", async () => {
    const before = await counts();
    const invalid = await putConfig(server, server.credentials.api_key, "version: 1\nroutes:\n  - name: x\n    upstream: nowhere\n");
    expect(invalid.status).toBe(400);
    const stale = await putConfig(server, server.credentials.api_key, domains("stale.example.com"), { ifMatch: '"99"' });
    expect({ status: stale.status, reason: reasonOf((await stale.json()) as ErrorJson) }).toEqual({
      status: 412,
      reason: "revision_mismatch",
    });
    const identifier = newIdentifier("taken");
    expect(
      (await postRest(server, "/identity/register/password", { identifier, password: goodPassword }, server.credentials.publishable_key))
        .status,
    ).toBe(200);
    const afterRegistration = await counts();
    const taken = await postRest(
      server,
      "/identity/register/password",
      { identifier, password: goodPassword },
      server.credentials.publishable_key,
    );
    expect(taken.status).toBe(409);
    // A secret that the configuration references: its deletion is refused inside the transaction, after the lock.
    const api = secretsApi(server, server.credentials.api_key);
    await api.put("REFERENCED", "production", "value-of-a-referenced-secret");
    const document = `version: 1
plugins:
  - name: with-secret
    type: request-headers
    config: {set: {x-token: "\${secret:production/REFERENCED}"}}
routes:
  - name: uses-secret
    path: /secret
    upstream: http://127.0.0.1:9
    plugins: [with-secret]
`;
    expect((await putConfig(server, server.credentials.api_key, document)).status).toBe(200);
    const beforeDelete = await counts();
    const inUse = await api.deleteResponse("REFERENCED", "production");
    expect(inUse.status).toBe(409);
    expect(await counts()).toEqual(beforeDelete);
    // Only the changes that committed recorded events: the registration's two, a secret and a configuration.
    expect(afterRegistration).toEqual({
      ...before,
      "identity.created": (before["identity.created"] ?? 0) + 1,
      "session.created": (before["session.created"] ?? 0) + 1,
    });
    expect(beforeDelete).toEqual({
      ...afterRegistration,
      "secret.created": 1,
      "config.applied": (afterRegistration["config.applied"] ?? 0) + 1,
    });
  });

  test("a dry run and a PUT that changes nothing record nothing either", async () => {
    const before = await counts();
    expect((await putConfig(server, server.credentials.api_key, domains("dry.example.com"), { dryRun: true })).status).toBe(200);
    const current = await server.call(`/organization/${org}/config`, { bearer: server.credentials.api_key });
    const yaml = await current.text();
    expect((await putConfig(server, server.credentials.api_key, yaml, { strict: true })).status).toBe(200);
    expect(await counts()).toEqual(before);
  });
});

describe("a failure between the change's writes and its commit leaves neither the change nor its event", () => {
  test("the event's own write fails: the change rolls back with it (no change commits without its event)", async () => {
    const db = server.app.database;
    if (db.provider === "sqlite") {
      await db.client.$executeRawUnsafe(
        `CREATE TRIGGER "test_fail_event" BEFORE INSERT ON "Event" WHEN NEW."payload" LIKE '%fail-at-event%' BEGIN SELECT RAISE(ABORT, 'simulated failure'); END`,
      );
    } else {
      await db.client.$executeRawUnsafe(
        `CREATE FUNCTION test_fail_event() RETURNS trigger AS $$ BEGIN IF NEW."payload" LIKE '%fail-at-event%' THEN RAISE EXCEPTION 'simulated failure'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`,
      );
      await db.client.$executeRawUnsafe(
        `CREATE TRIGGER test_fail_event BEFORE INSERT ON "Event" FOR EACH ROW EXECUTE FUNCTION test_fail_event()`,
      );
    }
    const identifier = newIdentifier("fail-at-event");
    const failed = await postRest(
      server,
      "/identity/register/password",
      { identifier, password: goodPassword },
      server.credentials.publishable_key,
    );
    expect(failed.status).toBe(500);
    expect(await db.client.identity.count({ where: { organizationId: org, identifier } })).toBe(0);
    expect(await db.client.event.count({ where: { payload: { contains: "fail-at-event" } } })).toBe(0);
  });

  const describeOnPostgres = testProvider === "postgresql" ? describe : describe.skip;
  describeOnPostgres("at COMMIT (PostgreSQL: a deferred constraint trigger fails the commit itself)", () => {
    test("everything was written, the commit fails: no configuration change and no event", async () => {
      const db = server.app.database;
      await db.client.$executeRawUnsafe(
        `CREATE FUNCTION test_fail_commit() RETURNS trigger AS $$ BEGIN IF NEW."document" LIKE '%fail-at-commit%' THEN RAISE EXCEPTION 'simulated failure at commit'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`,
      );
      await db.client.$executeRawUnsafe(
        `CREATE CONSTRAINT TRIGGER test_fail_commit AFTER INSERT ON "ConfigRevision" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_fail_commit()`,
      );
      const before = await counts();
      const revision = await server.call(`/organization/${org}/config`, { bearer: server.credentials.api_key });
      const etag = revision.headers.get("etag");
      await revision.text();
      const failed = await putConfig(server, server.credentials.api_key, domains("fail-at-commit.example.com"));
      expect(failed.status).toBe(500);
      expect(await counts()).toEqual(before);
      const after = await server.call(`/organization/${org}/config`, { bearer: server.credentials.api_key });
      expect(after.headers.get("etag")).toBe(etag);
      await after.text();
    });
  });
});

describe("every committed change has exactly one event, with writers at once", () => {
  test(`concurrent imports with If-Match (${testProvider}): one event per revision that committed, none for a 412`, async () => {
    const start = await events("config.applied");
    const rounds = 4;
    const writers = 6;
    let committed = 0;
    for (let round = 0; round < rounds; round++) {
      const current = await server.call(`/organization/${org}/config`, { bearer: server.credentials.api_key });
      const etag = current.headers.get("etag") ?? "";
      await current.text();
      const answers = await Promise.all(
        Array.from({ length: writers }, (_, i) =>
          putConfig(server, server.credentials.api_key, domains(`w${round}-${i}.example.com`), { ifMatch: etag }).then((r) => r.status),
        ),
      );
      // Of writers at one revision, exactly one commits; the others find another revision (412) and change nothing.
      expect(answers.filter((status) => status === 200)).toHaveLength(1);
      expect(answers.filter((status) => status === 412)).toHaveLength(writers - 1);
      committed += 1;
    }
    const recorded = (await events("config.applied")).slice(start.length).map((data) => data.revision as number);
    const first = (start.at(-1)?.revision as number | undefined) ?? 0;
    expect(recorded).toEqual(Array.from({ length: committed }, (_, i) => first + i + 1));
  }, 60_000);

  test(`concurrent writes of secrets (${testProvider}): each new version has its event, with its version, none lost or doubled`, async () => {
    const api = secretsApi(server, server.credentials.api_key);
    const names = ["A", "B", "C"];
    await Promise.all(
      Array.from({ length: 24 }, (_, i) => api.put(`CONCURRENT_${names[i % names.length]}`, "staging", `value number ${i} of many`)),
    );
    const written = [...(await events("secret.created")), ...(await events("secret.updated"))].filter(
      (data) => data.environment === "staging",
    );
    for (const name of names) {
      const versions = written
        .filter((data) => data.name === `CONCURRENT_${name}`)
        .map((data) => data.version as number)
        .sort((a, b) => a - b);
      expect(versions).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    }
    expect(written.filter((data) => data.version === 1).length).toBe(names.length);
  }, 60_000);
});
