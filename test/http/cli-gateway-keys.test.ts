import { createHash } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { runCli } from "../support/cli.js";
import { createTestDatabase, type TestDatabase } from "../support/database.js";
import { muteGatewayHangUps, watchGateway } from "../support/gateway-control.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * docs/gateway.md, "Keys and consumers": gateway keys and consumer keys made,
 * listed and revoked by the operator commands, on the data store directly,
 * while a server runs on the same store.
 */
let db: TestDatabase;
let env: Record<string, string>;
let server: TestServer;
let org: string;
const onPostgres = process.env.TEST_DATABASE_URL?.startsWith("postgres") === true;

beforeAll(async () => {
  muteGatewayHangUps();
  db = await createTestDatabase();
  env = { DATABASE_URL: db.url, GATEHOUSE_DATA_DIR: db.dataDir };
  const init = runCli(["init", "--json"], env);
  if (init.status !== 0) throw new Error(`init failed: ${init.stderr}`);
  org = (JSON.parse(init.stdout) as { organization_id: string }).organization_id;
  server = await startTestServer({ db });
}, 60_000);
afterAll(async () => {
  await server?.close();
  await db?.drop();
});

/** Runs the command with --json; answers the exit status and the parsed stdout (or stderr on failure). */
function json<T = Record<string, unknown>>(args: string[]): { status: number | null; body: T } {
  const answer = runCli([...args, "--json"], env);
  const text = answer.status === 0 ? answer.stdout : answer.stderr;
  return { status: answer.status, body: JSON.parse(text) as T };
}

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

describe("gatehouse keys --kind gateway", () => {
  test("create prints the key once as {gateway_key, id}; the key follows its organisation; list shows its prefix only", async () => {
    const created = json<{ gateway_key: string; id: string }>(["keys", "create", "--org", org, "--kind", "gateway", "--name", "edge-1"]);
    expect(created.status).toBe(0);
    expect(created.body).toEqual({
      gateway_key: expect.stringMatching(/^gw_[A-Za-z0-9_-]{43}$/),
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
    });
    expect((await server.call(`/organization/${org}/config`, { bearer: created.body.gateway_key })).status).toBe(200);

    const listed = json<{ id: string; name: string; prefix: string; revoked_at: string | null }[]>([
      "keys",
      "list",
      "--org",
      org,
      "--kind",
      "gateway",
    ]);
    expect(listed.body).toEqual([
      expect.objectContaining({ id: created.body.id, name: "edge-1", prefix: created.body.gateway_key.slice(0, 9), revoked_at: null }),
    ]);
    expect(JSON.stringify(listed.body)).not.toContain(created.body.gateway_key);
    // API keys and gateway keys are listed apart.
    const apiKeys = json<{ id: string }[]>(["keys", "list", "--org", org]);
    expect(apiKeys.body.map((k) => k.id)).not.toContain(created.body.id);
    const table = runCli(["keys", "list", "--org", org, "--kind", "gateway"], env);
    expect(table.stdout).toMatch(/^ID +PREFIX +STATUS +NAME\n/);
  });

  test("revoke --kind gateway --org: the key is refused at once, and its open stream ends", async () => {
    const created = json<{ gateway_key: string; id: string }>([
      "keys",
      "create",
      "--org",
      org,
      "--kind",
      "gateway",
      "--name",
      "edge-2",
    ]).body;
    const stream = watchGateway(server.url, created.gateway_key, { gatewayId: "edge-2" });
    try {
      expect((await stream.next()).event.case).toBe("snapshot");
      const started = performance.now();
      expect(json(["keys", "revoke", "--kind", "gateway", "--org", org, created.id])).toEqual({
        status: 0,
        body: { id: created.id, revoked: true },
      });
      const exited = performance.now();
      // Announced (NOTIFY on PostgreSQL, the notice file on SQLite): the server ends the stream and forgets the key at once.
      expect(ConnectError.from(await stream.ended(10_000)).code).toBe(Code.Unauthenticated);
      console.log(
        `gateway key revoked by the CLI (${onPostgres ? "PostgreSQL" : "SQLite"}): its stream ended ${Math.round(performance.now() - exited)} ms after the command exited (it ran ${Math.round(exited - started)} ms)`,
      );
      // And a new request is refused.
      await expectEventually(
        async () => (await server.call(`/organization/${org}/config`, { bearer: created.gateway_key })).status === 401,
      );
      const again = json<{ code: string }>(["keys", "revoke", "--kind", "gateway", "--org", org, created.id]);
      expect(again).toMatchObject({ status: 1, body: { code: "gateway_key_not_found" } });
    } finally {
      stream.close();
    }
  }, 30_000);

  test("a gateway key of another organisation, an unknown id and a malformed one are refused without revoking anything", () => {
    const other = json<{ organization_id: string }>(["orgs", "create", "--name", "Elsewhere"]).body.organization_id;
    const theirs = json<{ id: string }>(["keys", "create", "--org", other, "--kind", "gateway", "--name", "theirs"]).body;
    expect(json(["keys", "revoke", "--kind", "gateway", "--org", org, theirs.id])).toMatchObject({
      status: 1,
      body: { code: "gateway_key_not_found" },
    });
    expect(json(["keys", "revoke", "--kind", "gateway", "--org", org, "00000000-0000-4000-8000-000000000000"])).toMatchObject({
      status: 1,
      body: { code: "gateway_key_not_found" },
    });
    expect(json(["keys", "revoke", "--kind", "gateway", "--org", org, "not-a-key"])).toMatchObject({
      status: 1,
      body: { code: "invalid_argument", violations: [{ field: "gateway_key_id" }] },
    });
    expect(json(["keys", "list", "--org", other, "--kind", "gateway"]).body).toEqual([
      expect.objectContaining({ id: theirs.id, revoked_at: null }),
    ]);
    // An API key of another organisation is not revoked through this one's either.
    const apiKey = json<{ id: string }>(["keys", "create", "--org", other, "--name", "their-api", "--role", "member"]).body;
    expect(json(["keys", "revoke", "--org", org, apiKey.id])).toMatchObject({ status: 1, body: { code: "api_key_not_found" } });
    expect(json(["keys", "revoke", "--org", other, apiKey.id])).toEqual({ status: 0, body: { id: apiKey.id, revoked: true } });
  });

  test("usage: a gateway key takes no role, an API key needs one, a gateway key is revoked within --org; exit 2", () => {
    const withRole = runCli(["keys", "create", "--org", org, "--kind", "gateway", "--name", "n", "--role", "admin", "--json"], env);
    expect(withRole.status).toBe(2);
    expect(JSON.parse(withRole.stderr)).toEqual({ code: "conflicting_options", message: "a gateway key has no role: leave out --role" });
    const noRole = runCli(["keys", "create", "--org", org, "--name", "n"], env);
    expect(noRole.status).toBe(2);
    expect(noRole.stderr).toContain("required option '--role <role>' not specified");
    expect(noRole.stderr).toContain('Run "gatehouse keys create --help" for usage.');
    const noOrg = runCli(["keys", "revoke", "--kind", "gateway", "00000000-0000-4000-8000-000000000000", "--json"], env);
    expect(noOrg.status).toBe(2);
    expect(JSON.parse(noOrg.stderr)).toMatchObject({ code: "missing_option" });
    const badKind = runCli(["keys", "create", "--org", org, "--kind", "edge", "--name", "n"], env);
    expect(badKind.status).toBe(2);
    expect(badKind.stderr).toContain("Allowed choices are api, gateway.");
    expect(json(["keys", "create", "--org", "00000000-0000-4000-8000-000000000000", "--kind", "gateway", "--name", "n"])).toMatchObject({
      status: 1,
      body: { code: "organization_not_found" },
    });
  });
});

describe("gatehouse consumers", () => {
  test("create prints {consumer_key, consumer_id} once; every gateway learns the key's hash, then its revocation", async () => {
    const gateway = json<{ gateway_key: string }>(["keys", "create", "--org", org, "--kind", "gateway", "--name", "watcher"]).body;
    const stream = watchGateway(server.url, gateway.gateway_key, { gatewayId: "watcher" });
    try {
      expect((await stream.next()).event.case).toBe("snapshot");
      const created = json<{ consumer_key: string; consumer_id: string }>(["consumers", "create", "--org", org, "--name", "partner-acme"]);
      expect(created.status).toBe(0);
      expect(created.body).toEqual({
        consumer_key: expect.stringMatching(/^ck_[A-Za-z0-9_-]{43}$/),
        consumer_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      });
      const { consumer_key: key, consumer_id: id } = created.body;

      const listed = json<{ consumer_id: string; name: string; prefix: string; revoked_at: string | null }[]>([
        "consumers",
        "list",
        "--org",
        org,
      ]);
      expect(listed.body).toContainEqual(
        expect.objectContaining({ consumer_id: id, name: "partner-acme", prefix: key.slice(0, 9), revoked_at: null }),
      );
      expect(JSON.stringify(listed.body)).not.toContain(key);
      expect(runCli(["consumers", "list", "--org", org], env).stdout).toMatch(/^CONSUMER_ID +PREFIX +STATUS +NAME\n/);

      // Announced by the command's process (NOTIFY on PostgreSQL, the notice file on SQLite): the stream carries both.
      const announced = await stream.next();
      expect(announced.event).toEqual({
        case: "consumerCreated",
        value: expect.objectContaining({ consumerId: id, keySha256: sha256(key) }),
      });
      expect(json(["consumers", "revoke", "--org", org, id])).toEqual({ status: 0, body: { consumer_id: id, revoked: true } });
      const revoked = await stream.next();
      expect(revoked.event).toEqual({ case: "consumerRevoked", value: expect.objectContaining({ consumerId: id }) });
      expect(json<{ consumer_id: string; revoked_at: string | null }[]>(["consumers", "list", "--org", org]).body).toContainEqual(
        expect.objectContaining({ consumer_id: id, revoked_at: expect.any(String) }),
      );
      expect(json(["consumers", "revoke", "--org", org, id])).toMatchObject({ status: 1, body: { code: "consumer_not_found" } });
    } finally {
      stream.close();
    }
  }, 30_000);

  test("refusals: a consumer of another organisation, an unknown or malformed id, an unknown organisation, a bad name", () => {
    const other = json<{ organization_id: string }>(["orgs", "create", "--name", "Consumers elsewhere"]).body.organization_id;
    const theirs = json<{ consumer_id: string }>(["consumers", "create", "--org", other, "--name", "theirs"]).body;
    expect(json(["consumers", "revoke", "--org", org, theirs.consumer_id])).toMatchObject({
      status: 1,
      body: { code: "consumer_not_found" },
    });
    expect(json(["consumers", "list", "--org", other]).body).toEqual([
      expect.objectContaining({ consumer_id: theirs.consumer_id, revoked_at: null }),
    ]);
    expect(json(["consumers", "revoke", "--org", org, "nope"])).toMatchObject({
      status: 1,
      body: { code: "invalid_argument", violations: [{ field: "consumer_id" }] },
    });
    expect(json(["consumers", "list", "--org", "00000000-0000-4000-8000-000000000000"])).toMatchObject({
      status: 1,
      body: { code: "organization_not_found" },
    });
    expect(json(["consumers", "create", "--org", org, "--name", "x".repeat(101)])).toMatchObject({
      status: 1,
      body: { code: "invalid_argument", violations: [{ field: "name" }] },
    });
    const missing = runCli(["consumers", "revoke", "--org", org], env);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain("missing required argument 'consumer-id'");
    const text = runCli(["consumers", "create", "--org", org, "--name", "text-output"], env);
    expect(text.status).toBe(0);
    expect(text.stdout).toMatch(/^consumer key \(shown once\): ck_[A-Za-z0-9_-]{43}\nconsumer_id: [0-9a-f-]{36}\n$/);
  });
});

/** Polls `check` until it holds (credential caches let a revoked key through for at most CREDENTIAL_CACHE_MS). */
async function expectEventually(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const until = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > until) throw new Error(`not true within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
