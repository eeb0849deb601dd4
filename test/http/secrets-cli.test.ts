import { createApiKey } from "../support/credentials.js";
import { requireBuiltCli, runCli, startCli } from "../support/secrets-cli.js";
import { secretsApi } from "../support/secrets-client.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * The `gatehouse` command as a user runs it (a separate process, public API
 * only, configured by GATEHOUSE_URL, GATEHOUSE_API_KEY and GATEHOUSE_ORG):
 * secrets set / list / pull / delete and run.
 */
let server: TestServer;
let env: Record<string, string>;

beforeAll(async () => {
  requireBuiltCli();
  server = await startTestServer();
  env = { GATEHOUSE_URL: server.url, GATEHOUSE_API_KEY: server.credentials.api_key, GATEHOUSE_ORG: server.credentials.organization_id };
});
afterAll(() => server.close());

describe("gatehouse secrets set", () => {
  test("seals the value from stdin locally and stores it, byte for byte", async () => {
    const result = await runCli(
      ["secrets", "set", "DATABASE_URL", "--env", "production", "--tag", "db", "--tag", "backend"],
      env,
      "postgres://app:s3cr3t@db/app",
    );
    expect(result).toMatchObject({ code: 0, stdout: "stored DATABASE_URL in production: version 1 [backend, db]\n" });
    const retrieved = await secretsApi(server, server.credentials.api_key).retrieve("production", { names: ["DATABASE_URL"] });
    expect(retrieved.secrets[0]).toMatchObject({ value: "postgres://app:s3cr3t@db/app", tags: ["backend", "db"] });
  });

  test("uses the hybrid format for a value over 446 bytes, and prints JSON with --json", async () => {
    const large = `-----BEGIN CERTIFICATE-----\n${"A".repeat(3000)}\n-----END CERTIFICATE-----\n`;
    const result = await runCli(["secrets", "set", "TLS_CERT", "--env", "production", "--json"], env, large);
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject({ name: "TLS_CERT", environment: "production", version: 1, tags: [] });
    const retrieved = await secretsApi(server, server.credentials.api_key).retrieve("production", { names: ["TLS_CERT"] });
    expect(retrieved.secrets[0]?.value).toBe(large);
  });

  test("a second set is the next version", async () => {
    const result = await runCli(
      ["secrets", "set", "DATABASE_URL", "--env", "production", "--tag", "db"],
      env,
      "postgres://app:rotated@db/app",
    );
    expect(result.stdout).toBe("stored DATABASE_URL in production: version 2 [db]\n");
  });

  test("a value over 64 KiB is refused before anything is sent", async () => {
    const result = await runCli(["secrets", "set", "HUGE", "--env", "production"], env, "x".repeat(64 * 1024 + 1));
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("secrets hold at most 65536 bytes");
  });

  test("the server's refusals are shown with every violation", async () => {
    const result = await runCli(["secrets", "set", "bad name", "--env", "Prod"], env, "v");
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/2 problems:\n {2}name: .*\n {2}environment: /);
  });

  test("a member's key is refused", async () => {
    const member = (await createApiKey(server, "member")).apiKey;
    const result = await runCli(["secrets", "set", "X", "--env", "production"], { ...env, GATEHOUSE_API_KEY: member }, "v");
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("admin role");
  });

  test("missing configuration is named", async () => {
    const result = await runCli(["secrets", "list", "--env", "production"], { GATEHOUSE_URL: server.url });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("set GATEHOUSE_API_KEY (an admin API key, gk_...) and GATEHOUSE_ORG");
  });
});

describe("gatehouse secrets list", () => {
  test("prints names, versions and tags, never values", async () => {
    const result = await runCli(["secrets", "list", "--env", "production"], env);
    expect(result.code).toBe(0);
    const lines = result.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^NAME\s+VERSION\s+UPDATED\s+TAGS$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/).slice(0, 2))).toEqual([
      ["DATABASE_URL", "2"],
      ["TLS_CERT", "1"],
    ]);
    expect(result.stdout).not.toContain("s3cr3t");
  });

  test("filters by tag and prints the API's JSON with --json", async () => {
    const result = await runCli(["secrets", "list", "--env", "production", "--tag", "db", "--json"], env);
    const body = JSON.parse(result.stdout) as { secrets: { name: string; version: number }[] };
    expect(body.secrets.map((s) => [s.name, s.version])).toEqual([["DATABASE_URL", 2]]);
  });
});

describe("gatehouse secrets pull", () => {
  beforeAll(async () => {
    await runCli(["secrets", "set", "QUOTED", "--env", "pull"], env, 'it\'s a "quoted" $HOME\nsecond line');
    await runCli(["secrets", "set", "SIMPLE", "--env", "pull", "--tag", "web"], env, "plain value");
  });

  test("prints dotenv by default", async () => {
    const result = await runCli(["secrets", "pull", "--env", "pull"], env);
    expect(result).toMatchObject({ code: 0, stdout: `QUOTED="it's a \\"quoted\\" \\$HOME\\nsecond line"\nSIMPLE='plain value'\n` });
  });

  test("prints a JSON object of name to value with --format json, selected by name or tag", async () => {
    const byName = await runCli(["secrets", "pull", "--env", "pull", "--format", "json", "--name", "QUOTED"], env);
    expect(JSON.parse(byName.stdout)).toEqual({ QUOTED: 'it\'s a "quoted" $HOME\nsecond line' });
    const byTag = await runCli(["secrets", "pull", "--env", "pull", "--format", "json", "--tag", "web"], env);
    expect(JSON.parse(byTag.stdout)).toEqual({ SIMPLE: "plain value" });
  });

  test("a missing name fails with the server's 404", async () => {
    const result = await runCli(["secrets", "pull", "--env", "pull", "--name", "NOPE"], env);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('no secret named "NOPE" in environment "pull" (HTTP 404)');
  });
});

describe("a selection that finds nothing is an error unless --allow-empty", () => {
  const typo = 'no secrets in environment "prodution"; environments are: production, pull (--allow-empty accepts an empty environment)';

  test("pull --env with a typo names the environments that exist, exit 1, nothing on stdout", async () => {
    expect(await runCli(["secrets", "pull", "--env", "prodution"], env)).toMatchObject({
      code: 1,
      stdout: "",
      stderr: `gatehouse: ${typo}\n`,
    });
    const json = await runCli(["secrets", "pull", "--env", "prodution", "--json"], env);
    expect(json).toMatchObject({ code: 1, stdout: "" });
    expect(JSON.parse(json.stderr)).toEqual({ code: "no_secrets", message: typo });
  });

  test("run --env with a typo does not start the command", async () => {
    const result = await runCli(["run", "--env", "prodution", "--", process.execPath, "-e", "console.log('started')"], env);
    expect(result).toMatchObject({ code: 1, stdout: "", stderr: `gatehouse: ${typo}\n` });
  });

  test("tags that match nothing in an environment that has secrets say so", async () => {
    const result = await runCli(["secrets", "pull", "--env", "pull", "--tag", "nope"], env);
    expect(result).toMatchObject({ code: 1, stdout: "" });
    expect(result.stderr).toContain('no secret in environment "pull" carries every tag of: nope');
  });

  test("--allow-empty accepts an empty selection", async () => {
    expect(await runCli(["secrets", "pull", "--env", "prodution", "--allow-empty"], env)).toMatchObject({
      code: 0,
      stdout: "",
      stderr: "",
    });
    expect(await runCli(["secrets", "pull", "--env", "prodution", "--allow-empty", "--json"], env)).toMatchObject({
      code: 0,
      stdout: "{}\n",
    });
    const run = await runCli(["run", "--env", "prodution", "--allow-empty", "--", process.execPath, "-e", "console.log('started')"], env);
    expect(run).toMatchObject({ code: 0, stdout: "started\n" });
  });
});

describe("gatehouse run", () => {
  test("starts the command with the secrets in its environment, without the API key, and returns its exit code", async () => {
    const result = await runCli(
      [
        "run",
        "--env",
        "pull",
        "--",
        process.execPath,
        "-e",
        "console.log(JSON.stringify([process.env.SIMPLE, process.env.QUOTED, process.env.GATEHOUSE_API_KEY ?? null, process.argv.slice(1)])); process.exit(7)",
        "a b",
      ],
      env,
    );
    expect(result.code).toBe(7);
    expect(JSON.parse(result.stdout)).toEqual(["plain value", 'it\'s a "quoted" $HOME\nsecond line', null, ["a b"]]);
  });

  test("forwards SIGTERM to the command and exits with its code", async () => {
    const script =
      "process.on('SIGTERM', () => { console.log('child got SIGTERM'); process.exit(42); }); console.log('ready'); setInterval(() => {}, 1000);";
    const { child, done } = startCli(["run", "--env", "pull", "--", process.execPath, "-e", script], env);
    await new Promise<void>((resolve) => {
      let seen = "";
      child.stdout?.on("data", (chunk: Buffer) => {
        seen += chunk.toString();
        if (seen.includes("ready")) resolve();
      });
    });
    child.kill("SIGTERM");
    const result = await done;
    expect(result.stdout).toContain("child got SIGTERM");
    expect(result.code).toBe(42);
  });

  test("a command ended by a signal gives 128 + the signal number", async () => {
    const result = await runCli(["run", "--env", "pull", "--", process.execPath, "-e", "process.kill(process.pid, 'SIGKILL')"], env);
    expect(result.code).toBe(128 + 9);
  });

  test("an unknown command gives 127", async () => {
    const result = await runCli(["run", "--env", "pull", "--", "gatehouse-no-such-command"], env);
    expect(result.code).toBe(127);
    expect(result.stderr).toContain("command not found");
  });

  test("the command must come after --", async () => {
    const result = await runCli(["run", "--env", "pull", "node", "server.js"], env);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("put the command after --");
  });
});

describe("gatehouse secrets delete", () => {
  test("deletes the secret with every version", async () => {
    const result = await runCli(["secrets", "delete", "TLS_CERT", "--env", "production"], env);
    expect(result).toMatchObject({ code: 0, stdout: "deleted TLS_CERT from production (every version)\n" });
    const listed = await runCli(["secrets", "list", "--env", "production", "--json"], env);
    expect((JSON.parse(listed.stdout) as { secrets: { name: string }[] }).secrets.map((s) => s.name)).toEqual(["DATABASE_URL"]);
    const again = await runCli(["secrets", "delete", "TLS_CERT", "--env", "production"], env);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("(HTTP 404)");
  });
});
