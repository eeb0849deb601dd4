import { isBuilt } from "../support/config-process.js";
import { startServe, type ServeProcess } from "../support/cli.js";
import { createTestDatabase, type TestDatabase } from "../support/database.js";

/**
 * `gatehouse serve` is the whole platform: the platform API, the sample plant
 * API and an embedded gateway for the first organisation, which follows the
 * platform like any other gateway. The README's gateway walk-through, as
 * processes: the plant API behind the gateway with session-auth and a rate
 * limit, a user signed in with a magic link, and a change of the limit seen by
 * the very next request.
 */
let db: TestDatabase;
let serve: ServeProcess;
let org: string;
let apiKey: string;
let secretKey: string;
let gatewayUrl: string;
let adminUrl: string;
let sampleUrl: string;

beforeAll(async () => {
  if (!isBuilt()) throw new Error("dist/ is not built (npm test builds it)");
  db = await createTestDatabase();
  serve = await startServe({ DATABASE_URL: db.url, GATEHOUSE_DATA_DIR: db.dataDir });
  const out = serve.output();
  org = /organization_id\s+(\S+)/.exec(out)?.[1] ?? "";
  apiKey = /api_key \(admin\)\s+(\S+)/.exec(out)?.[1] ?? "";
  secretKey = /secret_key\s+(\S+)/.exec(out)?.[1] ?? "";
  sampleUrl = /plant API\s+(\S+)/.exec(out)?.[1] ?? "";
  const gateway = /gateway\s+(http\S+) \(admin (http\S+)\)/.exec(out);
  gatewayUrl = gateway?.[1] ?? "";
  adminUrl = gateway?.[2] ?? "";
}, 90_000);

afterAll(async () => {
  await serve?.stop();
  await db?.drop();
});

const rpc = async (path: string, bearer: string, body: unknown) => {
  const response = await fetch(`${serve.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${bearer}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  expect(response.status).toBe(200);
  return (await response.json()) as Record<string, unknown>;
};

const document = (requests: number) => `version: 1
plugins:
  - name: signed-in
    type: session-auth
  - name: limit
    type: rate-limit
    config: {requests: ${requests}, window_seconds: 60}
routes:
  - name: create-plant
    path: /plants
    methods: [POST]
    upstream: ${sampleUrl}
    plugins: [signed-in, limit]
`;

async function putConfig(yaml: string): Promise<number> {
  const response = await fetch(`${serve.url}/organization/${org}/config`, {
    method: "PUT",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/yaml" },
    body: yaml,
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { revision: number }).revision;
}

async function adminRevision(): Promise<number> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("gatehouse_gateway_config_revision "));
  return line ? Number(line.split(" ")[1]) : -1;
}

async function until(condition: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const plant = (id: number, token?: string) =>
  fetch(`${gatewayUrl}/plants`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify({ id, name: `plant ${id}` }),
  });

describe("the embedded gateway of gatehouse serve", () => {
  test("starts with serve on its own port and is ready once it follows the platform", async () => {
    expect(gatewayUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    await until(async () => (await fetch(`${adminUrl}/readyz`)).status === 200, "the gateway's /readyz");
    const unrouted = await fetch(`${gatewayUrl}/plants`, { method: "POST" });
    expect(unrouted.status).toBe(404);
    expect(((await unrouted.json()) as { code: string }).code).toBe("not_found");
  });

  test("puts the plant API behind session-auth and a rate limit; a limit change applies to the very next request", async () => {
    const revision = await putConfig(document(2));
    await until(async () => (await adminRevision()) >= revision, `revision ${revision} at the gateway`);

    const anonymous = await plant(1);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("www-authenticate")).toMatch(/^Bearer/);

    const { token: linkToken } = await rpc("/svc.v1.IdentityService/GenerateMagicLink", secretKey, { identifier: "walk@example.com" });
    const verified = await rpc("/svc.v1.IdentityService/VerifyMagicLink", secretKey, { token: linkToken });
    const session = (verified.session as { token: string }).token;

    const first = await plant(1, session);
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ name: "plant 1" });
    expect(first.headers.get("ratelimit-limit")).toBe("2");
    expect((await plant(2, session)).status).toBe(200);
    const limited = await plant(3, session);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);

    // Raise the limit: the first request after the PUT's answer that the gateway routes by the new
    // revision passes (the change reaches it through its stream, in milliseconds).
    const started = performance.now();
    const raised = await putConfig(document(100));
    await until(async () => (await adminRevision()) >= raised, `revision ${raised} at the gateway`, 5_000);
    const propagationMs = performance.now() - started;
    const next = await plant(3, session);
    expect(next.status).toBe(200);
    expect(next.headers.get("ratelimit-limit")).toBe("100");
    console.log(`embedded gateway: PUT answered to revision routed in ${propagationMs.toFixed(1)} ms`);
  });
});
