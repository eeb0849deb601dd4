import { chmodSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { isBuilt } from "../support/config-process.js";
import { runCli, startServe, type ServeProcess } from "../support/cli.js";
import { createTestDatabase, testProvider, type TestDatabase } from "../support/database.js";
import { until } from "../support/gateway-process.js";

/**
 * Files at rest (docs/security.md "Files at rest"): whatever the process
 * writes under its data directory (the SQLite database and its -wal, -shm and
 * -journal files, the change feed's notice file, master.key, the gateway's
 * cache file) is 0600, owner only, even in a directory that already exists
 * with mode 0755 and under the common umask 022, where a file created with
 * the default mode would be 0644, readable by every local user.
 */
let db: TestDatabase;
let serve: ServeProcess | undefined;
const umask = "022";

beforeAll(async () => {
  if (!isBuilt()) throw new Error("dist/ is not built (npm test builds it)");
  db = await createTestDatabase();
  // The data directory exists already, readable by everyone (mkdtemp makes it 0700).
  chmodSync(db.dataDir, 0o755);
});

afterAll(async () => {
  await serve?.stop();
  await db?.drop();
});

/** Every entry of the data directory with its permission bits, in octal. */
function modes(): Record<string, string> {
  const found: Record<string, string> = {};
  for (const name of readdirSync(db.dataDir).sort()) found[name] = (statSync(join(db.dataDir, name)).mode & 0o777).toString(8);
  return found;
}

/** Asserts that every entry is 0600 and that those named are among them (so the check is never of an empty directory). */
function expectPrivate(present: string[]) {
  const found = modes();
  expect(Object.keys(found)).toEqual(expect.arrayContaining(present));
  expect(found).toEqual(Object.fromEntries(Object.keys(found).map((name) => [name, "600"])));
}

const env = () => ({ DATABASE_URL: db.url, GATEHOUSE_DATA_DIR: db.dataDir, GATEWAY_PORT: "0" });
const sqlite = testProvider === "sqlite";
let organizationId = "";
let apiKey = "";

describe("files under an existing 0755 data directory, umask 022", () => {
  test("gatehouse init creates the database and master.key 0600", () => {
    const init = runCli(["init", "--json"], env(), undefined, { umask });
    expect({ status: init.status, stderr: init.stderr }).toEqual({ status: 0, stderr: "" });
    ({ organization_id: organizationId, api_key: apiKey } = JSON.parse(init.stdout) as { organization_id: string; api_key: string });
    expectPrivate(["master.key", ...(sqlite ? ["gatehouse.db"] : [])]);
  });

  test("gatehouse serve: the database's -wal and -shm files and the gateway's cache are 0600 too", async () => {
    serve = await startServe(env(), { umask });
    const cache = `gateway-${organizationId}.json`;
    // The embedded gateway writes its cache once it has loaded the configuration.
    await until(() => modes()[cache] !== undefined, "the embedded gateway's cache file");
    expectPrivate(["master.key", cache, ...(sqlite ? ["gatehouse.db", "gatehouse.db-wal", "gatehouse.db-shm"] : [])]);
  });

  test("after writes from the server and from another process, and a rewritten gateway cache, every file is still 0600", async () => {
    const running = serve as ServeProcess;
    const put = await fetch(`${running.url}/organization/${organizationId}/config`, {
      method: "PUT",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/yaml" },
      body: "version: 1\ndomains:\n  - name: files.example.com\n",
    });
    expect(put.status).toBe(200);
    const { revision } = (await put.json()) as { revision: number };
    const cache = join(db.dataDir, `gateway-${organizationId}.json`);
    await until(() => (JSON.parse(readFileSync(cache, "utf8")) as { revision: number }).revision === revision, "the cache's new revision");

    // An operator command is a process of its own: it writes the database and, on SQLite, the notice file.
    const created = runCli(["keys", "create", "--org", organizationId, "--name", "files", "--role", "member", "--json"], env(), undefined, {
      umask,
    });
    expect({ status: created.status, stderr: created.stderr }).toEqual({ status: 0, stderr: "" });
    expectPrivate(["master.key", `gateway-${organizationId}.json`, ...(sqlite ? ["gatehouse.db", "gatehouse.db-notices"] : [])]);
  });

  (sqlite ? test.each : test.skip.each)(["gatehouse.db", "gatehouse.db-notices"])(
    "%s, left readable by others (by an earlier version), is narrowed to 0600 at the next start",
    async (name) => {
      await serve?.stop();
      serve = undefined;
      chmodSync(join(db.dataDir, name), 0o644);
      serve = await startServe(env(), { umask });
      expectPrivate([name]);
    },
  );
});
