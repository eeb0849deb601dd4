import { connectCall, createOtherOrganization } from "../support/credentials.js";
import { secretsApi } from "../support/secrets-client.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * Versions under concurrency: every update of one secret gets the next version,
 * none is lost, also when two server instances share the database; and an
 * organisation gets exactly one key pair however many first calls race.
 */
let server: TestServer;
let second: TestServer;
let api: ReturnType<typeof secretsApi>;
let api2: ReturnType<typeof secretsApi>;

beforeAll(async () => {
  server = await startTestServer();
  second = await startTestServer({ db: server.db });
  api = secretsApi(server, server.credentials.api_key);
  api2 = secretsApi(second, server.credentials.api_key, server.credentials.organization_id);
});
afterAll(async () => {
  await second.close();
  await server.close();
});

async function versionsOf(name: string, environment: string): Promise<number[]> {
  const response = await connectCall(
    server,
    "/svc.v1.SecretsService/ListSecretVersions",
    { organizationId: server.credentials.organization_id, environment, name },
    server.credentials.api_key,
  );
  return ((await response.json()) as { versions: { version: number }[] }).versions.map((v) => v.version);
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

test("concurrent first calls on two instances agree on one organisation key", async () => {
  const other = await createOtherOrganization(server);
  const one = secretsApi(server, other.adminKey, other.organizationId);
  const two = secretsApi(second, other.adminKey, other.organizationId);
  const keys = await Promise.all([one.publicKey(), two.publicKey(), one.publicKey(), two.publicKey()]);
  expect(new Set(keys.map((k) => k.key_id)).size).toBe(1);
  const rows = await server.app.database.client.secretKeyring.count({ where: { organizationId: other.organizationId } });
  expect(rows).toBe(1);
  // A value sealed to that key opens on both instances.
  await one.put("AGREED", "keys", "sealed-once");
  expect((await two.retrieve("keys")).secrets[0]?.value).toBe("sealed-once");
});

test("concurrent creations of one new secret give versions 1..n, each exactly once", async () => {
  await api.pem();
  await api2.pem();
  const n = 12;
  const written = await Promise.all(range(1, n).map((i) => (i % 2 ? api : api2).put("RACED_CREATE", "concurrency", `value ${i}`)));
  expect(written.map((w) => w.version).sort((a, b) => a - b)).toEqual(range(1, n));
  expect((await api.list("concurrency")).find((s) => s.name === "RACED_CREATE")?.version).toBe(n);
});

test("concurrent updates of one secret on two instances give consecutive versions with no lost update", async () => {
  await api.put("RACED_UPDATE", "concurrency", "start");
  const n = 24;
  const written = await Promise.all(range(1, n).map((i) => (i % 2 ? api : api2).put("RACED_UPDATE", "concurrency", `update ${i}`)));
  const versions = written.map((w) => w.version).sort((a, b) => a - b);
  expect(versions).toEqual(range(2, n + 1));
  // The kept history is contiguous (pruned at version 25 to the last 10) and the newest value is the one written with it.
  expect(await versionsOf("RACED_UPDATE", "concurrency")).toEqual(range(16, n + 1).reverse());
  const newest = (await api.retrieve("concurrency", { names: ["RACED_UPDATE"] })).secrets[0];
  const writer = written.findIndex((w) => w.version === n + 1);
  expect(newest).toMatchObject({ version: n + 1, value: `update ${writer + 1}` });
});
