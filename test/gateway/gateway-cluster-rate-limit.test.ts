import { createClient } from "@redis/client";
import { request } from "node:http";
import { createGateway, type Gateway } from "../../src/gateway/gateway.js";
import { createLoggers } from "../../src/server/logger.js";
import { startEchoUpstream, startTestGateway, stateFromYaml, type EchoUpstream, type TestGateway } from "../support/gateway.js";
import { startRedis, type TestRedis } from "../support/redis.js";

/**
 * `rate-limit` with `scope: cluster` (docs/gateway.md, "Rate limits across
 * gateways"): one count per route and client across every gateway, kept in a
 * real redis-server started for this file. The check and the count are one
 * atomic step, so no number of gateways and no concurrency admits more than
 * the limit; while Redis does not answer, each gateway counts for itself.
 */
let redis: TestRedis;
let upstream: EchoUpstream;
const gateways: TestGateway[] = [];

const document = (requests: number, scope = "cluster", organizationId = "org-a") =>
  stateFromYaml(
    `version: 1
plugins:
  - name: shared-limit
    type: rate-limit
    config: {requests: ${requests}, window_seconds: 60, scope: ${scope}}
routes:
  - name: limited
    path: /limited/*
    upstream: ${upstream.url}
    plugins: [shared-limit]
`,
    { organizationId, revision: Math.floor(Math.random() * 1e6) },
  );

async function gatewayWithRedis(timeoutMs = 200): Promise<TestGateway> {
  const gateway = await startTestGateway({ redis: { url: redis.url, timeoutMs } });
  gateways.push(gateway);
  return gateway;
}

/** One GET on a fresh connection from `localAddress`: its status and RateLimit headers. */
function hit(
  url: string,
  path: string,
  localAddress = "127.0.0.1",
): Promise<{ status: number; headers: Record<string, string | string[] | undefined> }> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, localAddress, agent: false, headers: { host: "gw.test" } }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
    });
    req.on("error", reject);
    req.end();
  });
}

beforeAll(async () => {
  [redis, upstream] = await Promise.all([startRedis(), startEchoUpstream()]);
});

/** Waits until every gateway counts in Redis: a warm-up request of its own is counted by the others too. */
async function untilShared(list: readonly TestGateway[]): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const client = `127.0.1.${1 + Math.floor(Math.random() * 250)}`;
    const path = `/limited/warm-up-${Math.random()}`;
    const remaining: string[] = [];
    for (const g of list) remaining.push(String((await hit(g.url, path, client)).headers["ratelimit-remaining"]));
    if (remaining.join(",") === list.map((_, i) => String(49 - i)).join(",")) return;
    if (Date.now() > deadline) throw new Error(`the gateways do not share one count: ${remaining.join(",")}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
afterEach(async () => {
  await Promise.all(gateways.splice(0).map((g) => g.close()));
});

async function until(condition: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
afterAll(async () => {
  await Promise.all([redis?.stop(), upstream?.close()]);
});

test("three gateways, one Redis, 200 concurrent requests against a limit of 50: exactly 50 pass, in every round", async () => {
  const three = [await gatewayWithRedis(), await gatewayWithRedis(), await gatewayWithRedis()];
  for (let round = 0; round < 3; round++) {
    const state = document(50);
    for (const g of three) g.gateway.apply(state);
    await untilShared(three);
    const path = `/limited/round-${round}-${Math.random()}`;
    // The client is the same address everywhere: one count.
    const statuses = await Promise.all(Array.from({ length: 200 }, (_, i) => hit(three[i % 3]!.url, path).then((a) => a.status)));
    expect({ round, passed: statuses.filter((s) => s === 200).length, refused: statuses.filter((s) => s === 429).length }).toEqual({
      round,
      passed: 50,
      refused: 150,
    });
    // The next round is a fresh window: a new client address.
    await redis.kill();
    await redis.restart();
  }
});

test("the count is per client and per organisation: another address, or the same route name in another organisation, has its own", async () => {
  const [a, b] = [await gatewayWithRedis(), await gatewayWithRedis()];
  a.gateway.apply(document(2, "cluster", "org-one"));
  b.gateway.apply(document(2, "cluster", "org-two"));
  const results: number[] = [];
  for (const url of [a.url, a.url, a.url, b.url, b.url, b.url]) results.push((await hit(url, "/limited/tenants", "127.0.0.20")).status);
  expect(results).toEqual([200, 200, 429, 200, 200, 429]);
  expect((await hit(a.url, "/limited/tenants", "127.0.0.21")).status).toBe(200);
});

test("answers carry RateLimit headers from the shared count, and a 429 has Retry-After within the window", async () => {
  const [a, b] = [await gatewayWithRedis(), await gatewayWithRedis()];
  const state = document(3);
  a.gateway.apply(state);
  b.gateway.apply(state);
  const first = await hit(a.url, "/limited/headers", "127.0.0.30");
  expect(first.headers["ratelimit-limit"]).toBe("3");
  expect(first.headers["ratelimit-remaining"]).toBe("2");
  const second = await hit(b.url, "/limited/headers", "127.0.0.30");
  expect(second.headers["ratelimit-remaining"]).toBe("1");
  await hit(a.url, "/limited/headers", "127.0.0.30");
  const refused = await hit(b.url, "/limited/headers", "127.0.0.30");
  expect(refused.status).toBe(429);
  const retryAfter = Number(refused.headers["retry-after"]);
  expect(retryAfter).toBeGreaterThanOrEqual(59);
  expect(retryAfter).toBeLessThanOrEqual(60);
  expect(Number(refused.headers["ratelimit-reset"])).toBeLessThanOrEqual(60);
});

test("Redis gone mid-run: no 5xx, each gateway counts for itself and says so in its metrics; Redis back: one count again", async () => {
  const [a, b] = [await gatewayWithRedis(50), await gatewayWithRedis(50)];
  const state = document(4);
  a.gateway.apply(state);
  b.gateway.apply(state);
  expect((await hit(a.url, "/limited/outage", "127.0.0.40")).status).toBe(200);
  await redis.kill();
  const during: number[] = [];
  for (let i = 0; i < 12; i++) during.push((await hit(i % 2 === 0 ? a.url : b.url, "/limited/outage", "127.0.0.41")).status);
  expect(during.filter((s) => s >= 500)).toEqual([]);
  // Each gateway admits the limit on its own: 4 + 4.
  expect(during.filter((s) => s === 200).length).toBe(8);
  const metrics = await (await fetch(`${a.adminUrl}/metrics`)).text();
  expect(Number(/gatehouse_gateway_rate_limit_store_errors_total (\d+)/.exec(metrics)?.[1])).toBeGreaterThan(0);
  await redis.restart();
  // Cluster counting resumes within the probe interval (one request a second asks Redis again).
  const deadline = Date.now() + 10_000;
  let shared = false;
  while (!shared && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 300));
    const client = `127.0.0.${50 + Math.floor(Math.random() * 150)}`;
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await hit(i % 2 === 0 ? a.url : b.url, "/limited/outage", client)).status);
    shared = statuses.join(",") === "200,200,200,200,429,429";
  }
  expect(shared).toBe(true);
});

/** The scripts Redis has run (EVALSHA and EVAL): how many checks reached it. */
async function checksRun(client: { sendCommand(args: string[]): Promise<unknown> }): Promise<number> {
  const info = String(await client.sendCommand(["INFO", "commandstats"]));
  let total = 0;
  for (const match of info.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) total += Number(match[1]);
  return total;
}

async function storeErrors(g: TestGateway): Promise<number> {
  const metrics = await (await fetch(`${g.adminUrl}/metrics`)).text();
  return Number(/gatehouse_gateway_rate_limit_store_errors_total (\d+)/.exec(metrics)?.[1]);
}

/** A request and how long its answer took. */
async function timedHit(url: string, path: string, client: string): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  const { status } = await hit(url, path, client);
  return { status, ms: performance.now() - started };
}

/** Six requests of a fresh client, alternating between two gateways, against a limit of 4: shared when the last two are refused. */
async function untilCountedTogether(a: TestGateway, b: TestGateway, path: string): Promise<boolean> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    const client = `127.0.5.${1 + Math.floor(Math.random() * 250)}`;
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await hit(i % 2 === 0 ? a.url : b.url, path, client)).status);
    if (statuses.join(",") === "200,200,200,200,429,429") return true;
    await new Promise((r) => setTimeout(r, 300));
  }
  return false;
}

test("Redis stopped (SIGSTOP: connected, answering late): every request is answered, none a 5xx; a late check is counted locally after GATEWAY_REDIS_TIMEOUT_MS, three in a row send the next second to the local counts, and each is counted in the metric; resumed (SIGCONT), the count is shared again", async () => {
  const timeoutMs = 400;
  const [a, b] = [await gatewayWithRedis(timeoutMs), await gatewayWithRedis(timeoutMs)];
  const state = document(4);
  a.gateway.apply(state);
  b.gateway.apply(state);
  expect(await untilCountedTogether(a, b, "/limited/before")).toBe(true);
  const observer = createClient({ url: redis.url });
  await observer.connect();
  try {
    const checksBefore = await checksRun(observer);
    const errorsBefore = await storeErrors(a);
    redis.pause();
    let late: { status: number; ms: number }[];
    let local: { status: number; ms: number }[];
    let probe: { status: number; ms: number };
    try {
      // Three checks in a row that Redis answers too late: each waits about the time-out, then is counted locally.
      late = [];
      for (let i = 0; i < 3; i++) late.push(await timedHit(a.url, "/limited/stalled", "127.0.0.60"));
      // The next second every request is counted locally without asking Redis: answered at once, and the
      // local count holds the limit (4 for this client: 3 late ones and 1 more).
      local = [];
      for (let i = 0; i < 3; i++) local.push(await timedHit(a.url, "/limited/stalled", "127.0.0.60"));
      // After the second, one request asks Redis again (late again: it waits the time-out).
      await new Promise((r) => setTimeout(r, 1_300));
      probe = await timedHit(a.url, "/limited/stalled", "127.0.0.61");
    } finally {
      redis.resume();
    }
    expect([...late, ...local, probe].filter((answer) => answer.status >= 500)).toEqual([]);
    expect(late.map((answer) => answer.status)).toEqual([200, 200, 200]);
    for (const { ms } of late) {
      expect(ms).toBeGreaterThanOrEqual(timeoutMs - 20);
      expect(ms).toBeLessThan(timeoutMs + 1_500);
    }
    expect(local.map((answer) => answer.status)).toEqual([200, 429, 429]);
    for (const { ms } of local) expect(ms).toBeLessThan(timeoutMs - 50);
    expect(probe.status).toBe(200);
    expect(probe.ms).toBeGreaterThanOrEqual(timeoutMs - 20);
    // Every request counted locally is in the metric.
    expect((await storeErrors(a)) - errorsBefore).toBe(7);
    // The witness: Redis, resumed, ran the three late checks and the probe, and nothing of the second between.
    await until(async () => (await checksRun(observer)) - checksBefore === 4, "Redis to run the checks that waited");
    await new Promise((r) => setTimeout(r, 200));
    expect((await checksRun(observer)) - checksBefore).toBe(4);
  } finally {
    await observer.close();
  }
  // The late checks ran when Redis got to them: the client's three stalled requests count in Redis too.
  expect(await untilCountedTogether(a, b, "/limited/after")).toBe(true);
  const counted = await hit(b.url, "/limited/stalled", "127.0.0.60");
  expect({ status: counted.status, remaining: counted.headers["ratelimit-remaining"] }).toEqual({ status: 200, remaining: "0" });
  expect((await hit(a.url, "/limited/stalled", "127.0.0.60")).status).toBe(429);
});

test("without GATEWAY_REDIS_URL a cluster limit is counted by each gateway, and that is logged once per configuration", async () => {
  const lonely = await startTestGateway({}, document(1));
  gateways.push(lonely);
  expect((await hit(lonely.url, "/limited/alone")).status).toBe(200);
  expect((await hit(lonely.url, "/limited/alone")).status).toBe(429);
  const notices = lonely.logs.filter((line) => String(line.msg).includes("no GATEWAY_REDIS_URL"));
  expect(notices.length).toBe(1);
});

test("a gateway whose Redis never answers still serves, counting for itself", async () => {
  const unreachable = createGateway({
    host: "127.0.0.1",
    port: 0,
    logger: createLoggers("error").app,
    redis: { url: "redis://127.0.0.1:9/0", timeoutMs: 30 },
  }) as Gateway;
  unreachable.apply(document(2));
  const addresses = await unreachable.listen();
  try {
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await hit(addresses.url, "/limited/never")).status);
    expect(statuses).toEqual([200, 200, 429]);
  } finally {
    await unreachable.close();
  }
});
