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
