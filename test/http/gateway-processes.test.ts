import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCli } from "../support/cli.js";
import { isBuilt, spawnServer, type ServerProcess } from "../support/config-process.js";
import { cookieOf, dashboardAuthRpc, dashboardRpc, ownerPassword, tokenOf, type DashboardTestServer } from "../support/dashboard-server.js";
import { createTestDatabase, testProvider, type TestDatabase } from "../support/database.js";
import { startEchoUpstream, type EchoUpstream } from "../support/gateway.js";
import { freePort, revisionAt, startGatewayProcess, until, type GatewayProcess } from "../support/gateway-process.js";
import { secretsApi } from "../support/secrets-client.js";
import type { TestServer } from "../support/server.js";

/**
 * docs/gateway.md, "Gateways: embedded and standalone" and "What a gateway learns",
 * with every part in a process of its own:
 * control planes (`gatehouse serve`), gateways (`gatehouse gateway`) and the
 * headless operator commands, the test being only their client (echo
 * upstreams, keep-alive load, the APIs). On PostgreSQL two control-plane
 * instances share the database and the gateways are spread over them; on
 * SQLite one control plane serves them all.
 */
const built = isBuilt();
if (!built) throw new Error("dist/ is not built (node scripts/build.mjs)");
const onPostgres = testProvider === "postgresql";
const describePostgres = onPostgres ? describe : describe.skip;

let db: TestDatabase;
let work: string;
let org: string;
let apiKey: string;
let secretKey: string;
let owner: string;
let publicUrl: string;
let a: EchoUpstream;
let b: EchoUpstream;
/** The control planes: two on PostgreSQL, one on SQLite; each restarts on its own port. */
const controlPlanes: { port: number; process: ServerProcess; url: string }[] = [];
const gateways: GatewayProcess[] = [];
/** Every secret value ever stored, to look for in the cache file. */
const secretValues: string[] = [];
/** The number the current configuration tags its requests with (x-revision) and routes by (odd: a, even: b). */
let tag = 0;

const cliEnv = () => ({ DATABASE_URL: db.url, GATEHOUSE_DATA_DIR: db.dataDir });

/** Starts (or restarts, on the same port) control plane i and waits for its /readyz. */
async function startControlPlane(i: number): Promise<void> {
  const port = controlPlanes[i]?.port ?? (await freePort());
  // One PUBLIC_URL for all: the instances are one platform (one session issuer) behind one address.
  const child = await spawnServer({ ...cliEnv(), PORT: String(port), PUBLIC_URL: publicUrl || `http://127.0.0.1:${port}` });
  controlPlanes[i] = { port, process: child, url: child.url };
  await until(async () => (await fetch(`${child.url}/readyz`)).status === 200, `control plane ${i} /readyz`, 30_000);
}

const documentFor = (n: number) => `version: 1
plugins:
  - name: tag
    type: request-headers
    config: {set: {x-revision: "${n}"}}
  - name: signed-in
    type: session-auth
  - name: keyed
    type: api-key-auth
  - name: inject-token
    type: request-headers
    config:
      set:
        authorization: "Bearer \${secret:production/UPSTREAM_TOKEN}"
routes:
  - name: x
    path: /x
    upstream: ${n % 2 === 1 ? a.url : b.url}
    plugins: [tag]
  - name: session
    path: /session/*
    upstream: ${a.url}
    plugins: [signed-in]
  - name: consumer
    path: /consumer/*
    upstream: ${a.url}
    plugins: [keyed]
  - name: secret
    path: /secret/*
    upstream: ${a.url}
    plugins: [inject-token]
`;

/** PUTs the next configuration (tag + 1) through control plane `via`; answers its tag. */
async function nextConfiguration(via = 0): Promise<number> {
  const n = ++tag;
  const response = await fetch(`${controlPlanes[via]?.url}/organization/${org}/config?strict=true`, {
    method: "PUT",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/yaml" },
    body: documentFor(n),
  });
  if (response.status !== 200) throw new Error(`PUT config: ${response.status} ${await response.text()}`);
  return n;
}

async function putSecret(value: string, via = 0): Promise<void> {
  secretValues.push(value);
  const server = { call: (path: string, init: RequestInit & { bearer?: string } = {}) => call(via, path, init) };
  await secretsApi(server as unknown as TestServer, apiKey, org).put("UPSTREAM_TOKEN", "production", value);
}

function call(via: number, path: string, init: RequestInit & { bearer?: string } = {}): Promise<Response> {
  const { bearer, headers, ...rest } = init;
  const merged = new Headers(headers);
  if (bearer !== undefined) merged.set("authorization", `Bearer ${bearer}`);
  return fetch(`${controlPlanes[via]?.url}${path}`, { ...rest, headers: merged });
}

/** A dashboard RPC of the organisation's owner, on control plane `via`. */
async function dashboard<T>(method: string, body: Record<string, unknown>, via = 0): Promise<T> {
  const server = { url: controlPlanes[via]?.url, origin: publicUrl } as DashboardTestServer;
  const response = await dashboardRpc(server, method, { organizationId: org, ...body }, { cookie: owner });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${method}: ${response.status} ${text}`);
  return JSON.parse(text) as T;
}

async function identityRpc<T>(method: string, body: unknown, via = 0): Promise<T> {
  const response = await call(via, `/svc.v1.IdentityService/${method}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    bearer: secretKey,
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${method}: ${response.status} ${text}`);
  return JSON.parse(text) as T;
}

async function newGatewayKey(name: string): Promise<{ key: string; id: string }> {
  const created = await dashboard<{ key: string; gatewayKey: { id: string } }>("CreateGatewayKey", { name });
  return { key: created.key, id: created.gatewayKey.id };
}

/** `gatehouse gateway` on ephemeral ports, following `urls`; resolves once it listens (stopped after the file). */
async function startGateway(options: { id: string; key: string; urls: string[]; cache?: string }): Promise<GatewayProcess> {
  const gateway = await startGatewayProcess({ ...options, cache: options.cache ?? join(work, `${options.id}.json`) });
  gateways.push(gateway);
  return gateway;
}

interface Through {
  status: number;
  /** The upstream's echo of a forwarded request. */
  echo?: { upstream: string; headers: Record<string, string> };
}

/** One request through a gateway (a fresh connection). */
async function through(gateway: GatewayProcess, path: string, headers: Record<string, string> = {}): Promise<Through> {
  const response = await fetch(`${gateway.url}${path}`, { headers });
  const text = await response.text();
  if (response.status !== 200) return { status: response.status };
  return { status: 200, echo: JSON.parse(text) as Through["echo"] };
}

/** The x-revision tag a gateway's /x answers with now. */
async function tagAt(gateway: GatewayProcess): Promise<number> {
  const answer = await through(gateway, "/x");
  return Number(answer.echo?.headers["x-revision"] ?? -1);
}

interface Load {
  ok: number;
  failed: number;
  /** The first failures, as status or error. */
  failures: string[];
  /** Answers whose upstream is not the one their revision routes to: half old, half new. */
  mixed: number;
  tags: Set<number>;
  /** Resolves once `count` more answers came. */
  answered(count: number, timeoutMs?: number): Promise<void>;
  /** Resolves once an answer of revision tag `n` came. */
  saw(n: number, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/** `concurrency` loops of GET /x through the gateway over kept-alive connections, until stopped. */
function startLoad(gateway: GatewayProcess, concurrency = 4): Load {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const target = new URL(gateway.url);
  let running = true;
  const load: Load = {
    ok: 0,
    failed: 0,
    failures: [],
    mixed: 0,
    tags: new Set(),
    async answered(count, timeoutMs = 15_000) {
      const from = load.ok + load.failed;
      await until(() => load.ok + load.failed >= from + count, `${count} answers through ${gateway.id}`, timeoutMs);
    },
    saw: (n, timeoutMs = 15_000) => until(() => load.tags.has(n), `an answer of revision tag ${n} through ${gateway.id}`, timeoutMs),
    async stop() {
      running = false;
      await Promise.all(loops);
      agent.destroy();
    },
  };
  const fail = (what: string) => {
    load.failed++;
    if (load.failures.length < 10) load.failures.push(what);
  };
  const one = () =>
    new Promise<void>((resolve) => {
      const req = request({ host: target.hostname, port: target.port, path: "/x", agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("error", (error) => {
          fail(error.message);
          resolve();
        });
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          if (res.statusCode !== 200) fail(`${res.statusCode} ${text.slice(0, 200)}`);
          else {
            const echo = JSON.parse(text) as { upstream: string; headers: Record<string, string> };
            const n = Number(echo.headers["x-revision"]);
            if ((n % 2 === 1) !== (echo.upstream === "a")) load.mixed++;
            load.tags.add(n);
            load.ok++;
          }
          resolve();
        });
      });
      req.on("error", (error) => {
        fail(error.message);
        resolve();
      });
      req.end();
    });
  const loops = Array.from({ length: concurrency }, async () => {
    while (running) await one();
  });
  return load;
}

const refusal = "the control plane refused this gateway's key";

beforeAll(async () => {
  db = await createTestDatabase();
  work = mkdtempSync(join(tmpdir(), "gatehouse-gateway-processes-"));
  [a, b] = await Promise.all([startEchoUpstream("a"), startEchoUpstream("b")]);
  const init = runCli(["init", "--json"], cliEnv());
  if (init.status !== 0) throw new Error(`init failed: ${init.stderr}`);
  const credentials = JSON.parse(init.stdout) as {
    organization_id: string;
    api_key: string;
    secret_key: string;
    dashboard_setup_url: string;
  };
  org = credentials.organization_id;
  apiKey = credentials.api_key;
  secretKey = credentials.secret_key;
  await startControlPlane(0);
  publicUrl = controlPlanes[0]?.url ?? "";
  // The first instance ran with its own address as PUBLIC_URL already; a second one on PostgreSQL.
  if (onPostgres) await startControlPlane(1);
  const setUp = await dashboardAuthRpc({ url: publicUrl, origin: publicUrl } as DashboardTestServer, "SetUpAccount", {
    token: tokenOf(credentials.dashboard_setup_url),
    email: "owner@example.com",
    display_name: "Olive Owner",
    password: ownerPassword,
  });
  if (setUp.status !== 200) throw new Error(`setup: ${setUp.status} ${await setUp.text()}`);
  owner = cookieOf(setUp);
  await putSecret(`first-${randomBytes(8).toString("hex")}`);
  await nextConfiguration();
}, 120_000);

afterEach(async () => {
  await Promise.all(gateways.splice(0).map((g) => g.stop()));
  // A test that failed half-way may have left a control plane down.
  for (const [i, cp] of controlPlanes.entries()) {
    if (cp.process.child.exitCode !== null || cp.process.child.signalCode !== null) await startControlPlane(i);
  }
}, 60_000);

afterAll(async () => {
  await Promise.all(gateways.splice(0).map((g) => g.stop()));
  await Promise.all(controlPlanes.map((cp) => cp.process.stop()));
  await Promise.all([a?.close(), b?.close()]);
  await db?.drop();
  if (work) rmSync(work, { recursive: true, force: true });
}, 60_000);

/** The index of the control plane the second of two gateways follows: the other instance on PostgreSQL. */
const second = () => (onPostgres ? 1 : 0);

describe("changes reach two gateways", () => {
  test("a revoked session and consumer key, an updated secret and a revoked gateway key reach both; the revoked gateway is cut off, another keeps following", async () => {
    const shared = await newGatewayKey("edge-pair");
    const witnessKey = await newGatewayKey("edge-witness");
    const consumer = await dashboard<{ key: string; consumer: { consumerId: string } }>("CreateConsumerKey", { name: "partner" });
    const link = await identityRpc<{ token: string }>("GenerateMagicLink", { identifier: "gw.processes@example.com" });
    const signed = await identityRpc<{ session: { token: string } }>("VerifyMagicLink", { token: link.token });
    const session = signed.session.token;
    const sid = (JSON.parse(Buffer.from(session.split(".")[1] as string, "base64url").toString()) as { sid: string }).sid;

    const pair = [
      await startGateway({ id: "edge-1", key: shared.key, urls: [controlPlanes[0]?.url ?? ""] }),
      await startGateway({ id: "edge-2", key: shared.key, urls: [controlPlanes[second()]?.url ?? ""] }),
    ];
    const witness = await startGateway({ id: "edge-witness", key: witnessKey.key, urls: [controlPlanes[0]?.url ?? ""] });
    const current = tag;
    for (const g of [...pair, witness]) await until(async () => (await tagAt(g)) === current, `${g.id} at tag ${current}`);

    for (const g of pair) {
      expect((await through(g, "/session/me", { authorization: `Bearer ${session}` })).status).toBe(200);
      expect((await through(g, "/consumer/orders", { "x-api-key": consumer.key })).status).toBe(200);
      expect((await through(g, "/secret/data")).echo?.headers.authorization).toBe(`Bearer ${secretValues.at(-1)}`);
    }

    // Each change made on one instance; on PostgreSQL the second gateway learns of it through the other.
    await identityRpc("RevokeSession", { sessionId: sid });
    for (const g of pair) {
      await until(
        async () => (await through(g, "/session/me", { authorization: `Bearer ${session}` })).status === 401,
        `the revoked session refused by ${g.id}`,
      );
    }
    await dashboard("RevokeConsumerKey", { consumerId: consumer.consumer.consumerId });
    for (const g of pair) {
      await until(
        async () => (await through(g, "/consumer/orders", { "x-api-key": consumer.key })).status === 401,
        `the revoked consumer key refused by ${g.id}`,
      );
    }
    const updated = `second-${randomBytes(8).toString("hex")}`;
    await putSecret(updated, second());
    for (const g of pair) {
      await until(
        async () => (await through(g, "/secret/data")).echo?.headers.authorization === `Bearer ${updated}`,
        `the updated secret at ${g.id}`,
      );
    }

    // Their key revoked: both are cut off from the control plane and keep serving what they have.
    await dashboard("RevokeGatewayKey", { gatewayKeyId: shared.id });
    for (const g of pair) await until(() => g.output().includes(refusal), `${g.id} told its key was refused`);
    const before = tag;
    const after = await nextConfiguration();
    await until(async () => (await tagAt(witness)) === after, `the witness at tag ${after}`);
    for (const g of pair) {
      expect(await tagAt(g)).toBe(before);
      expect((await through(g, "/secret/data")).echo?.headers.authorization).toBe(`Bearer ${updated}`);
    }
    expect(witness.output()).not.toContain(refusal);
  }, 90_000);
});

describePostgres("the headless operator commands on PostgreSQL", () => {
  test("consumers revoke, sessions revoke and keys revoke --kind gateway, run with DATABASE_URL and no server, reach the gateways of both instances", async () => {
    const json = <T>(args: string[]): T => {
      const answer = runCli([...args, "--json"], cliEnv());
      if (answer.status !== 0) throw new Error(`${args.join(" ")}: ${answer.status} ${answer.stderr}`);
      return JSON.parse(answer.stdout) as T;
    };
    const key = json<{ gateway_key: string; id: string }>(["keys", "create", "--org", org, "--kind", "gateway", "--name", "edge-cli"]);
    const pair = [
      await startGateway({ id: "edge-cli-1", key: key.gateway_key, urls: [controlPlanes[0]?.url ?? ""] }),
      await startGateway({ id: "edge-cli-2", key: key.gateway_key, urls: [controlPlanes[1]?.url ?? ""] }),
    ];
    const witness = await startGateway({
      id: "edge-cli-witness",
      key: (await newGatewayKey("edge-cli-witness")).key,
      urls: [controlPlanes[1]?.url ?? ""],
    });
    const current = tag;
    for (const g of [...pair, witness]) await until(async () => (await tagAt(g)) === current, `${g.id} at tag ${current}`);

    // Created by the command while the gateways run: announced, so both accept it.
    const consumer = json<{ consumer_key: string; consumer_id: string }>(["consumers", "create", "--org", org, "--name", "cli-partner"]);
    for (const g of pair) {
      await until(
        async () => (await through(g, "/consumer/orders", { "x-api-key": consumer.consumer_key })).status === 200,
        `${g.id} accepting the consumer key`,
      );
    }
    json(["consumers", "revoke", "--org", org, consumer.consumer_id]);
    for (const g of pair) {
      await until(
        async () => (await through(g, "/consumer/orders", { "x-api-key": consumer.consumer_key })).status === 401,
        `${g.id} refusing the consumer key revoked by the command`,
      );
    }

    // Sessions: one revoked by its id, and every session of another identity with --identity.
    const signIn = async (identifier: string) => {
      const link = await identityRpc<{ token: string }>("GenerateMagicLink", { identifier });
      const signed = await identityRpc<{ identityId: string; session: { token: string } }>("VerifyMagicLink", { token: link.token });
      const token = signed.session.token;
      const { sid } = JSON.parse(Buffer.from(token.split(".")[1] as string, "base64url").toString()) as { sid: string };
      return { identityId: signed.identityId, sessionId: sid, bearer: { authorization: `Bearer ${token}` } };
    };
    const one = await signIn("cli.one@example.com");
    const kept = await signIn("cli.one@example.com");
    const all = [await signIn("cli.all@example.com"), await signIn("cli.all@example.com")];
    for (const g of pair) {
      for (const s of [one, kept, ...all]) expect((await through(g, "/session/me", s.bearer)).status).toBe(200);
    }
    expect(json(["sessions", "revoke", one.sessionId])).toEqual({ session_id: one.sessionId, revoked: true });
    for (const g of pair) {
      await until(
        async () => (await through(g, "/session/me", one.bearer)).status === 401,
        `${g.id} refusing the session revoked by the command`,
      );
      expect((await through(g, "/session/me", kept.bearer)).status).toBe(200);
    }
    const identity = all[0]?.identityId ?? "";
    expect(json(["sessions", "revoke", "--org", org, "--identity", identity])).toEqual({ identity_id: identity, revoked_sessions: 2 });
    for (const g of pair) {
      for (const s of all) {
        await until(
          async () => (await through(g, "/session/me", s.bearer)).status === 401,
          `${g.id} refusing a session of the identity revoked by the command`,
        );
      }
      expect((await through(g, "/session/me", kept.bearer)).status).toBe(200);
    }

    json(["keys", "revoke", "--kind", "gateway", "--org", org, key.id]);
    for (const g of pair) await until(() => g.output().includes(refusal), `${g.id} told its key was refused`);
    const before = tag;
    const after = await nextConfiguration(1);
    // Cut off: the change reaches a gateway with a live key, not them (the instances refuse their key); they serve on.
    await until(async () => (await tagAt(witness)) === after, `the witness at tag ${after}`);
    for (const g of pair) expect(await tagAt(g)).toBe(before);
    expect(witness.output()).not.toContain(refusal);
  }, 90_000);
});

describe("configuration swaps under load", () => {
  test("20 PUTs while 4 keep-alive clients send through a gateway process: no request fails, each is served wholly by one revision", async () => {
    const { key } = await newGatewayKey("edge-swaps");
    const gateway = await startGateway({ id: "edge-swaps", key, urls: controlPlanes.map((cp) => cp.url) });
    const first = tag;
    await until(async () => (await tagAt(gateway)) === first, `the gateway at tag ${first}`);
    const load = startLoad(gateway);
    try {
      await load.saw(first);
      const swapped: number[] = [];
      for (let i = 0; i < 20; i++) {
        // Alternately through each instance on PostgreSQL.
        const n = await nextConfiguration(i % controlPlanes.length);
        swapped.push(n);
        await load.saw(n);
        await load.answered(5);
      }
      expect([...load.tags].filter((n) => swapped.includes(n))).toHaveLength(20);
    } finally {
      await load.stop();
    }
    expect(load.failures).toEqual([]);
    expect(load.failed).toBe(0);
    expect(load.mixed).toBe(0);
    expect(load.ok).toBeGreaterThanOrEqual(100);
    console.log(`swaps: ${load.ok} requests through the gateway process across 20 revisions, 0 failed`);
  }, 90_000);
});

describe("the control plane killed under load", () => {
  test("SIGKILL: no request through the gateway fails; once restarted, a change made there reaches the gateway", async () => {
    const { key } = await newGatewayKey("edge-kill");
    const gateway = await startGateway({ id: "edge-kill", key, urls: [controlPlanes[0]?.url ?? ""] });
    const first = tag;
    await until(async () => (await tagAt(gateway)) === first, `the gateway at tag ${first}`);
    const load = startLoad(gateway);
    try {
      await load.answered(50);
      await controlPlanes[0]?.process.kill();
      // Served while no control plane answers.
      await load.answered(200);
      await startControlPlane(0);
      const n = await nextConfiguration(0);
      await load.saw(n);
      await load.answered(50);
    } finally {
      await load.stop();
    }
    expect(load.failures).toEqual([]);
    expect(load.failed).toBe(0);
    expect(load.mixed).toBe(0);
    expect(await revisionAt(gateway)).toBeGreaterThan(0);
  }, 90_000);

  const testPostgres = onPostgres ? test : test.skip;
  testPostgres(
    "with two control planes in GATEHOUSE_URL: the first killed, the gateway fails over and a change made on the other reaches it",
    async () => {
      const { key } = await newGatewayKey("edge-failover");
      const gateway = await startGateway({ id: "edge-failover", key, urls: controlPlanes.map((cp) => cp.url) });
      const first = tag;
      await until(async () => (await tagAt(gateway)) === first, `the gateway at tag ${first}`);
      const load = startLoad(gateway);
      try {
        await load.answered(50);
        await controlPlanes[0]?.process.kill();
        const n = await nextConfiguration(1);
        await load.saw(n);
        await load.answered(50);
      } finally {
        await load.stop();
      }
      expect(load.failures).toEqual([]);
      expect(load.failed).toBe(0);
      expect(load.mixed).toBe(0);
      await startControlPlane(0);
    },
    90_000,
  );
});

describe("a cold start from the cache file", () => {
  test("with every control plane down, a new gateway process serves the cached revision; the file holds no secret value; it catches up when one is back", async () => {
    const { key } = await newGatewayKey("edge-cold");
    const consumer = await dashboard<{ key: string }>("CreateConsumerKey", { name: "cold partner" });
    const cache = join(work, "cold", "gateway.json");
    const urls = controlPlanes.map((cp) => cp.url);
    const warm = await startGateway({ id: "edge-cold", key, urls, cache });
    const cached = tag;
    await until(async () => (await tagAt(warm)) === cached, `the gateway at tag ${cached}`);
    await until(
      async () => (await through(warm, "/secret/data")).echo?.headers.authorization === `Bearer ${secretValues.at(-1)}`,
      "the secret at the gateway",
    );
    await until(
      async () => (await through(warm, "/consumer/orders", { "x-api-key": consumer.key })).status === 200,
      "the consumer key at the gateway",
    );
    const revision = await revisionAt(warm);
    await warm.stop();

    const text = readFileSync(cache, "utf8");
    const file = JSON.parse(text) as { revision: number; secrets: { name: string; version: number }[]; consumers: unknown[] };
    expect(file.revision).toBe(revision);
    expect(file.secrets).toEqual([expect.objectContaining({ name: "UPSTREAM_TOKEN" })]);
    expect(file.consumers.length).toBeGreaterThan(0);
    // No secret value, no key: only names, versions and hashes.
    for (const value of secretValues) expect(text).not.toContain(value);
    expect(text).not.toContain(key);
    expect(text).not.toContain(consumer.key);
    expect(text).not.toContain(apiKey);

    await Promise.all(controlPlanes.map((cp) => cp.process.kill()));
    const cold = await startGateway({ id: "edge-cold", key, urls, cache });
    await until(async () => (await fetch(`${cold.adminUrl}/readyz`)).status === 200, "the cold gateway's /readyz");
    expect(await revisionAt(cold)).toBe(revision);
    expect(await tagAt(cold)).toBe(cached);
    expect((await through(cold, "/consumer/orders", { "x-api-key": consumer.key })).status).toBe(200);
    // Its secret is not in the file: that route waits for a control plane.
    expect((await through(cold, "/secret/data")).status).toBe(503);

    for (const i of controlPlanes.keys()) await startControlPlane(i);
    await until(
      async () => (await through(cold, "/secret/data")).echo?.headers.authorization === `Bearer ${secretValues.at(-1)}`,
      "the secret once a control plane is back",
    );
    const n = await nextConfiguration(0);
    await until(async () => (await tagAt(cold)) === n, `the cold gateway at tag ${n}`);
  }, 90_000);
});
