import Sqlite from "better-sqlite3";
import { fileURLToPath, pathToFileURL } from "node:url";
import { runCliAsync, startServe, type ServeProcess } from "../support/cli.js";
import { createTestDatabase, testProvider, type TestDatabase } from "../support/database.js";
import { sealPlain } from "../support/secrets-client.js";

/**
 * docs/cli.md, "Beside a running server": operator commands that write (keys,
 * consumers, sessions, settings, rotations) succeed while a real `gatehouse
 * serve` takes sealed writes as fast as four clients can send them, and the
 * server fails none of its requests meanwhile. On SQLite a command waits for
 * another process's write lock and, past GATEHOUSE_LOCK_WAIT_SECONDS, says so.
 */
let db: TestDatabase;
let serve: ServeProcess;
let env: Record<string, string>;
let org: string;
let apiKey: string;
let secretKey: string;

beforeAll(async () => {
  db = await createTestDatabase();
  env = { DATABASE_URL: db.url, GATEHOUSE_DATA_DIR: db.dataDir };
  serve = await startServe({ ...env, GATEWAY_PORT: "off" });
  const field = (name: string) => new RegExp(`${name}\\s+(\\S+)`).exec(serve.output())?.[1] ?? "";
  org = field("organization_id");
  apiKey = field("api_key \\(admin\\)");
  secretKey = field("secret_key");
});
afterAll(async () => {
  await serve?.stop();
  await db.drop();
});

/** Four clients storing sealed values back to back until stopped; every answer that is not 200 is a failure. */
function sealedWriteLoad() {
  let running = true;
  let ok = 0;
  const failures: string[] = [];
  const started = Date.now();
  const loops = (async () => {
    const key = (await (await fetch(`${serve.url}/organization/${org}/secrets/public-key`, { headers: auth() })).json()) as {
      public_key_pem: string;
    };
    await Promise.all(
      [0, 1, 2, 3].map(async (client) => {
        for (let i = 0; running; i++) {
          const response = await fetch(`${serve.url}/organization/${org}/secrets`, {
            method: "PUT",
            headers: { ...auth(), "content-type": "application/json" },
            body: JSON.stringify({
              name: `LOAD_${client}_${i % 20}`,
              environment: "load",
              encrypted_value: sealPlain(key.public_key_pem, `value ${i}`),
              sealed: true,
            }),
          });
          if (response.status === 200) ok++;
          else failures.push(`${response.status} ${await response.text()}`);
        }
      }),
    );
  })();
  return {
    async stop() {
      running = false;
      await loops;
      return { ok, failures, perSecond: ok / ((Date.now() - started) / 1000) };
    },
  };
}

const auth = () => ({ authorization: `Bearer ${apiKey}` });

/** Runs the command and expects it to succeed; returns its JSON answer. */
async function succeeds(args: string[], extra: Record<string, string> = {}): Promise<Record<string, unknown>> {
  const answer = await runCliAsync([...args, "--json"], { ...env, ...extra });
  expect({ args: args.join(" "), status: answer.status, stderr: answer.stderr }).toEqual({ args: args.join(" "), status: 0, stderr: "" });
  return JSON.parse(answer.stdout) as Record<string, unknown>;
}

/** An identity with one live session (a magic link, verified). */
async function identityWithSession(): Promise<string> {
  const rpc = async (method: string, body: unknown) => {
    const response = await fetch(`${serve.url}/svc.v1.IdentityService/${method}`, {
      method: "POST",
      headers: { authorization: `Bearer ${secretKey}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (response.status !== 200) throw new Error(`${method}: ${response.status} ${await response.text()}`);
    return (await response.json()) as Record<string, string>;
  };
  const { token } = await rpc("GenerateMagicLink", { identifier: `busy-${Date.now()}@example.com` });
  return (await rpc("VerifyMagicLink", { token })).identityId as string;
}

describe("operator commands beside a server under sealed-write load", () => {
  test("every command that writes succeeds, and the server fails no request", async () => {
    const identity = await identityWithSession();
    const load = sealedWriteLoad();
    try {
      const created = await succeeds(["keys", "create", "--org", org, "--name", "busy", "--role", "member"]);
      await succeeds(["keys", "list", "--org", org]);
      expect(await succeeds(["keys", "revoke", created.id as string])).toEqual({ id: created.id, revoked: true });
      const gateway = await succeeds(["keys", "create", "--org", org, "--kind", "gateway", "--name", "edge"]);
      await succeeds(["keys", "revoke", "--kind", "gateway", "--org", org, gateway.id as string]);
      const consumer = await succeeds(["consumers", "create", "--org", org, "--name", "partner"]);
      await succeeds(["consumers", "revoke", "--org", org, consumer.consumer_id as string]);
      expect(await succeeds(["sessions", "revoke", "--identity", identity])).toEqual({ identity_id: identity, revoked_sessions: 1 });
      await succeeds(["settings", "set", "--org", org, "password=true", "sealing_key_rotation_days=30"]);
      await succeeds(["signing-key", "rotate", "--org", org]);
      await succeeds(["secrets", "rotate-key", "--org", org]);
      await succeeds(["master-key", "rotate"]);
      await succeeds(["orgs", "create", "--name", "Busy Two"]);
    } finally {
      const { ok, failures, perSecond } = await load.stop();
      console.log(`${testProvider}: ${ok} sealed writes (${perSecond.toFixed(1)}/s) while the commands ran; ${failures.length} failed`);
      expect(failures).toEqual([]);
      expect(perSecond).toBeGreaterThanOrEqual(10);
    }
  }, 180_000);
});

(testProvider === "sqlite" ? describe : describe.skip)("SQLite: another process's write lock", () => {
  const file = () => fileURLToPath(pathToFileURL(db.url.slice("file:".length)));

  /** The write lock, taken by a connection of this process as another server's would be. */
  function holdWriteLock(): { release(): void } {
    const other = new Sqlite(file(), { timeout: 5_000 });
    other.exec("BEGIN IMMEDIATE");
    return {
      release() {
        other.exec("ROLLBACK");
        other.close();
      },
    };
  }

  test("a command waits for it, then succeeds", async () => {
    const lock = holdWriteLock();
    const release = setTimeout(() => lock.release(), 1_500);
    try {
      const answer = await runCliAsync(["keys", "create", "--org", org, "--name", "patient", "--role", "member", "--json"], env);
      expect(answer).toMatchObject({ status: 0, stderr: "" });
      expect(answer.ms).toBeGreaterThanOrEqual(1_500);
    } finally {
      clearTimeout(release);
      try {
        lock.release();
      } catch {
        // released by the timer already
      }
    }
  });

  test("past GATEHOUSE_LOCK_WAIT_SECONDS it gives up, says so and what to do, and has changed nothing", async () => {
    const lock = holdWriteLock();
    let answer: Awaited<ReturnType<typeof runCliAsync>>;
    try {
      answer = await runCliAsync(["keys", "create", "--org", org, "--name", "impatient", "--role", "member", "--json"], {
        ...env,
        GATEHOUSE_LOCK_WAIT_SECONDS: "1",
      });
    } finally {
      lock.release();
    }
    expect(answer.status).toBe(1);
    expect(answer.stdout).toBe("");
    const error = JSON.parse(answer.stderr) as { code: string; message: string };
    expect(error.code).toBe("database_busy");
    expect(error.message).toContain("waiting 1 s for the database's write lock");
    expect(error.message).toContain("GATEHOUSE_LOCK_WAIT_SECONDS");
    expect(error.message).not.toMatch(/Operation has timed out|P1008|at .*\.js/);
    const keys = (await succeeds(["keys", "list", "--org", org])) as unknown as { name: string }[];
    expect(keys.map((k) => k.name)).not.toContain("impatient");
  });

  test("an invalid GATEHOUSE_LOCK_WAIT_SECONDS is refused with what is allowed", async () => {
    const answer = await runCliAsync(["keys", "list", "--org", org, "--json"], { ...env, GATEHOUSE_LOCK_WAIT_SECONDS: "0" });
    expect(answer.status).toBe(1);
    expect(JSON.parse(answer.stderr)).toMatchObject({
      code: "invalid_configuration",
      violations: [{ field: "GATEHOUSE_LOCK_WAIT_SECONDS", description: expect.stringContaining("1 to 3600") }],
    });
  });
});
