import { execFileSync } from "node:child_process";
import { createHash, createPublicKey, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCli } from "../support/cli.js";
import { dashboardRpc, setUpOwner, startDashboardServer, type DashboardTestServer } from "../support/dashboard-server.js";
import { errorOf, secretsApi } from "../support/secrets-client.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * docs/security.md, "Keys that rotate", the sealing key (docs/secrets.md, "Rotating the
 * sealing key"): values are sealed by tools we did not write (openssl, Python's
 * cryptography) to the old key and the new key around a rotation; the old key
 * is accepted for 24 hours of the server's clock (a seam, so no test sleeps),
 * then refused with 409 naming the current key_id; retrieval is unaffected.
 */
const hour = 3600_000;
let now = new Date("2026-11-22T10:00:00Z").getTime();
const clock = () => new Date(now);

let server: DashboardTestServer;
let api: ReturnType<typeof secretsApi>;
let dir: string;
let org: string;

beforeAll(async () => {
  server = await startDashboardServer({ clock });
  org = server.credentials.organization_id;
  api = secretsApi(server, server.credentials.api_key);
  dir = mkdtempSync(join(tmpdir(), "gatehouse-sealing-rotation-"));
});
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  await server.close();
});

const oaep = ["-pkeyopt", "rsa_padding_mode:oaep", "-pkeyopt", "rsa_oaep_md:sha256", "-pkeyopt", "rsa_mgf1_md:sha256"];

/** `openssl pkeyutl -encrypt` of the value to the PEM key, base64: the plain wire format. */
function opensslSeal(pem: string, value: string): string {
  writeFileSync(join(dir, "key.pem"), pem);
  writeFileSync(join(dir, "value.txt"), value);
  execFileSync("openssl", ["pkeyutl", "-encrypt", "-pubin", "-inkey", "key.pem", ...oaep, "-in", "value.txt", "-out", "sealed.bin"], {
    cwd: dir,
    stdio: "ignore",
  });
  return readFileSync(join(dir, "sealed.bin")).toString("base64");
}

/** Python's cryptography: the hybrid wire format (RSA-OAEP of an AES key, then IV, AES-256-GCM ciphertext and tag). */
function pythonSealHybrid(pem: string, value: string): string {
  const script = `
import base64, os, sys
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
key = serialization.load_pem_public_key(open(sys.argv[1], "rb").read())
aes, iv = os.urandom(32), os.urandom(12)
block = key.encrypt(aes, padding.OAEP(mgf=padding.MGF1(hashes.SHA256()), algorithm=hashes.SHA256(), label=None))
sys.stdout.write(base64.b64encode(block + iv + AESGCM(aes).encrypt(iv, sys.argv[2].encode(), None)).decode())`;
  writeFileSync(join(dir, "key.pem"), pem);
  return execFileSync("python3", ["-c", script, join(dir, "key.pem"), value], { encoding: "utf8" });
}

const put = (body: Record<string, unknown>) => api.putResponse({ environment: "rotation", sealed: true, tags: [], ...body });
const rotate = (bearer = server.credentials.api_key, organizationId = org) =>
  server.call(`/organization/${organizationId}/secrets/public-key/rotate`, { method: "POST", bearer });

interface RotateAnswer {
  public_key_pem: string;
  key_id: string;
  previous_keys: { key_id: string; public_key_pem: string; created_at: string; retired_at: string; accepted_until: string }[];
}

const keyIdOf = (pem: string) =>
  createHash("sha256")
    .update(createPublicKey(pem).export({ type: "spki", format: "der" }))
    .digest("hex");

// First, while the owner's setup link (7 days of the server's clock) is valid.
describe("the dashboard's secrets page", () => {
  let cookie: string;
  beforeAll(async () => {
    cookie = await setUpOwner(server);
  });

  test("lists the sealing keys and rotates the key, as the API does", async () => {
    const none = (await (await dashboardRpc(server, "ListSealingKeys", { organizationId: org }, { cookie })).json()) as object;
    expect(none).toEqual({}); // no key yet, no previous keys, no schedule (Connect JSON leaves defaults out)
    await api.publicKey(); // the first read creates the key
    const listed = await dashboardRpc(server, "ListSealingKeys", { organizationId: org }, { cookie });
    expect(listed.status).toBe(200);
    const before = (await listed.json()) as { current: { keyId: string } };
    expect(before.current.keyId).toBe((await api.publicKey()).key_id);
    const rotated = await dashboardRpc(server, "RotateSealingKey", { organizationId: org }, { cookie });
    expect(rotated.status).toBe(200);
    const after = (await rotated.json()) as { current: { keyId: string }; previousKeys: { keyId: string; acceptedUntil: string }[] };
    expect(after.current.keyId).toBe((await api.publicKey()).key_id);
    expect(after.previousKeys[0]?.keyId).toBe(before.current.keyId);
    expect(Date.parse(after.previousKeys[0]?.acceptedUntil ?? "")).toBe(now + 24 * hour);
  });

  test("an API key cannot reach them (403), nor a request without a session (401)", async () => {
    expect((await dashboardRpc(server, "RotateSealingKey", { organizationId: org }, { bearer: server.credentials.api_key })).status).toBe(
      403,
    );
    expect((await dashboardRpc(server, "ListSealingKeys", { organizationId: org })).status).toBe(401);
  });
});

describe("rotating the sealing key", () => {
  test("around a rotation openssl and Python seal to the old key and the new one; the old key is accepted for 24 h, then refused with 409", async () => {
    now += 1000; // after the dashboard's rotation: "newest first" is then one order
    const old = await api.publicKey();
    expect((await put({ name: "BEFORE", encrypted_value: opensslSeal(old.public_key_pem, "sealed before") })).status).toBe(200);

    const response = await rotate();
    expect(response.status).toBe(200);
    const rotated = (await response.json()) as RotateAnswer;
    expect(rotated.key_id).not.toBe(old.key_id);
    expect(rotated.key_id).toBe(keyIdOf(rotated.public_key_pem));
    expect(createPublicKey(rotated.public_key_pem).asymmetricKeyDetails?.modulusLength).toBe(4096);
    // Newest first: the key just replaced, then any earlier one still kept.
    expect(rotated.previous_keys[0]).toEqual({
      key_id: old.key_id,
      public_key_pem: old.public_key_pem,
      created_at: expect.any(String),
      retired_at: expect.any(String),
      accepted_until: expect.any(String),
    });
    expect(Date.parse(rotated.previous_keys[0]?.retired_at ?? "")).toBe(now);
    expect(Date.parse(rotated.previous_keys[0]?.accepted_until ?? "")).toBe(now + 24 * hour);
    expect(await api.publicKey()).toEqual({ public_key_pem: rotated.public_key_pem, key_id: rotated.key_id });

    // Within the grace period: both keys, with and without key_id, plain and hybrid.
    now += 23 * hour;
    const writes = [
      { name: "OLD_PLAIN", encrypted_value: opensslSeal(old.public_key_pem, "old plain") },
      { name: "OLD_NAMED", encrypted_value: opensslSeal(old.public_key_pem, "old named"), key_id: old.key_id },
      { name: "OLD_HYBRID", encrypted_value: pythonSealHybrid(old.public_key_pem, "old hybrid") },
      { name: "NEW_PLAIN", encrypted_value: opensslSeal(rotated.public_key_pem, "new plain") },
      { name: "NEW_NAMED", encrypted_value: pythonSealHybrid(rotated.public_key_pem, "new named"), key_id: rotated.key_id },
    ];
    for (const write of writes) expect({ name: write.name, status: (await put(write)).status }).toEqual({ name: write.name, status: 200 });

    // Past the grace period: the old key is refused, naming the current key_id; nothing is stored.
    now += hour + 1000;
    for (const body of [
      { name: "LATE", encrypted_value: opensslSeal(old.public_key_pem, "too late") },
      { name: "LATE", encrypted_value: pythonSealHybrid(old.public_key_pem, "too late"), key_id: old.key_id },
    ]) {
      const error = await errorOf(await put(body));
      expect(error).toMatchObject({ status: 409, code: "aborted", reason: "sealing_key_outdated" });
      expect(error.message).toContain(`key_id ${rotated.key_id}`);
      expect(error.text).not.toContain("too late");
    }
    expect((await api.list("rotation")).map((s) => s.name)).not.toContain("LATE");
    expect((await put({ name: "ON_TIME", encrypted_value: opensslSeal(rotated.public_key_pem, "new key") })).status).toBe(200);

    // Retrieval is unaffected: values stored under either key come back.
    const values = Object.fromEntries((await api.retrieve("rotation")).secrets.map((s) => [s.name, s.value]));
    expect(values).toEqual({
      BEFORE: "sealed before",
      OLD_PLAIN: "old plain",
      OLD_NAMED: "old named",
      OLD_HYBRID: "old hybrid",
      NEW_PLAIN: "new plain",
      NEW_NAMED: "new named",
      ON_TIME: "new key",
    });
  });

  test("a key_id that names no key of the organisation is 409 naming the current key; a malformed one is 400", async () => {
    const { public_key_pem, key_id } = await api.publicKey();
    const unknown = await errorOf(
      await put({ name: "X", encrypted_value: opensslSeal(public_key_pem, "x"), key_id: randomBytes(32).toString("hex") }),
    );
    expect(unknown).toMatchObject({ status: 409, reason: "sealing_key_outdated" });
    expect(unknown.message).toContain(`key_id ${key_id}`);
    expect(unknown.violations.map((v) => v.field)).toEqual(["key_id"]);

    const malformed = await errorOf(await put({ name: "X", encrypted_value: opensslSeal(public_key_pem, "x"), key_id: "KEY" }));
    expect(malformed).toMatchObject({ status: 400, code: "invalid_argument" });
    expect(malformed.violations.map((v) => v.field)).toEqual(["key_id"]);

    // Beside another problem, the outdated key is one violation of a 400 that lists both.
    const both = await errorOf(
      await put({ name: "bad name", encrypted_value: opensslSeal(public_key_pem, "x"), key_id: randomBytes(32).toString("hex") }),
    );
    expect(both.status).toBe(400);
    expect(both.violations.map((v) => v.field)).toEqual(["name", "key_id"]);
    expect((await api.list("rotation")).map((s) => s.name)).not.toContain("X");
  });

  test("a value sealed to a key other than the key_id it names is 400 value_not_sealed, as garbage is", async () => {
    const previous = await api.publicKey();
    await rotate();
    const { key_id } = await api.publicKey();
    const mismatched = await errorOf(await put({ name: "X", encrypted_value: opensslSeal(previous.public_key_pem, "x"), key_id }));
    expect(mismatched).toMatchObject({ status: 400, reason: "value_not_sealed" });
    expect(mismatched.violations.map((v) => v.field)).toEqual(["encrypted_value"]);
    const garbage = await errorOf(await put({ name: "X", encrypted_value: randomBytes(512).toString("base64") }));
    expect(garbage).toMatchObject({ status: 400, reason: "value_not_sealed" });
    expect(garbage.message).toContain(key_id);
  });

  test("a replaced key is recognised for 7 days after its grace period, then forgotten (400, like any other key)", async () => {
    const previous = await api.publicKey();
    await rotate();
    now += 24 * hour + 7 * 24 * hour - 1000;
    expect(await errorOf(await put({ name: "X", encrypted_value: opensslSeal(previous.public_key_pem, "x") }))).toMatchObject({
      status: 409,
      reason: "sealing_key_outdated",
    });
    now += 2000;
    expect(await errorOf(await put({ name: "X", encrypted_value: opensslSeal(previous.public_key_pem, "x") }))).toMatchObject({
      status: 400,
      reason: "value_not_sealed",
    });
  });

  test("rotation needs an admin API key of the organisation: a member key is 403, another organisation 404, none 401", async () => {
    const member = runCliKey("member");
    expect((await rotate(member)).status).toBe(403);
    expect((await rotate(server.credentials.api_key, "00000000-0000-4000-8000-000000000000")).status).toBe(404);
    expect((await server.call(`/organization/${org}/secrets/public-key/rotate`, { method: "POST" })).status).toBe(401);
    const typo = await server.call(`/organization/${org}/secrets/public-key/rotate?dryrun=true`, {
      method: "POST",
      bearer: server.credentials.api_key,
    });
    expect((await errorOf(typo)).status).toBe(400);
  });

  test("two rotations at once make one new key, which both answer", async () => {
    const before = (await api.publicKey()).key_id;
    const answers = await Promise.all([rotate(), rotate()]);
    const bodies = (await Promise.all(answers.map((a) => a.json()))) as RotateAnswer[];
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    expect(new Set(bodies.map((b) => b.key_id)).size).toBe(1);
    expect(bodies[0]?.key_id).not.toBe(before);
    expect(bodies[0]?.previous_keys[0]?.key_id).toBe(before);
  });
});

describe("a rotation reaches every instance", () => {
  let second: TestServer;
  beforeAll(async () => {
    second = await startTestServer({ db: server.db, masterKeyBase64: readMasterKey(), clock });
  });
  afterAll(() => second.close());

  test("an instance that had the old key cached serves the new one and opens values sealed to it", async () => {
    const other = secretsApi(second, server.credentials.api_key, org);
    const before = await other.publicKey();
    const rotated = (await (await rotate()).json()) as RotateAnswer;
    expect(rotated.key_id).not.toBe(before.key_id);
    // Even before an announcement arrives, a value sealed to the new key opens there (its keys are read again).
    const stored = await other.putResponse({
      name: "FROM_SECOND",
      environment: "rotation",
      sealed: true,
      tags: [],
      encrypted_value: opensslSeal(rotated.public_key_pem, "second"),
      key_id: rotated.key_id,
    });
    expect(stored.status).toBe(200);
    let served = before.key_id;
    for (let attempt = 0; attempt < 100 && served !== rotated.key_id; attempt++) {
      served = (await other.publicKey()).key_id;
      if (served !== rotated.key_id) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(served).toBe(rotated.key_id);
  });
});

describe("scheduled rotation (sealing_key_rotation_days)", () => {
  test("off by default; once set, the first read of the public key after that many days rotates it", async () => {
    const settings = runCli(["settings", "get", "--org", org, "--json"], cliEnv());
    expect(JSON.parse(settings.stdout)).toMatchObject({ sealing_key_rotation_days: 0 });
    const set = runCli(["settings", "set", "--org", org, "sealing_key_rotation_days=2", "--json"], cliEnv());
    expect(set.status).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ sealing_key_rotation_days: 2 });

    const first = await api.publicKey();
    const created = Date.parse((await listPublicKeys()).current?.createdAt ?? "");
    now = created + 2 * 24 * hour - 1000;
    await waitFor(async () => (await listPublicKeys()).sealingKeyRotationDays === 2);
    expect((await api.publicKey()).key_id).toBe(first.key_id);
    now += 2000;
    const second = await api.publicKey();
    expect(second.key_id).not.toBe(first.key_id);
    expect((await listPublicKeys()).previousKeys?.[0]?.keyId).toBe(first.key_id);
    // The value sealed to the key just replaced is in its grace period.
    expect((await put({ name: "SCHEDULED", encrypted_value: opensslSeal(first.public_key_pem, "x") })).status).toBe(200);

    const off = runCli(["settings", "set", "--org", org, "sealing_key_rotation_days=0"], cliEnv());
    expect(off.status).toBe(0);
  });

  test("a bad value is refused with what to fix, and nothing changes", () => {
    for (const value of ["-1", "3651", "1.5", "soon"]) {
      const answer = runCli(["settings", "set", "--org", org, `sealing_key_rotation_days=${value}`, "password=true", "--json"], cliEnv());
      expect(answer.status).toBe(1);
      expect(JSON.parse(answer.stderr)).toMatchObject({
        code: "invalid_argument",
        violations: [{ field: "sealing_key_rotation_days", description: expect.stringContaining("0 (never) to 3650") }],
      });
    }
    expect(JSON.parse(runCli(["settings", "get", "--org", org, "--json"], cliEnv()).stdout)).toMatchObject({
      password: false,
      sealing_key_rotation_days: 0,
    });
  });
});

describe("gatehouse secrets rotate-key", () => {
  test("rotates on the data store directly; the running server serves the new key", async () => {
    const before = await api.publicKey();
    const answer = runCli(["secrets", "rotate-key", "--org", org, "--json"], cliEnv());
    expect(answer).toMatchObject({ status: 0, stderr: "" });
    const rotated = JSON.parse(answer.stdout) as { organization_id: string; key_id: string; previous: { key_id: string }[] };
    expect(rotated.organization_id).toBe(org);
    // (The server's clock is the test's, days ahead of the command's: the keys it replaced come first in retirement order.)
    expect(rotated.previous.map((key) => key.key_id)).toContain(before.key_id);
    await waitFor(async () => (await api.publicKey()).key_id === rotated.key_id);
  });

  test("an organisation that does not exist: exit 1, organization_not_found; no --org: exit 2", () => {
    const unknown = runCli(["secrets", "rotate-key", "--org", "00000000-0000-4000-8000-000000000000", "--json"], cliEnv());
    expect(unknown.status).toBe(1);
    expect(JSON.parse(unknown.stderr)).toMatchObject({ code: "organization_not_found" });
    expect(runCli(["secrets", "rotate-key"], cliEnv()).status).toBe(2);
  });
});

function readMasterKey(): string {
  return readFileSync(join(server.db.dataDir, "master.key"), "utf8").trim();
}

function cliEnv(): Record<string, string> {
  return { DATABASE_URL: server.db.url, GATEHOUSE_DATA_DIR: server.db.dataDir };
}

function runCliKey(role: "admin" | "member"): string {
  const answer = runCli(["keys", "create", "--org", org, "--name", `rotation ${role}`, "--role", role, "--json"], cliEnv());
  if (answer.status !== 0) throw new Error(answer.stderr);
  return (JSON.parse(answer.stdout) as { api_key: string }).api_key;
}

interface PublicKeys {
  current?: { keyId: string; createdAt: string };
  sealingKeyRotationDays?: number;
  previousKeys?: { keyId: string }[];
}

async function listPublicKeys(): Promise<PublicKeys> {
  const response = await server.call("/svc.v1.SecretsService/ListPublicKeys", {
    method: "POST",
    bearer: server.credentials.api_key,
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ organizationId: org }),
  });
  if (response.status !== 200) throw new Error(`ListPublicKeys: ${response.status} ${await response.text()}`);
  return (await response.json()) as PublicKeys;
}

/** Polls until the condition holds (an announcement crossing processes), for at most 5 s. */
async function waitFor(condition: () => Promise<boolean>): Promise<void> {
  for (let attempt = 0; attempt < 250; attempt++) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error("the condition did not hold within 5 s");
}
