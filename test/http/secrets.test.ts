import { createHash, createPublicKey } from "node:crypto";
import { connectCall, createOtherOrganization } from "../support/credentials.js";
import { errorOf, secretsApi } from "../support/secrets-client.js";
import { createManualClock, startTestServer, type TestServer } from "../support/server.js";

/** docs/secrets.md, "The API": the sealed write, list, retrieve, delete cycle and its history and audit. */
let server: TestServer;
let api: ReturnType<typeof secretsApi>;
const manual = createManualClock();

beforeAll(async () => {
  server = await startTestServer({ clock: manual.clock });
  api = secretsApi(server, server.credentials.api_key);
});
afterAll(() => server.close());

describe("the organisation key", () => {
  test("is an RSA-4096 SPKI PEM whose key_id is the hex SHA-256 of its DER, the same on every call", async () => {
    const first = await api.publicKey();
    const second = await api.publicKey();
    expect(second).toEqual(first);
    expect(first.public_key_pem).toMatch(/^-----BEGIN PUBLIC KEY-----\n/);
    const key = createPublicKey(first.public_key_pem);
    expect(key.asymmetricKeyType).toBe("rsa");
    expect(key.asymmetricKeyDetails?.modulusLength).toBe(4096);
    expect(first.key_id).toBe(
      createHash("sha256")
        .update(key.export({ type: "spki", format: "der" }))
        .digest("hex"),
    );
  });

  test("concurrent first calls of a new organisation all get one key", async () => {
    const other = await createOtherOrganization(server);
    const otherApi = secretsApi(server, other.adminKey, other.organizationId);
    const keys = await Promise.all(Array.from({ length: 5 }, () => otherApi.publicKey()));
    expect(new Set(keys.map((k) => k.key_id)).size).toBe(1);
    expect(keys[0]?.key_id).not.toBe((await api.publicKey()).key_id);
  });

  test("is answered on the Connect path too (camelCase JSON)", async () => {
    const response = await connectCall(
      server,
      "/svc.v1.SecretsService/GetPublicKey",
      { organizationId: server.credentials.organization_id },
      server.credentials.api_key,
    );
    expect(response.status).toBe(200);
    const body = (await response.json()) as { publicKeyPem: string; keyId: string };
    expect(body.keyId).toBe((await api.publicKey()).key_id);
  });
});

describe("writing a sealed value", () => {
  test("creates the secret at version 1 and answers its metadata", async () => {
    manual.set(new Date("2026-11-22T10:00:00Z"));
    const written = await api.put("DATABASE_URL", "production", "postgres://u:p@db/app", { tags: ["db", "backend"] });
    expect(written).toEqual({
      name: "DATABASE_URL",
      environment: "production",
      version: 1,
      tags: ["backend", "db"],
      updated_at: "2026-11-22T10:00:00Z",
    });
  });

  test("each update adds exactly one to the version and replaces the tags", async () => {
    manual.advance(60_000);
    const second = await api.put("DATABASE_URL", "production", "postgres://u:p2@db/app", { tags: ["db"] });
    expect(second).toMatchObject({ version: 2, tags: ["db"], updated_at: "2026-11-22T10:01:00Z" });
    const third = await api.put("DATABASE_URL", "production", "postgres://u:p3@db/app");
    expect(third).toMatchObject({ version: 3, tags: [] });
  });

  test("the same name in another environment is another secret", async () => {
    expect((await api.put("DATABASE_URL", "staging", "postgres://staging")).version).toBe(1);
  });

  test.each([
    ["plain, the largest value (446 bytes)", "x".repeat(446), "plain" as const],
    ["hybrid, a small value", "small", "hybrid" as const],
    ["hybrid, the largest value (64 KiB)", "y".repeat(64 * 1024), "hybrid" as const],
    ["plain, an empty value", "", "plain" as const],
    ["plain, multi-byte UTF-8 with a BOM", "\uFEFFgrüße 🌍\n", "plain" as const],
  ])("accepts the %s and gives it back on retrieve", async (_label, value, format) => {
    await api.put("ROUND_TRIP", "formats", value, { format });
    const payload = await api.retrieve("formats", { names: ["ROUND_TRIP"] });
    expect(payload.secrets).toHaveLength(1);
    expect(payload.secrets[0]?.value).toBe(value);
  });
});

describe("listing", () => {
  beforeAll(async () => {
    for (const [name, tags] of [
      ["b_second", ["web", "eu"]],
      ["A_FIRST", ["web"]],
      ["a.lower", ["eu"]],
      ["Z-last", []],
      ["_underscore", ["web", "eu", "x"]],
    ] as const) {
      await api.put(name, "listing", `value of ${name}`, { tags: [...tags] });
    }
    await api.put("not_listed", "elsewhere", "v");
  });

  test("gives metadata only, sorted by name in byte order", async () => {
    const listed = await api.list("listing");
    expect(listed.map((s) => s.name)).toEqual(["A_FIRST", "Z-last", "_underscore", "a.lower", "b_second"]);
    for (const secret of listed) {
      expect(Object.keys(secret).sort()).toEqual(["environment", "name", "tags", "updated_at", "version"]);
      expect(secret.environment).toBe("listing");
    }
    const response = await api.listResponse("?env=listing");
    expect(await response.text()).not.toContain("value of");
  });

  test("with tags, lists only secrets carrying every tag", async () => {
    expect((await api.list("listing", "web")).map((s) => s.name)).toEqual(["A_FIRST", "_underscore", "b_second"]);
    expect((await api.list("listing", "web,eu")).map((s) => s.name)).toEqual(["_underscore", "b_second"]);
    expect((await api.list("listing", "eu,web,x")).map((s) => s.name)).toEqual(["_underscore"]);
    expect(await api.list("listing", "absent")).toEqual([]);
  });

  test("an environment without secrets is an empty list", async () => {
    expect(await api.list("empty-env")).toEqual([]);
  });

  test("env is required", async () => {
    const error = await errorOf(await api.listResponse(""));
    expect(error).toMatchObject({ status: 400, code: "invalid_argument" });
    expect(error.violations).toEqual([{ field: "environment", description: expect.stringContaining("?env=") }]);
  });

  test("the Connect path takes the environment and tags as fields", async () => {
    const response = await connectCall(
      server,
      "/svc.v1.SecretsService/ListSecrets",
      { organizationId: server.credentials.organization_id, environment: "listing", tags: ["eu"] },
      server.credentials.api_key,
    );
    const body = (await response.json()) as { secrets: { name: string; updatedAt: string }[] };
    expect(body.secrets.map((s) => s.name)).toEqual(["_underscore", "a.lower", "b_second"]);
    expect(body.secrets[0]?.updatedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
  });
});

describe("retrieving", () => {
  beforeAll(async () => {
    manual.set(new Date("2026-11-23T08:30:00Z"));
    await api.put("API_KEY", "retrieval", "k-123", { tags: ["web"] });
    await api.put("DB_PASSWORD", "retrieval", "hunter2", { tags: ["db", "web"] });
    await api.put("REDIS_URL", "retrieval", "redis://cache", { tags: ["cache"] });
  });

  test("with neither names nor tags, gives every secret of the environment with its value, sorted by name", async () => {
    const payload = await api.retrieve("retrieval");
    expect(payload).toEqual({
      secrets: [
        { name: "API_KEY", environment: "retrieval", version: 1, tags: ["web"], updated_at: "2026-11-23T08:30:00Z", value: "k-123" },
        {
          name: "DB_PASSWORD",
          environment: "retrieval",
          version: 1,
          tags: ["db", "web"],
          updated_at: "2026-11-23T08:30:00Z",
          value: "hunter2",
        },
        {
          name: "REDIS_URL",
          environment: "retrieval",
          version: 1,
          tags: ["cache"],
          updated_at: "2026-11-23T08:30:00Z",
          value: "redis://cache",
        },
      ],
    });
  });

  test("names select by name; tags select secrets carrying every tag; both together must both hold", async () => {
    const names = (p: { secrets: { name: string }[] }) => p.secrets.map((s) => s.name);
    expect(names(await api.retrieve("retrieval", { names: ["REDIS_URL", "API_KEY"] }))).toEqual(["API_KEY", "REDIS_URL"]);
    expect(names(await api.retrieve("retrieval", { tags: ["web"] }))).toEqual(["API_KEY", "DB_PASSWORD"]);
    expect(names(await api.retrieve("retrieval", { tags: ["web", "db"] }))).toEqual(["DB_PASSWORD"]);
    expect(names(await api.retrieve("retrieval", { names: ["API_KEY", "REDIS_URL"], tags: ["web"] }))).toEqual(["API_KEY"]);
    expect(names(await api.retrieve("empty-env"))).toEqual([]);
  });

  test("the newest version is the one given", async () => {
    await api.put("ROTATED", "retrieval", "old");
    await api.put("ROTATED", "retrieval", "new");
    const payload = await api.retrieve("retrieval", { names: ["ROTATED"] });
    expect(payload.secrets[0]).toMatchObject({ version: 2, value: "new" });
  });

  test("each answer uses a fresh AES key", async () => {
    const body = {
      environment: "retrieval",
      names: ["API_KEY"],
      tags: [],
      public_key_pem: (await import("../support/secrets-client.js")).defaultClient().publicKeyPem,
    };
    const first = (await (await api.retrieveResponse(body)).json()) as { encrypted_key: string; encrypted_secrets: string };
    const second = (await (await api.retrieveResponse(body)).json()) as { encrypted_key: string; encrypted_secrets: string };
    expect(first.encrypted_key).not.toBe(second.encrypted_key);
    expect(first.encrypted_secrets.slice(0, 16)).not.toBe(second.encrypted_secrets.slice(0, 16));
  });

  test("a name that does not exist is a 404 naming it, and nothing is returned", async () => {
    const { defaultClient } = await import("../support/secrets-client.js");
    const response = await api.retrieveResponse({
      environment: "retrieval",
      names: ["API_KEY", "NOPE", "ALSO_MISSING"],
      public_key_pem: defaultClient().publicKeyPem,
    });
    const error = await errorOf(response);
    expect(error).toMatchObject({ status: 404, code: "not_found", reason: "secret_not_found" });
    expect(error.message).toContain('"NOPE"');
    expect(error.message).toContain('"ALSO_MISSING"');
    expect(error.violations.map((v) => v.field)).toEqual(["names[1]", "names[2]"]);
    expect(error.text).not.toContain("k-123");
  });

  test("a name in another environment does not count", async () => {
    const { defaultClient } = await import("../support/secrets-client.js");
    const response = await api.retrieveResponse({
      environment: "staging",
      names: ["API_KEY"],
      public_key_pem: defaultClient().publicKeyPem,
    });
    expect(response.status).toBe(404);
  });
});

describe("deleting", () => {
  test("removes the secret and every version; a later write starts again at version 1", async () => {
    await api.put("DOOMED", "deletion", "one");
    await api.put("DOOMED", "deletion", "two");
    const response = await api.deleteResponse("DOOMED", "deletion");
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({});
    expect(await api.list("deletion")).toEqual([]);
    const versions = await connectCall(
      server,
      "/svc.v1.SecretsService/ListSecretVersions",
      { organizationId: server.credentials.organization_id, environment: "deletion", name: "DOOMED" },
      server.credentials.api_key,
    );
    expect(versions.status).toBe(404);
    const rows = await server.app.database.client.secretVersion.count({ where: { secret: { name: "DOOMED" } } });
    expect(rows).toBe(0);
    expect((await api.put("DOOMED", "deletion", "three")).version).toBe(1);
  });

  test("an unknown secret is a 404; env is required", async () => {
    const missing = await errorOf(await api.deleteResponse("NEVER_WAS", "deletion"));
    expect(missing).toMatchObject({ status: 404, code: "not_found", reason: "secret_not_found" });
    const noEnv = await errorOf(await server.call(`${api.base}/DOOMED`, { method: "DELETE", bearer: server.credentials.api_key }));
    expect(noEnv).toMatchObject({ status: 400, code: "invalid_argument" });
    expect(noEnv.violations.map((v) => v.field)).toEqual(["environment"]);
  });

  test("only the named environment's secret goes", async () => {
    await api.put("SHARED", "deletion", "a");
    await api.put("SHARED", "deletion-two", "b");
    expect((await api.deleteResponse("SHARED", "deletion")).status).toBe(200);
    expect((await api.list("deletion-two")).map((s) => s.name)).toEqual(["SHARED"]);
  });
});

describe("history", () => {
  test("keeps at least the last 10 versions (metadata only, newest first, at most 14) and serves the newest", async () => {
    for (let i = 1; i <= 16; i++) await api.put("HISTORIC", "history", `value ${i}`, { tags: [`v${i}`] });
    const response = await connectCall(
      server,
      "/svc.v1.SecretsService/ListSecretVersions",
      { organizationId: server.credentials.organization_id, environment: "history", name: "HISTORIC" },
      server.credentials.api_key,
    );
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(text).not.toContain("value ");
    const body = JSON.parse(text) as { versions: { version: number; tags: string[]; actor: string; createdAt: string }[] };
    // Pruned at version 15 to the last 10; version 16 came after.
    expect(body.versions.map((v) => v.version)).toEqual([16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6]);
    expect(body.versions[0]?.tags).toEqual(["v16"]);
    expect(body.versions[0]?.actor).toMatch(/gk_/);
    expect((await api.retrieve("history")).secrets[0]).toMatchObject({ version: 16, value: "value 16" });
    const rows = await server.app.database.client.secretVersion.count({ where: { secret: { name: "HISTORIC" } } });
    expect(rows).toBe(11);
  });
});

describe("the audit trail", () => {
  test("records every write, delete and retrieve with actor, time, environment and names, never values", async () => {
    manual.set(new Date("2026-12-01T00:00:00Z"));
    await api.put("AUDITED", "audit", "audited-value-1");
    manual.advance(1000);
    await api.retrieve("audit", { names: ["AUDITED"] });
    manual.advance(1000);
    await api.deleteResponse("AUDITED", "audit");
    const response = await connectCall(
      server,
      "/svc.v1.SecretsService/ListSecretAuditEvents",
      { organizationId: server.credentials.organization_id, pageSize: 3 },
      server.credentials.api_key,
    );
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(text).not.toContain("audited-value");
    const body = JSON.parse(text) as {
      events: { action: string; actor: string; environment: string; names: string[]; createdAt: string }[];
      nextPageToken: string;
    };
    expect(body.events.map(({ action, environment, names, createdAt }) => ({ action, environment, names, createdAt }))).toEqual([
      { action: "delete", environment: "audit", names: ["AUDITED"], createdAt: "2026-12-01T00:00:02Z" },
      { action: "retrieve", environment: "audit", names: ["AUDITED"], createdAt: "2026-12-01T00:00:01Z" },
      { action: "write", environment: "audit", names: ["AUDITED"], createdAt: "2026-12-01T00:00:00Z" },
    ]);
    expect(body.events[0]?.actor).toMatch(/\(gk_/);
    expect(body.nextPageToken).not.toBe("");

    const next = await connectCall(
      server,
      "/svc.v1.SecretsService/ListSecretAuditEvents",
      { organizationId: server.credentials.organization_id, pageSize: 100, pageToken: body.nextPageToken },
      server.credentials.api_key,
    );
    const rest = (await next.json()) as { events: { createdAt: string }[]; nextPageToken?: string };
    expect(rest.events.length).toBeGreaterThan(10);
    expect(rest.events.every((e) => e.createdAt < "2026-12-01T00:00:00Z")).toBe(true);
  });

  test("a page size beyond 100 or a forged page token is refused", async () => {
    const call = (body: object) =>
      connectCall(
        server,
        "/svc.v1.SecretsService/ListSecretAuditEvents",
        { organizationId: server.credentials.organization_id, ...body },
        server.credentials.api_key,
      );
    const error = await errorOf(await call({ pageSize: 101, pageToken: "garbage" }));
    expect(error).toMatchObject({ status: 400, code: "invalid_argument" });
    expect(error.violations.map((v) => v.field)).toEqual(["page_size", "page_token"]);
  });
});
