import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ConfigService } from "../../gen/svc/v1/config_pb.js";
import { IdentityService } from "../../gen/svc/v1/identity_pb.js";
import { SecretsService } from "../../gen/svc/v1/secrets_pb.js";
import { decodeJwt, goodPassword, newIdentifier, postRest, reasonOf } from "../support/identity-client.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * Identity settings: the defaults of docs/identity.md, "Identity settings", changed only by the operator
 * CLI (`gatehouse settings set`) acting on the data store, never through a key.
 */
const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

function gatehouse(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(root, "bin/gatehouse.js"), ...args], {
      cwd: server.db.dataDir,
      env: { ...process.env, DATABASE_URL: server.db.url, GATEHOUSE_DATA_DIR: server.db.dataDir, LOG_LEVEL: "warn", NODE_OPTIONS: "" },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

const org = () => server.credentials.organization_id;

describe("gatehouse settings", () => {
  test("get --json shows the defaults: passkeys and magic links on, password off, 1 h sessions, 15 min links", async () => {
    const { code, stdout } = await gatehouse(["settings", "get", "--org", org(), "--json"]);
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toEqual({
      passkeys: true,
      magic_links: true,
      password: false,
      // An IP address cannot be a WebAuthn RP ID: the loopback default is localhost.
      rp_id: "localhost",
      origins: ["http://127.0.0.1:8080", "http://localhost:8080"],
      session_ttl_seconds: 3600,
      magic_link_ttl_seconds: 900,
      lockout_threshold: 5,
      lockout_window_seconds: 900,
      ip_limit_per_minute: 300,
      magic_link_limit_per_hour: 10,
      sealing_key_rotation_days: 0,
    });
  });

  test("set changes the settings of the running server at once", async () => {
    const register = () =>
      postRest<{ session: { token: string } }>(
        server,
        "/identity/register/password",
        { identifier: newIdentifier(), password: goodPassword },
        server.credentials.publishable_key,
      );
    expect(reasonOf(await register())).toBe("password_auth_disabled");

    const set = await gatehouse([
      "settings",
      "set",
      "--org",
      org(),
      "password=true",
      "session_ttl_seconds=120",
      // Both origins lie within the RP ID (WebAuthn; test/http/settings-consistency.test.ts).
      "rp_id=example.com",
      "origins=https://auth.example.com,https://app.example.com",
      "--json",
    ]);
    expect(set).toMatchObject({ code: 0 });
    expect(JSON.parse(set.stdout)).toMatchObject({
      password: true,
      session_ttl_seconds: 120,
      rp_id: "example.com",
      origins: ["https://auth.example.com", "https://app.example.com"],
      passkeys: true,
    });
    const answer = await register();
    expect(answer.status).toBe(200);
    const { payload } = decodeJwt(answer.body.session.token);
    expect((payload.exp as number) - (payload.iat as number)).toBe(120);

    // Empty rp_id and origins return to the defaults from PUBLIC_URL.
    const reset = await gatehouse(["settings", "set", "--org", org(), "rp_id=", "origins=", "--json"]);
    expect(JSON.parse(reset.stdout)).toMatchObject({
      rp_id: "localhost",
      origins: ["http://127.0.0.1:8080", "http://localhost:8080"],
      password: true,
    });
  });

  test("every bad assignment is reported at once and nothing changes", async () => {
    const stored = () => server.app.database.client.identitySettings.findUnique({ where: { organizationId: org() } });
    const before = await stored();
    const bad = await gatehouse([
      "settings",
      "set",
      "--org",
      org(),
      "bogus=1",
      "password=maybe",
      "session_ttl_seconds=5",
      "origins=ftp://x",
      "magic_links",
    ]);
    expect(bad.code).toBe(1);
    for (const field of ["bogus", "password", "session_ttl_seconds", "origins[0]", "magic_links"])
      expect(bad.stderr).toContain(`${field}:`);
    expect(await stored()).toEqual(before);
  });

  test("an unknown organisation is refused", async () => {
    const answer = await gatehouse(["settings", "set", "--org", "00000000-0000-4000-8000-000000000000", "password=true"]);
    expect(answer.code).toBe(1);
    expect(answer.stderr).toMatch(/does not exist/);
  });

  test("set without assignments is a usage error", async () => {
    const answer = await gatehouse(["settings", "set", "--org", org()]);
    expect(answer.code).toBe(2);
  });
});

describe("settings are not reachable with any key", () => {
  test("no RPC of a key-reachable service reads or changes identity settings", () => {
    for (const service of [IdentityService, ConfigService, SecretsService]) {
      expect(service.methods.map((m) => m.name).filter((name) => /setting/i.test(name))).toEqual([]);
    }
  });

  test("there is no REST path for them", async () => {
    for (const bearer of [server.credentials.secret_key, server.credentials.api_key]) {
      const answer = await postRest(server, "/identity/settings", { password: true }, bearer);
      expect(answer.status).toBe(404);
    }
  });
});
