import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { testProvider } from "../support/database.js";
import { createOtherOrganization } from "../support/credentials.js";
import { errorOf, defaultClient, secretsApi } from "../support/secrets-client.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * docs/secrets.md, "At rest": no plaintext value and no unencrypted private key in
 * the database (the SQLite file with its WAL, or every PostgreSQL table) or in
 * the server's log; a value's ciphertext is bound to its organisation,
 * environment, name and version, so one moved to another row is reported as
 * data corruption and never returned.
 */
let server: TestServer;
let api: ReturnType<typeof secretsApi>;
const values = [
  "canary-plain-7f3a9c1e",
  `canary-hybrid-${"b4d2".repeat(300)}`,
  "canary-updated-0e8d41aa",
  "canary-deleted-55c1f0b2",
  "canary-other-org-9a71c3",
];

beforeAll(async () => {
  server = await startTestServer();
  api = secretsApi(server, server.credentials.api_key);
});
afterAll(() => server.close());

/** Everything the database holds, as bytes. */
async function databaseContents(): Promise<Buffer> {
  if (testProvider === "sqlite") {
    const file = join(server.db.dataDir, "gatehouse.db");
    return Buffer.concat([file, `${file}-wal`, `${file}-shm`, `${file}-journal`].filter((f) => existsSync(f)).map((f) => readFileSync(f)));
  }
  const client = server.app.database.client;
  const tables = await client.$queryRawUnsafe<{ table_name: string }[]>(
    "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
  );
  const parts: string[] = [];
  for (const { table_name } of tables) {
    const rows = await client.$queryRawUnsafe<{ row: string }[]>(`SELECT t::text AS row FROM "${table_name}" t`);
    parts.push(...rows.map((r) => r.row));
  }
  return Buffer.from(parts.join("\n"));
}

/** The forms in which a value could leak: UTF-8, hex (PostgreSQL bytea text), base64. */
function leakForms(value: string): Buffer[] {
  const bytes = Buffer.from(value.slice(0, 48));
  return [bytes, Buffer.from(bytes.toString("hex")), Buffer.from(bytes.toString("base64").slice(0, 40))];
}

describe("after a series of writes, retrieves and a delete", () => {
  beforeAll(async () => {
    await api.put("PLAIN", "rest", values[0] as string, { tags: ["a"] });
    await api.put("HYBRID", "rest", values[1] as string, { format: "hybrid" });
    await api.put("UPDATED", "rest", "canary-first-version-31c9");
    await api.put("UPDATED", "rest", values[2] as string);
    await api.put("DELETED", "rest", values[3] as string);
    await api.put("VISIBLE_NAME_CONTROL", "rest", "x");
    await api.retrieve("rest");
    expect((await api.deleteResponse("DELETED", "rest")).status).toBe(200);
    const other = await createOtherOrganization(server);
    await secretsApi(server, other.adminKey, other.organizationId).put("PLAIN", "rest", values[4] as string);
  });

  test("no value appears anywhere in the database, including the WAL", async () => {
    const contents = await databaseContents();
    expect(contents.length).toBeGreaterThan(10_000);
    // Control: names are metadata, stored in clear, so the scan does see what was written.
    expect(contents.includes(Buffer.from("VISIBLE_NAME_CONTROL"))).toBe(true);
    for (const value of [...values, "canary-first-version-31c9"]) {
      for (const form of leakForms(value)) expect({ value, found: contents.includes(form) }).toEqual({ value, found: false });
    }
  });

  test("no private key is stored unencrypted", async () => {
    const contents = await databaseContents();
    expect(contents.includes(Buffer.from("PRIVATE KEY"))).toBe(false);
    // PKCS#8 RSA private keys start: version 0, then the rsaEncryption AlgorithmIdentifier.
    const pkcs8Prefix = Buffer.from("020100300d06092a864886f70d0101010500", "hex");
    expect(contents.includes(pkcs8Prefix)).toBe(false);
    expect(contents.includes(Buffer.from(pkcs8Prefix.toString("hex")))).toBe(false);
  });

  test("no value appears in the server's log", () => {
    const log = server.logs.join("\n");
    expect(log.length).toBeGreaterThan(100);
    for (const value of values) expect(log).not.toContain(value.slice(0, 20));
  });
});

describe("a ciphertext moved to another row", () => {
  const client = () => server.app.database.client;
  async function currentRow(name: string, environment: string, organizationId = server.credentials.organization_id) {
    const secret = await client().secret.findUniqueOrThrow({
      where: { organizationId_environment_name: { organizationId, environment, name } },
    });
    return client().secretVersion.findUniqueOrThrow({ where: { secretId_version: { secretId: secret.id, version: secret.version } } });
  }
  async function expectCorruption(environment: string, name: string, leaked: string) {
    const response = await api.retrieveResponse({ environment, names: [name], public_key_pem: defaultClient().publicKeyPem });
    const error = await errorOf(response);
    expect(error).toMatchObject({ status: 500, code: "data_loss", reason: "data_corruption" });
    expect(error.message).toMatch(/^data corruption: /);
    expect(error.text).not.toContain(leaked);
    expect(server.logs.join("\n")).not.toContain(leaked);
  }

  test("from another secret of the same environment is detected", async () => {
    await api.put("SOURCE", "moved", "moved-value-from-source");
    await api.put("TARGET", "moved", "target-value");
    await client().secretVersion.update({
      where: { secretId_version: { secretId: (await currentRow("TARGET", "moved")).secretId, version: 1 } },
      data: { ciphertext: (await currentRow("SOURCE", "moved")).ciphertext },
    });
    await expectCorruption("moved", "TARGET", "moved-value-from-source");
    // The other secrets of the environment are still served.
    expect((await api.retrieve("moved", { names: ["SOURCE"] })).secrets[0]?.value).toBe("moved-value-from-source");
  });

  test("from the same name in another environment is detected", async () => {
    await api.put("SAME_NAME", "env-one", "value-of-env-one");
    await api.put("SAME_NAME", "env-two", "value-of-env-two");
    const target = await currentRow("SAME_NAME", "env-two");
    await client().secretVersion.update({
      where: { secretId_version: { secretId: target.secretId, version: target.version } },
      data: { ciphertext: (await currentRow("SAME_NAME", "env-one")).ciphertext },
    });
    await expectCorruption("env-two", "SAME_NAME", "value-of-env-one");
  });

  test("from an older version of the same secret is detected", async () => {
    await api.put("VERSIONED", "versions", "old-version-value");
    await api.put("VERSIONED", "versions", "new-version-value");
    const latest = await currentRow("VERSIONED", "versions");
    const first = await client().secretVersion.findUniqueOrThrow({
      where: { secretId_version: { secretId: latest.secretId, version: 1 } },
    });
    await client().secretVersion.update({
      where: { secretId_version: { secretId: latest.secretId, version: 2 } },
      data: { ciphertext: first.ciphertext },
    });
    await expectCorruption("versions", "VERSIONED", "old-version-value");
  });

  test("from another organisation is detected", async () => {
    const other = await createOtherOrganization(server);
    await secretsApi(server, other.adminKey, other.organizationId).put("CROSS", "tenants", "other-tenant-value");
    await api.put("CROSS", "tenants", "own-tenant-value");
    const target = await currentRow("CROSS", "tenants");
    await client().secretVersion.update({
      where: { secretId_version: { secretId: target.secretId, version: target.version } },
      data: { ciphertext: (await currentRow("CROSS", "tenants", other.organizationId)).ciphertext },
    });
    await expectCorruption("tenants", "CROSS", "other-tenant-value");
  });

  test("a bit flipped in a stored ciphertext is detected", async () => {
    await api.put("FLIPPED", "flip", "flipped-value");
    const row = await currentRow("FLIPPED", "flip");
    const altered = Buffer.from(row.ciphertext);
    altered[20] = (altered[20] as number) ^ 0x01;
    await client().secretVersion.update({
      where: { secretId_version: { secretId: row.secretId, version: row.version } },
      data: { ciphertext: new Uint8Array(altered) },
    });
    await expectCorruption("flip", "FLIPPED", "flipped-value");
  });
});
