import { spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { createMasterKeyring, masterKeyIdOf } from "../../src/crypto/envelope.js";
import { legacySigningKeyPurpose, sessionSigningKeyPurpose } from "../../src/domain/master-key/wrapped-purposes.js";
import { openDatabase, type Database } from "../../src/storage/database.js";
import { createMasterKeyStore } from "../../src/storage/master-key-store.js";
import { gatehouseBin, runCliAsync } from "../support/cli.js";
import { createTestDatabase, testProvider, type TestDatabase } from "../support/database.js";
import { postRest } from "../support/identity-client.js";
import { secretsApi } from "../support/secrets-client.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { signInByMagicLink } from "../support/session-tokens.js";

/**
 * docs/security.md, "Keys that rotate", the master key (docs/secrets.md, "Rotating the
 * master key"): `gatehouse master-key rotate` wraps every key again under the
 * new master key while two instances serve under load, with no failed
 * request; killed (SIGKILL) mid-way it is run again and finishes; afterwards
 * the new key alone reads every value back, and the old key alone is refused
 * at start with an error that names the missing key by id.
 */
const b64 = (key: Buffer) => key.toString("base64");
const oldKey = randomBytes(32);
const newKey = randomBytes(32);
const oldId = masterKeyIdOf(oldKey);
const newId = masterKeyIdOf(newKey);
const both = { GATEHOUSE_MASTER_KEY: b64(newKey), GATEHOUSE_PREVIOUS_MASTER_KEYS: b64(oldKey) };

let db: TestDatabase;
let store: Database;
let org: string;
let apiKey: string;
let secretKey: string;
let publishableKey: string;
let otherOrg: { id: string; apiKey: string; secretKey: string };
/** Values written before the rotation, per organisation and name. */
const written = new Map<string, string>();
/** Retired session signing keys inserted directly: many wrapped rows, cheaply. */
const filler: { id: string; privateKey: Buffer }[] = [];

const env = (keys: Record<string, string>) => ({ DATABASE_URL: db.url, GATEHOUSE_DATA_DIR: db.dataDir, ...keys });
const counts = async () => {
  const byKey = new Map<string | null, number>();
  for (const count of await createMasterKeyStore(store.client).countWrapped()) {
    byKey.set(count.masterKeyId, (byKey.get(count.masterKeyId) ?? 0) + count.values);
  }
  return byKey;
};

beforeAll(async () => {
  db = await createTestDatabase();
  const first = await startTestServer({ db, env: { GATEHOUSE_MASTER_KEY: b64(oldKey) } });
  try {
    org = first.credentials.organization_id;
    apiKey = first.credentials.api_key;
    secretKey = first.credentials.secret_key;
    publishableKey = first.credentials.publishable_key;
    // Every kind of wrapped value: sealing keys (current and replaced), data keys, session signing keys, the decoy secret.
    const api = secretsApi(first, apiKey);
    for (const name of ["DB_URL", "TOKEN", "CERT"]) {
      const value = `${name} of ${org}`;
      await api.put(name, "prod", name === "CERT" ? value.repeat(40) : value);
      written.set(`${org}/${name}`, name === "CERT" ? value.repeat(40) : value);
    }
    await first.call(`/organization/${org}/secrets/public-key/rotate`, { method: "POST", bearer: apiKey });
    await signInByMagicLink(first, secretKey);
    await postRest(first, "/identity/login/begin", { identifier: "nobody@example.com" }, publishableKey);
    const created = await first.app.tenancy.createOrganization("Other");
    const key = await first.app.tenancy.createApiKey({ organizationId: created.organizationId, name: "admin", role: "admin" });
    otherOrg = { id: created.organizationId, apiKey: key.apiKey, secretKey: created.secretKey };
    await secretsApi(first, otherOrg.apiKey, otherOrg.id).put("OTHER", "prod", "other value");
    written.set(`${otherOrg.id}/OTHER`, "other value");
    await signInByMagicLink(first, otherOrg.secretKey);
  } finally {
    await first.close();
  }
  store = await openDatabase(
    testProvider === "sqlite" ? { provider: "sqlite", file: db.url.slice("file:".length) } : { provider: "postgresql", url: db.url },
  );
  const ring = createMasterKeyring(oldKey);
  const long = new Date(Date.now() - 86_400_000);
  for (let i = 0; i < 600; i++) filler.push({ id: `filler-${randomUUID()}`, privateKey: randomBytes(64) });
  await store.client.sessionSigningKey.createMany({
    data: filler.map(({ id, privateKey }) => ({
      id,
      organizationId: org,
      privateKeyEnc: new Uint8Array(ring.wrap(privateKey, sessionSigningKeyPurpose(org, id))),
      masterKeyId: oldId,
      publicJwk: "{}",
      createdAt: long,
      retiredAt: long,
      publishedUntil: long,
    })),
  });
  // A legacy signing key stored before master key ids were recorded: its id is null.
  await store.client.signingKey.create({
    data: {
      id: "legacy-kid",
      privateKeyEnc: new Uint8Array(ring.wrap(Buffer.from("legacy private key"), legacySigningKeyPurpose("legacy-kid"))),
      publicJwk: "{}",
      createdAt: long,
      retiredAt: long,
    },
  });
}, 120_000);
afterAll(async () => {
  await store?.close();
  await db?.drop();
});

describe("gatehouse master-key status", () => {
  test("counts the values each key wraps, by id, and those stored before ids were recorded", async () => {
    const answer = await runCliAsync(["master-key", "status", "--json"], env(both));
    expect(answer).toMatchObject({ status: 0, stderr: "" });
    const status = JSON.parse(answer.stdout) as {
      current: string;
      keys: { master_key_id: string | null; state: string; values: number }[];
    };
    expect(status.current).toBe(newId);
    const byId = Object.fromEntries(status.keys.map((key) => [String(key.master_key_id), key]));
    expect(byId[newId]).toMatchObject({ state: "current", values: 0 });
    // 2 keyrings (2 values each), 1 replaced sealing key, 2 live session keys + 600 filler, the decoy secret.
    expect(byId[oldId]).toMatchObject({ state: "previous", values: 2 * 2 + 1 + 2 + 600 + 1 });
    expect(byId.null).toMatchObject({ state: "unrecorded", values: 1 });
    expect(answer.stdout).not.toContain(b64(oldKey));
  });
});

describe("rotating under load with two instances serving", () => {
  let a: TestServer;
  let b: TestServer;
  beforeAll(async () => {
    [a, b] = await Promise.all([startTestServer({ db, env: both }), startTestServer({ db, env: both })]);
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
  });

  /** Retrieves, sealed writes and sign-ins on both instances, back to back, until stopped. */
  function load() {
    let running = true;
    let ok = 0;
    const failures: string[] = [];
    const check = async (label: string, work: () => Promise<unknown>) => {
      try {
        await work();
        ok++;
      } catch (error) {
        failures.push(`${label}: ${error instanceof Error ? error.message : String(error)}`);
      }
    };
    const loops = [a, b].flatMap((server, n) => [
      (async () => {
        while (running) {
          await check("retrieve", async () => {
            const values = await secretsApi(server, apiKey, org).retrieve("prod");
            if (values.secrets.length !== 3) throw new Error(`retrieved ${values.secrets.length} secrets`);
          });
          await check("retrieve other", () => secretsApi(server, otherOrg.apiKey, otherOrg.id).retrieve("prod"));
        }
      })(),
      (async () => {
        for (let i = 0; running; i++) {
          await check("write", () => secretsApi(server, apiKey, org).put(`LOAD_${n}`, "load", `value ${i}`));
          await check("sign-in", () => signInByMagicLink(server, i % 2 ? secretKey : otherOrg.secretKey));
        }
      })(),
    ]);
    return {
      async stop() {
        running = false;
        await Promise.all(loops);
        return { ok, failures };
      },
    };
  }

  test("killed mid-way and run again, the rotation finishes and no request fails", async () => {
    const running = load();
    let result: { ok: number; failures: string[] };
    try {
      // Small batches, so that the kill lands while batches remain.
      const child = spawn(process.execPath, [gatehouseBin, "master-key", "rotate", "--batch-size", "5", "--json"], {
        env: { ...process.env, LOG_LEVEL: "warn", ...env(both) },
        stdio: "ignore",
      });
      const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once("exit", (_code, signal) => resolve(signal)));
      let partial = false;
      for (let i = 0; i < 3000 && !partial && child.exitCode === null; i++) {
        const now = await counts();
        partial = (now.get(newId) ?? 0) > 100 && (now.get(oldId) ?? 0) > 100;
        if (!partial) await new Promise((resolve) => setTimeout(resolve, 5));
      }
      expect(partial).toBe(true);
      child.kill("SIGKILL");
      expect(await exited).toBe("SIGKILL");
      const between = await counts();
      expect(between.get(oldId)).toBeGreaterThan(0);
      // A third instance, its caches cold, serves from the half-rotated store: each row opens with the key it is under.
      const cold = await startTestServer({ db, env: both });
      try {
        for (const [organizationId, key] of [
          [org, apiKey],
          [otherOrg.id, otherOrg.apiKey],
        ] as const) {
          expect((await secretsApi(cold, key, organizationId).retrieve("prod")).secrets.length).toBeGreaterThan(0);
        }
        await signInByMagicLink(cold, secretKey);
        await signInByMagicLink(cold, otherOrg.secretKey);
      } finally {
        await cold.close();
      }

      const again = await runCliAsync(["master-key", "rotate", "--batch-size", "50", "--json"], env(both));
      expect(again).toMatchObject({ status: 0, stderr: "" });
      expect(JSON.parse(again.stdout)).toMatchObject({ current: newId, remaining: 0, retirable: [oldId] });
    } finally {
      result = await running.stop();
    }
    console.log(`${testProvider}: ${result.ok} requests on two instances during the rotation, ${result.failures.length} failed`);
    expect(result.failures).toEqual([]);
    expect(result.ok).toBeGreaterThan(20);
    const after = await counts();
    expect([...after.keys()]).toEqual([newId]);
  }, 180_000);
});

describe("after the rotation", () => {
  test("the new key alone reads every value back: secrets, sign-ins, the decoy secret, every wrapped row", async () => {
    const server = await startTestServer({ db, env: { GATEHOUSE_MASTER_KEY: b64(newKey) } });
    try {
      for (const [organizationId, key] of [
        [org, apiKey],
        [otherOrg.id, otherOrg.apiKey],
      ] as const) {
        const values = await secretsApi(server, key, organizationId).retrieve("prod");
        for (const secret of values.secrets) expect(secret.value).toBe(written.get(`${organizationId}/${secret.name}`));
      }
      expect(await signInByMagicLink(server, secretKey)).toMatch(/^ey/);
      expect((await postRest(server, "/identity/login/begin", { identifier: "nobody@example.com" }, publishableKey)).status).toBe(200);
      const ring = createMasterKeyring(newKey);
      const rows = await store.client.sessionSigningKey.findMany({ where: { id: { in: filler.map((f) => f.id) } } });
      expect(rows).toHaveLength(filler.length);
      for (const row of rows) {
        expect(row.masterKeyId).toBe(newId);
        const original = filler.find((f) => f.id === row.id)?.privateKey;
        expect(ring.unwrap(Buffer.from(row.privateKeyEnc), sessionSigningKeyPurpose(org, row.id), row.masterKeyId)).toEqual(original);
      }
      const legacy = await store.client.signingKey.findUniqueOrThrow({ where: { id: "legacy-kid" } });
      expect(ring.unwrap(Buffer.from(legacy.privateKeyEnc), legacySigningKeyPurpose("legacy-kid"), legacy.masterKeyId).toString()).toBe(
        "legacy private key",
      );
    } finally {
      await server.close();
    }
  });

  test("the old key alone is refused at start, naming the missing key by id, and nothing is served", async () => {
    await expect(startTestServer({ db, env: { GATEHOUSE_MASTER_KEY: b64(oldKey) } })).rejects.toMatchObject({
      reason: "master_key_missing",
      message: expect.stringContaining(`under ${newId}`),
    });
    const answer = await runCliAsync(["signing-key", "rotate", "--org", org, "--json"], env({ GATEHOUSE_MASTER_KEY: b64(oldKey) }));
    expect(answer.status).toBe(1);
    const error = JSON.parse(answer.stderr) as { code: string; message: string };
    expect(error.code).toBe("master_key_missing");
    expect(error.message).toContain(newId);
    expect(error.message).toContain(`${oldId} (current)`);
    expect(answer.stderr).not.toContain(b64(oldKey));
    expect(answer.stderr).not.toContain(b64(newKey));
  });

  test("a rotation given only keys that do not open the store refuses before it writes anything", async () => {
    const before = await counts();
    const stranger = b64(randomBytes(32));
    const answer = await runCliAsync(
      ["master-key", "rotate", "--json"],
      env({ GATEHOUSE_MASTER_KEY: stranger, GATEHOUSE_PREVIOUS_MASTER_KEYS: b64(oldKey) }),
    );
    expect(answer.status).toBe(1);
    expect(JSON.parse(answer.stderr)).toMatchObject({ code: "master_key_missing" });
    expect(await counts()).toEqual(before);
  });
});

describe("bad input", () => {
  test("a malformed GATEHOUSE_PREVIOUS_MASTER_KEYS is refused, naming the entry, never echoing it", async () => {
    const answer = await runCliAsync(
      ["master-key", "status", "--json"],
      env({ GATEHOUSE_MASTER_KEY: b64(newKey), GATEHOUSE_PREVIOUS_MASTER_KEYS: `${b64(oldKey)},c2hvcnQ=` }),
    );
    expect(answer.status).toBe(1);
    expect(JSON.parse(answer.stderr)).toMatchObject({
      code: "invalid_configuration",
      violations: [{ field: "GATEHOUSE_PREVIOUS_MASTER_KEYS[1]", description: expect.stringContaining("32 bytes") }],
    });
    expect(answer.stderr).not.toContain("c2hvcnQ=");
  });

  test("--batch-size outside 1 to 10000 is a usage error", async () => {
    const answer = await runCliAsync(["master-key", "rotate", "--batch-size", "0", "--json"], env(both));
    expect(answer.status).toBe(2);
    expect(JSON.parse(answer.stderr)).toMatchObject({ code: "invalid_value" });
  });

  test("generate refuses when the master key comes from GATEHOUSE_MASTER_KEY, and says what to do instead", async () => {
    const answer = await runCliAsync(["master-key", "generate", "--json"], env({ GATEHOUSE_MASTER_KEY: b64(newKey) }));
    expect(answer.status).toBe(1);
    const error = JSON.parse(answer.stderr) as { code: string; message: string };
    expect(error.code).toBe("master_key_from_environment");
    expect(error.message).toContain("GATEHOUSE_PREVIOUS_MASTER_KEYS");
  });
});

describe("the file-based master key", () => {
  test("generate makes a new key current (mode 0600) and keeps the old one in master.key.previous; rotate moves everything to it", async () => {
    const fileDb = await createTestDatabase();
    try {
      const fileEnv = { DATABASE_URL: fileDb.url, GATEHOUSE_DATA_DIR: fileDb.dataDir };
      const server = await startTestServer({ db: fileDb });
      await secretsApi(server, server.credentials.api_key).put("FILE", "prod", "file value");
      await server.close();
      const oldFileKey = readFileSync(join(fileDb.dataDir, "master.key"), "utf8").trim();

      const generated = await runCliAsync(["master-key", "generate", "--json"], fileEnv);
      expect(generated).toMatchObject({ status: 0, stderr: "" });
      const ids = JSON.parse(generated.stdout) as { current: string; previous: string };
      expect(ids.previous).toBe(masterKeyIdOf(Buffer.from(oldFileKey, "base64")));
      expect(readFileSync(join(fileDb.dataDir, "master.key.previous"), "utf8").trim()).toBe(oldFileKey);
      for (const file of ["master.key", "master.key.previous"]) expect(statSync(join(fileDb.dataDir, file)).mode & 0o777).toBe(0o600);
      expect(existsSync(join(fileDb.dataDir, "master.key.new"))).toBe(false);

      const rotated = await runCliAsync(["master-key", "rotate", "--json"], fileEnv);
      expect(rotated).toMatchObject({ status: 0, stderr: "" });
      expect(JSON.parse(rotated.stdout)).toMatchObject({ current: ids.current, remaining: 0, retirable: [ids.previous] });
      const status = JSON.parse((await runCliAsync(["master-key", "status", "--json"], fileEnv)).stdout) as {
        keys: { master_key_id: string; values: number }[];
      };
      expect(status.keys.find((key) => key.master_key_id === ids.previous)?.values).toBe(0);

      // Restarted, the server reads the key files again: the new key current, the old one previous; the value reads back.
      const after = await startTestServer({ db: fileDb });
      try {
        const { secrets } = await secretsApi(after, server.credentials.api_key, server.credentials.organization_id).retrieve("prod");
        expect(secrets.map((s) => s.value)).toEqual(["file value"]);
      } finally {
        await after.close();
      }
    } finally {
      await fileDb.drop();
    }
  });
});
