import { request } from "node:http";
import { createTestDatabase, type TestDatabase } from "../support/database.js";
import { runCli, startServe } from "../support/cli.js";

/** CONTRACT.md "Addresses and process": `gatehouse init`, `serve`, and the operator commands. */
let db: TestDatabase;
let env: Record<string, string>;

beforeEach(async () => {
  db = await createTestDatabase();
  env = { DATABASE_URL: db.url, GATEHOUSE_DATA_DIR: db.dataDir };
});
afterEach(() => db.drop());

const credentialShapes = {
  organization_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
  api_key: expect.stringMatching(/^gk_[A-Za-z0-9_-]{43}$/),
  publishable_key: expect.stringMatching(/^pk_[A-Za-z0-9_-]{43}$/),
  secret_key: expect.stringMatching(/^sk_[A-Za-z0-9_-]{43}$/),
  dashboard_setup_url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:8080\/dashboard\/setup#token=[A-Za-z0-9_-]{43}$/),
};

describe("gatehouse init --json", () => {
  test("prints the five fields once, then refuses a second run", () => {
    const first = runCli(["init", "--json"], env);
    expect(first.stderr).toBe("");
    expect(first.status).toBe(0);
    const credentials = JSON.parse(first.stdout);
    expect(Object.keys(credentials).sort()).toEqual(Object.keys(credentialShapes).sort());
    expect(credentials).toEqual(credentialShapes);

    const second = runCli(["init", "--json"], env);
    expect(second.status).not.toBe(0);
    expect(second.stdout).toBe("");
    expect(second.stderr).toContain("already initialised");
  });

  test("generates the master key into the data directory with mode 0600", async () => {
    const { statSync } = await import("node:fs");
    const { join } = await import("node:path");
    expect(runCli(["init", "--json"], env).status).toBe(0);
    expect(statSync(join(db.dataDir, "master.key")).mode & 0o777).toBe(0o600);
  });
});

describe("gatehouse serve", () => {
  test("prints the first credentials on the first start only, and drains on SIGTERM", async () => {
    const first = await startServe(env);
    expect(first.output()).toMatch(/api_key \(admin\)\s+gk_[A-Za-z0-9_-]{43}/);
    const key = /api_key \(admin\)\s+(\S+)/.exec(first.output())?.[1] ?? "";
    const org = /organization_id\s+(\S+)/.exec(first.output())?.[1] ?? "";
    expect((await fetch(`${first.url}/readyz`)).status).toBe(200);
    // A request in flight when SIGTERM arrives still completes: its headers and
    // half its body are sent before the signal, the rest after.
    const body = "version: 1\ndomains:\n  - name: api.example.com\n";
    const response = new Promise<number>((resolve, reject) => {
      const req = request(`${first.url}/organization/${org}/config`, {
        method: "PUT",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/yaml", "content-length": Buffer.byteLength(body) },
      });
      req.once("response", (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.once("error", reject);
      req.write(body.slice(0, 10));
      setTimeout(() => {
        const code = first.stop("SIGTERM");
        setTimeout(() => req.end(body.slice(10)), 200);
        exitCode = code;
      }, 300);
    });
    let exitCode: Promise<number | null> = Promise.resolve(null);
    expect(await response).toBe(200);
    expect(await exitCode).toBe(0);

    const second = await startServe(env);
    try {
      expect(second.output()).not.toContain("gk_");
      expect(second.output()).not.toContain("shown ONCE");
      expect((await fetch(`${second.url}/organization/${org}/config`, { headers: { authorization: `Bearer ${key}` } })).status).not.toBe(
        401,
      );
    } finally {
      expect(await second.stop()).toBe(0);
    }
  });
});

describe("operator commands act on the data store directly", () => {
  test("keys create, list and revoke; orgs create and list", async () => {
    const init = JSON.parse(runCli(["init", "--json"], env).stdout);
    const created = runCli(["keys", "create", "--org", init.organization_id, "--name", "ci deploy", "--role", "member", "--json"], env);
    expect(created.status).toBe(0);
    const { api_key: apiKey, id } = JSON.parse(created.stdout);
    expect(apiKey).toMatch(/^gk_[A-Za-z0-9_-]{43}$/);

    const listed = JSON.parse(runCli(["keys", "list", "--org", init.organization_id, "--json"], env).stdout);
    expect(listed.map((k: { name: string; role: string }) => [k.name, k.role])).toEqual(
      expect.arrayContaining([
        ["ci deploy", "member"],
        ["initial admin", "admin"],
      ]),
    );
    expect(JSON.stringify(listed)).not.toContain(apiKey);

    expect(runCli(["keys", "revoke", id], env).status).toBe(0);
    expect(runCli(["keys", "revoke", id], env).status).toBe(1);

    const org = JSON.parse(runCli(["orgs", "create", "--name", "Second", "--json"], env).stdout);
    expect(org.organization_id).toMatch(/^[0-9a-f-]{36}$/);
    const orgs = JSON.parse(runCli(["orgs", "list", "--json"], env).stdout);
    expect(orgs.map((o: { name: string }) => o.name)).toEqual(["Default organisation", "Second"]);
  });

  test("bad usage says what to fix and exits 2", () => {
    const missing = runCli(["keys", "create", "--org", "x", "--name", "n"], env);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain("--role is required");
    const badRole = runCli(["keys", "create", "--org", "x", "--name", "n", "--role", "owner"], env);
    expect(badRole.status).toBe(1);
    expect(badRole.stderr).toContain('role: must be "admin" or "member"');
    expect(runCli(["frobnicate"], env).status).toBe(2);
  });
});
