import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCli } from "../support/cli.js";
import { isBuilt, spawnServer, type ServerProcess } from "../support/config-process.js";
import { createTestDatabase, testProvider, type TestDatabase } from "../support/database.js";
import { freePort, revisionAt, startGatewayProcess, until, type GatewayProcess } from "../support/gateway-process.js";
import { startRedis, type TestRedis } from "../support/redis.js";

/**
 * Upstreams and cluster rate limits through real processes
 * (docs/gateway.md, "Upstreams" and "Rate limits across gateways"): a
 * control plane, three `gatehouse gateway` processes sharing one
 * redis-server, and targets that are processes of their own, so one can be
 * killed with SIGKILL under load. The gateway touches no storage: the file
 * runs once, on SQLite.
 */
if (!isBuilt()) throw new Error("dist/ is not built (node scripts/build.mjs)");
const describeOnce = testProvider === "sqlite" ? describe : describe.skip;

/** A target: a node:http server in a process of its own that answers with its name. */
interface TargetProcess {
  name: string;
  url: string;
  child: ChildProcess;
  kill(): Promise<void>;
}

async function startTargetProcess(name: string): Promise<TargetProcess> {
  const port = await freePort();
  const script = `require("node:http").createServer((req, res) => { req.resume(); req.on("end", () => { res.writeHead(200, {"x-target": ${JSON.stringify(name)}}); res.end(${JSON.stringify(name)}); }); }).listen(${port}, "127.0.0.1", () => console.log("listening"));`;
  const child = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  await new Promise<void>((resolve, reject) => {
    child.stdout?.once("data", () => resolve());
    child.once("exit", (code) => reject(new Error(`target ${name} exited with ${code}`)));
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    name,
    url: `http://127.0.0.1:${port}`,
    child,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
}

let db: TestDatabase;
let work: string;
let redis: TestRedis;
let control: ServerProcess;
let gateways: GatewayProcess[] = [];
const targets: TargetProcess[] = [];
let org: string;
let adminKey: string;

/** Waits until the three gateways count in Redis: a fresh client's three requests, one through each, leave 49, 48, 47. */
async function untilShared(): Promise<void> {
  await until(
    async () => {
      const client = `127.0.2.${1 + Math.floor(Math.random() * 250)}`;
      const remaining: (string | undefined)[] = [];
      for (const g of gateways) remaining.push((await through(g.url, "/limited/warm", client)).remaining);
      return remaining.join(",") === "49,48,47";
    },
    "one count in Redis",
    20_000,
  );
}

const cliEnv = () => ({ DATABASE_URL: db.url, GATEHOUSE_DATA_DIR: db.dataDir });

async function applyDocument(yaml: string): Promise<void> {
  const response = await fetch(`${control.url}/organization/${org}/config?strict=true`, {
    method: "PUT",
    headers: { authorization: `Bearer ${adminKey}`, "content-type": "application/yaml" },
    body: yaml,
  });
  const body = (await response.json()) as { revision: number };
  if (response.status !== 200) throw new Error(`PUT config: ${response.status} ${JSON.stringify(body)}`);
  for (const gateway of gateways)
    await until(async () => (await revisionAt(gateway)) >= body.revision, `${gateway.id} at ${body.revision}`);
}

/** One GET through a gateway on a fresh connection: its status (0 when the connection failed) and the target that answered. */
function through(url: string, path: string, localAddress = "127.0.0.1"): Promise<{ status: number; target?: string; remaining?: string }> {
  const { port } = new URL(url);
  return new Promise((resolve) => {
    const req = request({ host: "127.0.0.1", port, path, localAddress, agent: false, headers: { host: "gw.test" } }, (res) => {
      res.resume();
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          target: res.headers["x-target"] as string | undefined,
          remaining: res.headers["ratelimit-remaining"] as string | undefined,
        }),
      );
    });
    req.on("error", () => resolve({ status: 0 }));
    req.end();
  });
}

beforeAll(async () => {
  if (testProvider !== "sqlite") return;
  db = await createTestDatabase();
  work = mkdtempSync(join(tmpdir(), "gatehouse-upstreams-"));
  redis = await startRedis();
  const init = JSON.parse(runCli(["init", "--json"], cliEnv()).stdout) as { organization_id: string; api_key: string };
  org = init.organization_id;
  adminKey = init.api_key;
  const gatewayKey = (
    JSON.parse(runCli(["keys", "create", "--org", org, "--kind", "gateway", "--name", "edge", "--json"], cliEnv()).stdout) as {
      gateway_key: string;
    }
  ).gateway_key;
  control = await spawnServer({ ...cliEnv(), PORT: String(await freePort()) });
  await until(async () => (await fetch(`${control.url}/readyz`)).status === 200, "the control plane");
  await applyDocument("version: 1\n");
  gateways = await Promise.all(
    ["edge-1", "edge-2", "edge-3"].map((id) =>
      startGatewayProcess({
        id,
        key: gatewayKey,
        urls: [control.url],
        cache: join(work, `${id}.json`),
        env: { GATEWAY_REDIS_URL: redis.url, GATEWAY_REDIS_TIMEOUT_MS: "200" },
      }),
    ),
  );
}, 120_000);

afterAll(async () => {
  await Promise.all(gateways.map((g) => g.stop()));
  await control?.stop();
  await Promise.all(targets.map((t) => t.kill()));
  await redis?.stop();
  await db?.drop();
  if (work) rmSync(work, { recursive: true, force: true });
}, 60_000);

describeOnce("upstreams through gateway processes", () => {
  test("a target killed with SIGKILL under load: with passive health and retries, no idempotent request fails", async () => {
    const [a, b, c, d] = await Promise.all(["a", "b", "c", "d"].map(startTargetProcess));
    targets.push(a!, b!, c!, d!);
    await applyDocument(`version: 1
upstreams:
  - name: with-retries
    targets:
      - {url: ${a!.url}}
      - {url: ${b!.url}}
    health_check:
      passive: {unhealthy_after: 3, recover_after_seconds: 60}
    retries: 1
  - name: without-retries
    targets:
      - {url: ${c!.url}}
      - {url: ${d!.url}}
    health_check:
      passive: {unhealthy_after: 3, recover_after_seconds: 60}
    retries: 0
routes:
  - name: retried
    path: /retried/*
    upstream: with-retries
  - name: once
    path: /once/*
    upstream: without-retries
`);
    const gateway = gateways[0]!;
    /** 400 GETs, 20 at a time; the first target is killed after the first 100. */
    async function load(prefix: string, victim: TargetProcess): Promise<number[]> {
      const statuses: number[] = [];
      for (let sent = 0; sent < 400; sent += 20) {
        if (sent === 100) await victim.kill();
        statuses.push(
          ...(await Promise.all(Array.from({ length: 20 }, (_, i) => through(gateway.url, `${prefix}/${sent + i}`)))).map((r) => r.status),
        );
      }
      return statuses;
    }
    const retried = await load("/retried", a!);
    expect(retried.filter((s) => s !== 200)).toEqual([]);
    const once = await load("/once", c!);
    const failed = once.map((s, i) => [i, s] as const).filter(([, s]) => s !== 200);
    // Without retries only the requests that found the breaker closed can fail: at most unhealthy_after of them
    // (plus those already in flight to the target when it died), and none after the breaker opened.
    expect(failed.length).toBeLessThanOrEqual(3 + 20);
    expect(failed.every(([i]) => i >= 100 && i < 160)).toBe(true);
    expect(once.slice(160).every((s) => s === 200)).toBe(true);
  });

  test("three gateway processes, one Redis: 200 concurrent requests against a cluster limit of 50 admit exactly 50; with Redis killed none is a 5xx; restarted, the count is shared again", async () => {
    const [e] = await Promise.all([startTargetProcess("e")]);
    targets.push(e!);
    await applyDocument(`version: 1
plugins:
  - name: fifty
    type: rate-limit
    config: {requests: 50, window_seconds: 60, scope: cluster}
routes:
  - name: limited
    path: /limited/*
    upstream: ${e!.url}
    plugins: [fifty]
`);
    await untilShared();
    const statuses = (
      await Promise.all(Array.from({ length: 200 }, (_, i) => through(gateways[i % 3]!.url, `/limited/${i}`, "127.0.3.1")))
    ).map((r) => r.status);
    expect({ passed: statuses.filter((s) => s === 200).length, refused: statuses.filter((s) => s === 429).length }).toEqual({
      passed: 50,
      refused: 150,
    });
    await redis.kill();
    const during = (
      await Promise.all(Array.from({ length: 30 }, (_, i) => through(gateways[i % 3]!.url, `/limited/down-${i}`, "127.0.3.2")))
    ).map((r) => r.status);
    expect(during.filter((s) => s >= 500 || s === 0)).toEqual([]);
    await redis.restart();
    await untilShared();
    const shared = (
      await Promise.all(Array.from({ length: 120 }, (_, i) => through(gateways[i % 3]!.url, `/limited/again-${i}`, "127.0.3.3")))
    ).map((r) => r.status);
    expect(shared.filter((s) => s === 200).length).toBe(50);
  });
});
