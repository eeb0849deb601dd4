import { request } from "node:http";
import { createTestDatabase, type TestDatabase } from "../support/database.js";
import { gatehouseCommand, runCli, runShell, startServe } from "../support/cli.js";

/** docs/cli.md, "Operator commands": `gatehouse init`, `serve`, and the other operator commands. */
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
    expect(missing.stderr).toContain("required option '--role <role>' not specified");
    const badRole = runCli(["keys", "create", "--org", "x", "--name", "n", "--role", "owner"], env);
    expect(badRole.status).toBe(2);
    expect(badRole.stderr).toContain("argument 'owner' is invalid. Allowed choices are admin, member.");
    expect(runCli(["frobnicate"], env).status).toBe(2);
  });
});

/** Every command and subcommand, as `gatehouse help` lists them. */
const commandPaths = [
  "serve",
  "gateway",
  "init",
  "orgs",
  "orgs create",
  "orgs list",
  "keys",
  "keys create",
  "keys list",
  "keys revoke",
  "operators",
  "operators setup-link",
  "operators sign-in-link",
  "consumers",
  "consumers create",
  "consumers list",
  "consumers revoke",
  "sessions",
  "sessions list",
  "sessions revoke",
  "settings",
  "settings get",
  "settings set",
  "signing-key",
  "signing-key rotate",
  "master-key",
  "master-key status",
  "master-key rotate",
  "master-key generate",
  "secrets",
  "secrets set",
  "secrets list",
  "secrets pull",
  "secrets delete",
  "secrets rotate-key",
  "webhooks",
  "webhooks create",
  "webhooks list",
  "webhooks rotate-secret",
  "webhooks deliveries",
  "webhooks redeliver",
  "run",
  "completion",
];
const groups = new Set([
  "orgs",
  "keys",
  "operators",
  "consumers",
  "sessions",
  "settings",
  "signing-key",
  "master-key",
  "secrets",
  "webhooks",
]);

describe("help", () => {
  test.each(commandPaths)("gatehouse %s --help, -h and help give the command's own help with examples", (path) => {
    const words = path.split(" ");
    const help = runCli([...words, "--help"], env);
    expect(help).toMatchObject({ status: 0, stderr: "" });
    expect(help.stdout).toMatch(new RegExp(`^Usage: gatehouse ${path} `));
    if (groups.has(path)) expect(help.stdout).toContain("Commands:");
    else expect(help.stdout).toMatch(/\nExamples:\n {2}.*gatehouse /);
    expect(help.stdout).toContain("--json");
    expect(runCli([...words, "-h"], env)).toEqual(help);
    expect(runCli(["help", ...words], env)).toEqual(help);
  });

  test("the program's help lists every command, the exit codes and the JSON error form", () => {
    for (const help of [runCli(["--help"], env), runCli(["help"], env)]) {
      expect(help.status).toBe(0);
      for (const group of [
        "serve",
        "gateway",
        "init",
        "orgs",
        "keys",
        "consumers",
        "sessions",
        "settings",
        "signing-key",
        "master-key",
        "secrets",
        "webhooks",
        "run",
        "completion",
      ])
        expect(help.stdout).toMatch(new RegExp(`\\n  ${group}\\b`));
      expect(help.stdout).toContain("Exit codes: 0 success, 1 failure, 2 usage error");
      expect(help.stdout).toContain('{"code": "...", "message": "..."}');
    }
  });

  test("--version and -V print the version of package.json", async () => {
    const { readFileSync } = await import("node:fs");
    const { version } = JSON.parse(readFileSync("package.json", "utf8")) as { version: string };
    expect(runCli(["--version"], env)).toEqual({ status: 0, stdout: `${version}\n`, stderr: "" });
    expect(runCli(["-V"], env).stdout).toBe(`${version}\n`);
  });

  test("a group without a command is a usage error that shows the group's commands", () => {
    const secrets = runCli(["secrets"], env);
    expect(secrets.status).toBe(2);
    expect(secrets.stdout).toBe("");
    expect(secrets.stderr).toMatch(/^gatehouse: secrets needs a command: set, list, pull, delete, rotate-key\n/);
    expect(secrets.stderr).toContain("Usage: gatehouse secrets ");
    const bare = runCli([], env);
    expect(bare.status).toBe(2);
    expect(bare.stderr).toMatch(/^gatehouse: a command is needed: serve, gateway, init, /);
  });
});

describe("unknown commands and options are refused with a suggestion, exit 2", () => {
  test.each([
    [["kyes", "list"], "unknown command 'kyes'\n(Did you mean keys?)"],
    [["keys", "creat"], "unknown command 'creat'\n(Did you mean create?)"],
    [["kyes", "--help"], "unknown command 'kyes'\n(Did you mean keys?)"],
    [["help", "setings"], "unknown command 'setings'\n(Did you mean settings?)"],
    [["keys", "list", "--ogr", "x"], "unknown option '--ogr'\n(Did you mean --org?)"],
    [["secrets", "pull", "--env", "production", "--allow-emtpy"], "unknown option '--allow-emtpy'\n(Did you mean --allow-empty?)"],
  ])("gatehouse %j", (args, message) => {
    const answer = runCli(args, env);
    expect(answer.status).toBe(2);
    expect(answer.stdout).toBe("");
    expect(answer.stderr).toContain(`gatehouse: ${message}\n`);
    expect(answer.stderr).toMatch(/Run "gatehouse[a-z ]*--help" for usage\.\n$/);
  });

  test("an option that needs a value never takes the next option as its value", () => {
    const init = JSON.parse(runCli(["init", "--json"], env).stdout);
    const keys = () => JSON.parse(runCli(["keys", "list", "--org", init.organization_id, "--json"], env).stdout) as { name: string }[];
    const before = keys();

    const swallowed = runCli(["keys", "create", "--org", init.organization_id, "--name", "--json"], env);
    expect(swallowed.status).toBe(2);
    expect(swallowed.stdout).toBe("");
    expect(JSON.parse(swallowed.stderr)).toEqual({ code: "missing_option_value", message: "option '--name <name>' argument missing" });

    const next = runCli(["keys", "create", "--org", init.organization_id, "--name", "--role", "admin"], env);
    expect(next.status).toBe(2);
    expect(next.stderr).toContain("option '--name <name>' needs a value, but '--role' follows it; write --name=--role");
    expect(keys()).toEqual(before);

    // The explicit form takes any value.
    const explicit = runCli(["keys", "create", "--org", init.organization_id, "--name=--odd", "--role", "member", "--json"], env);
    expect(explicit.status).toBe(0);
    expect(keys().map((k) => k.name)).toContain("--odd");
  });
});

describe("errors: printed once, as text or as one JSON line, with documented exit codes", () => {
  test("a validation error lists each violation once", () => {
    const init = JSON.parse(runCli(["init", "--json"], env).stdout);
    const answer = runCli(["settings", "set", "--org", init.organization_id, "bogus=1", "password=maybe"], env);
    expect(answer.status).toBe(1);
    expect(answer.stderr).toBe(
      'gatehouse: 2 problems:\n  bogus: is not a setting; keys: passkeys, magic_links, password, rp_id, origins, session_ttl_seconds, magic_link_ttl_seconds, lockout_threshold, lockout_window_seconds, ip_limit_per_minute, magic_link_limit_per_hour\n  password: must be true or false, got "maybe"\n',
    );
  });

  test("with --json a failure is one JSON line on stderr, with the DomainError reason, and nothing on stdout", () => {
    const init = runCli(["init", "--json"], env);
    expect(init.status).toBe(0);
    const again = runCli(["init", "--json"], env);
    expect(again.status).toBe(1);
    expect(again.stdout).toBe("");
    expect(again.stderr.endsWith("\n")).toBe(true);
    expect(again.stderr.trimEnd().split("\n")).toHaveLength(1);
    expect(JSON.parse(again.stderr)).toEqual({ code: "already_initialized", message: expect.stringContaining("already initialised") });

    const unknownOrg = runCli(["keys", "list", "--org", "00000000-0000-4000-8000-000000000000", "--json"], env);
    expect(unknownOrg).toMatchObject({ status: 1, stdout: "" });
    expect(JSON.parse(unknownOrg.stderr)).toMatchObject({ code: "organization_not_found" });

    const revoke = runCli(["keys", "revoke", "00000000-0000-4000-8000-000000000000", "--json"], env);
    expect(revoke.status).toBe(1);
    expect(JSON.parse(revoke.stderr)).toEqual({
      code: "api_key_not_found",
      message: "no active API key with id 00000000-0000-4000-8000-000000000000 (see gatehouse keys list)",
    });
  });

  test("init --json reports a store it cannot open as JSON too", () => {
    const answer = runCli(["init", "--json"], { ...env, DATABASE_URL: "mysql://db.example/gatehouse" });
    expect(answer.status).toBe(1);
    expect(answer.stdout).toBe("");
    expect(JSON.parse(answer.stderr)).toMatchObject({ code: "invalid_configuration", violations: [{ field: "DATABASE_URL" }] });
  });

  test("with --json a usage error is one JSON line with a usage code, exit 2", () => {
    const answer = runCli(["keys", "list", "--ogr", "x", "--json"], env);
    expect(answer.status).toBe(2);
    expect(answer.stdout).toBe("");
    expect(JSON.parse(answer.stderr)).toEqual({ code: "unknown_option", message: "unknown option '--ogr' (Did you mean --org?)" });
    expect(JSON.parse(runCli(["secrets", "--json"], env).stderr)).toEqual({
      code: "missing_command",
      message: "secrets needs a command: set, list, pull, delete, rotate-key",
    });
  });

  test("--json results are JSON on stdout for every command that prints one", () => {
    const init = JSON.parse(runCli(["init", "--json"], env).stdout);
    const org = init.organization_id as string;
    const created = JSON.parse(runCli(["keys", "create", "--org", org, "--name", "k", "--role", "member", "--json"], env).stdout);
    const outputs = [
      runCli(["orgs", "list", "--json"], env),
      runCli(["orgs", "create", "--name", "Other", "--json"], env),
      runCli(["keys", "list", "--org", org, "--json"], env),
      runCli(["keys", "revoke", created.id, "--json"], env),
      runCli(["settings", "get", "--org", org, "--json"], env),
      runCli(["settings", "set", "--org", org, "password=true", "--json"], env),
      runCli(["completion", "bash", "--json"], env),
    ];
    for (const output of outputs) {
      expect(output).toMatchObject({ status: 0, stderr: "" });
      expect(() => JSON.parse(output.stdout)).not.toThrow();
    }
    expect(JSON.parse(outputs[3]?.stdout ?? "")).toEqual({ id: created.id, revoked: true });
  });
});

describe("a reader that stops early (| head -1) ends the output quietly", () => {
  test("keys list | head -1 prints the first line, no stack trace, status 0", () => {
    const init = JSON.parse(runCli(["init", "--json"], env).stdout);
    for (let i = 0; i < 3; i++) runCli(["keys", "create", "--org", init.organization_id, "--name", `k${i}`, "--role", "member"], env);
    const answer = runShell(`${gatehouseCommand(["keys", "list", "--org", init.organization_id])} | head -1`, env);
    expect(answer).toEqual({ status: 0, stdout: expect.stringMatching(/^ID +PREFIX +ROLE +STATUS +NAME\n$/), stderr: "" });
  });

  test("a pipe closed before anything is written (| true): the work is done, status 0, nothing on stderr", () => {
    const init = JSON.parse(runCli(["init", "--json"], env).stdout);
    const org = init.organization_id as string;
    for (const args of [
      ["keys", "list", "--org", org, "--json"],
      ["settings", "set", "--org", org, "password=true", "session_ttl_seconds=120"],
      ["completion", "bash"],
      ["--help"],
    ]) {
      expect(runShell(`${gatehouseCommand(args)} | true`, env)).toEqual({ status: 0, stdout: "", stderr: "" });
    }
    expect(JSON.parse(runCli(["settings", "get", "--org", org, "--json"], env).stdout)).toMatchObject({
      password: true,
      session_ttl_seconds: 120,
    });
  });
});

describe("gatehouse completion", () => {
  /** What bash offers for the words typed so far (the last one being completed). */
  function bashComplete(words: string[]) {
    const script = [
      `source <(${gatehouseCommand(["completion", "bash"])})`,
      `COMP_WORDS=(gatehouse ${words.map((w) => `'${w}'`).join(" ")})`,
      `COMP_CWORD=$((\${#COMP_WORDS[@]} - 1))`,
      "_gatehouse",
      `printf "%s\\n" "\${COMPREPLY[@]}"`,
    ].join("; ");
    const answer = runShell(script, env);
    expect(answer.stderr).toBe("");
    return answer.stdout.split("\n").filter((line) => line !== "");
  }

  test("bash: commands, subcommands, options and option values come from the command tree", () => {
    expect(bashComplete([""])).toEqual([
      "serve",
      "gateway",
      "init",
      "orgs",
      "keys",
      "operators",
      "consumers",
      "sessions",
      "settings",
      "signing-key",
      "master-key",
      "secrets",
      "webhooks",
      "run",
      "completion",
      "help",
    ]);
    expect(bashComplete(["ke"])).toEqual(["keys"]);
    expect(bashComplete(["keys", ""])).toEqual(["create", "list", "revoke", "help"]);
    expect(bashComplete(["keys", "create", "--"])).toEqual(["--org", "--name", "--kind", "--role", "--help", "--version", "--json"]);
    expect(bashComplete(["keys", "create", "--kind", ""])).toEqual(["api", "gateway"]);
    expect(bashComplete(["consumers", ""])).toEqual(["create", "list", "revoke", "help"]);
    expect(bashComplete(["sessions", ""])).toEqual(["list", "revoke", "help"]);
    expect(bashComplete(["sessions", "revoke", "--"])).toEqual(["--identity", "--org", "--help", "--version", "--json"]);
    expect(bashComplete(["keys", "create", "--name", "x", "--role", ""])).toEqual(["admin", "member"]);
    expect(bashComplete(["--json", "secrets", "pull", "--format", ""])).toEqual(["dotenv", "json"]);
    expect(bashComplete(["secrets", "pull", "--allow"])).toEqual(["--allow-empty"]);
    expect(bashComplete(["completion", ""])).toEqual(["bash", "zsh"]);
  });

  test("zsh: a #compdef function with every command and option, described", async () => {
    const script = runCli(["completion", "zsh"], env);
    expect(script.status).toBe(0);
    expect(script.stdout).toMatch(/^#compdef gatehouse\n/);
    for (const path of commandPaths) expect(script.stdout).toContain(`('${path}') commands=(`);
    expect(script.stdout).toContain("'create:create a consumer key for an organisation and print it, once'");
    expect(script.stdout).toContain("'--allow-empty:succeed when nothing is selected");
    const zsh = runShell("command -v zsh", env);
    if (zsh.status !== 0) return; // zsh is not installed: the shape above is what can be checked
    // Run the function with zsh's completion builtins replaced by functions that print what they were given.
    const { writeFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    const run = (words: string[]) => {
      const file = join(db.dataDir, "complete.zsh");
      writeFileSync(
        file,
        [
          "compdef() { :; }",
          `_describe() { local -a items; items=("\${(@P)4}"); print -r -- \${items%%:*}; }`,
          "compadd() { shift; print -r -- $*; }",
          `source <(${gatehouseCommand(["completion", "zsh"])})`,
          `words=(gatehouse ${words.map((w) => `'${w}'`).join(" ")}); CURRENT=$#words`,
          "_gatehouse",
        ].join("\n"),
      );
      return runShell(`zsh ${file}`, env);
    };
    expect(run(["keys", ""]).stdout).toBe("create list revoke help\n");
    expect(run(["keys", "create", "--role", ""]).stdout).toBe("admin member\n");
    expect(run(["completion", ""]).stdout).toBe("bash zsh\n");
  });

  test("an unknown shell is a usage error", () => {
    const answer = runCli(["completion", "fish"], env);
    expect(answer.status).toBe(2);
    expect(answer.stderr).toContain("value 'fish' is invalid for argument 'shell'. Allowed choices are bash, zsh.");
  });
});
