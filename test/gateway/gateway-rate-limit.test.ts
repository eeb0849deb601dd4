import type { Consumer } from "../../src/gateway/gateway-state.js";
import { createRateLimiter, type RateDecision } from "../../src/gateway/rate-limit/local-limiter.js";
import {
  newConsumerKey,
  reasonOf,
  send,
  startEchoUpstream,
  startTestGateway,
  stateFromYaml,
  type EchoUpstream,
  type TestGateway,
} from "../support/gateway.js";

/**
 * docs/gateway.md, "The data plane: how the gateway enforces it", rate-limit: at most `requests` in any
 * window of `window_seconds` (sliding), per route, per client (consumer,
 * else identity, else peer address); 429 with Retry-After; RateLimit-Limit,
 * RateLimit-Remaining and RateLimit-Reset on every answer that reached the
 * limit. Time comes from the gateway's clock seam: no sleeping.
 */
let upstream: EchoUpstream;
let now = Date.parse("2026-11-22T10:00:00Z");
const alice = newConsumerKey();
const bob = newConsumerKey();
const consumers = new Map<string, Consumer>([
  [alice.hash, { id: "c-alice", name: "alice" }],
  [bob.hash, { id: "c-bob", name: "bob" }],
]);

const yaml = (options: { requests?: number; window?: number; extraRoute?: string } = {}) => `version: 1
plugins:
  - name: rl
    type: rate-limit
    config: {requests: ${options.requests ?? 3}, window_seconds: ${options.window ?? 10}}
  - name: rl-burst
    type: rate-limit
    config: {requests: 2, window_seconds: 1}
  - name: rl-hour
    type: rate-limit
    config: {requests: 5, window_seconds: 3600}
  - name: keys
    type: api-key-auth
routes:
  - name: limited
    path: /limited
    upstream: ${upstream.url}
    plugins: [rl]
  - name: limited-too
    path: /limited-too
    upstream: ${upstream.url}
    plugins: [rl]
  - name: keyed
    path: /keyed
    upstream: ${upstream.url}
    plugins: [keys, rl]
  - name: two-limits
    path: /two
    upstream: ${upstream.url}
    plugins: [rl-burst, rl-hour]
${options.extraRoute ?? ""}`;

let revision = 1;
const state = (options: Parameters<typeof yaml>[0] = {}) => stateFromYaml(yaml(options), { revision: revision++, consumers });

let gw: TestGateway;
beforeAll(async () => {
  upstream = await startEchoUpstream();
});
beforeEach(async () => {
  now += 24 * 3600_000;
  gw = await startTestGateway({ clock: () => now }, state());
});
afterEach(() => gw.close());
afterAll(() => upstream.close());

const hit = (path: string, headers: Record<string, string> = {}, localAddress?: string) =>
  send(gw.url, { path, headers, ...(localAddress ? { localAddress } : {}) });

describe("the limit", () => {
  test("requests beyond the limit are 429 with Retry-After; every answer carries the RateLimit headers", async () => {
    const seen = upstream.seen.length;
    for (const remaining of ["2", "1", "0"]) {
      const answer = await hit("/limited");
      expect(answer.status).toBe(200);
      expect(answer.headers["ratelimit-limit"]).toBe("3");
      expect(answer.headers["ratelimit-remaining"]).toBe(remaining);
      expect(Number(answer.headers["ratelimit-reset"])).toBeGreaterThan(0);
      expect(Number(answer.headers["ratelimit-reset"])).toBeLessThanOrEqual(10);
    }
    const refused = await hit("/limited");
    expect(refused.status).toBe(429);
    expect(refused.json.code).toBe("resource_exhausted");
    expect(reasonOf(refused)).toBe("rate_limited");
    expect(Number(refused.headers["retry-after"])).toBeGreaterThanOrEqual(1);
    expect(Number(refused.headers["retry-after"])).toBeLessThanOrEqual(11);
    expect(refused.headers["ratelimit-limit"]).toBe("3");
    expect(refused.headers["ratelimit-remaining"]).toBe("0");
    expect(refused.headers["ratelimit-reset"]).toBeDefined();
    expect(upstream.seen.length).toBe(seen + 3);
  });

  test("the window slides: the budget comes back once the counted requests have left it, not before", async () => {
    for (let i = 0; i < 3; i++) expect((await hit("/limited")).status).toBe(200);
    const refused = await hit("/limited");
    const retryAfter = Number(refused.headers["retry-after"]);
    now += (retryAfter - 1) * 1000;
    expect((await hit("/limited")).status).toBe(429);
    now += 1000;
    expect((await hit("/limited")).status).toBe(200);
  });

  test("no window of window_seconds ever admits more than requests, whatever the timing", async () => {
    // Requests every 700 ms for 40 s against 3 per 10 s: record the admitted times.
    const admitted: number[] = [];
    for (let i = 0; i < 60; i++) {
      if ((await hit("/limited")).status === 200) admitted.push(now);
      now += 700;
    }
    for (const start of admitted) {
      expect(admitted.filter((t) => t >= start && t < start + 10_000).length).toBeLessThanOrEqual(3);
    }
    // And the limit is not far stricter than asked: about 3 per 10 s over the run.
    expect(admitted.length).toBeGreaterThanOrEqual(9);
  });
});

describe("who is counted", () => {
  test("each route keeps its own counts, even with the same plugin", async () => {
    for (let i = 0; i < 3; i++) await hit("/limited");
    expect((await hit("/limited")).status).toBe(429);
    expect((await hit("/limited-too")).status).toBe(200);
  });

  test("each peer address has its own budget", async () => {
    for (let i = 0; i < 3; i++) await hit("/limited", {}, "127.0.0.1");
    expect((await hit("/limited", {}, "127.0.0.1")).status).toBe(429);
    expect((await hit("/limited", {}, "127.0.0.2")).status).toBe(200);
    // X-Forwarded-For does not make another client.
    expect((await hit("/limited", { "x-forwarded-for": "198.51.100.1" }, "127.0.0.1")).status).toBe(429);
  });

  test("a consumer authenticated by its key is counted as itself, wherever it comes from", async () => {
    for (let i = 0; i < 3; i++)
      expect((await hit("/keyed", { "x-api-key": alice.key }, i % 2 ? "127.0.0.3" : "127.0.0.4")).status).toBe(200);
    expect((await hit("/keyed", { "x-api-key": alice.key }, "127.0.0.5")).status).toBe(429);
    expect((await hit("/keyed", { "x-api-key": bob.key }, "127.0.0.3")).status).toBe(200);
  });
});

describe("several limits on one route", () => {
  test("the tightest is reported, and a refusal by one does not spend the others", async () => {
    const first = await hit("/two");
    expect(first.headers["ratelimit-limit"]).toBe("2");
    expect(first.headers["ratelimit-remaining"]).toBe("1");
    await hit("/two");
    expect((await hit("/two")).status).toBe(429); // burst limit; the hourly one must not count this
    now += 2_000;
    expect((await hit("/two")).status).toBe(200);
    expect((await hit("/two")).status).toBe(200);
    now += 2_000;
    const fifth = await hit("/two");
    expect(fifth.status).toBe(200);
    // 5 admitted of 5 per hour (the refused one was not counted): the hourly limit is now the tighter one.
    expect(fifth.headers["ratelimit-limit"]).toBe("5");
    expect(fifth.headers["ratelimit-remaining"]).toBe("0");
    const refused = await hit("/two");
    expect(refused.status).toBe(429);
    expect(refused.headers["ratelimit-limit"]).toBe("5");
    expect(Number(refused.headers["retry-after"])).toBeGreaterThan(3000);
  });
});

describe("a new revision", () => {
  test("keeps everyone's counts when the route and its limit kept their identity", async () => {
    for (let i = 0; i < 3; i++) await hit("/limited");
    gw.gateway.apply(state({ extraRoute: `  - name: unrelated\n    path: /unrelated\n    upstream: ${upstream.url}\n` }));
    expect((await hit("/limited")).status).toBe(429);
    // A higher limit applies to the counts so far.
    gw.gateway.apply(state({ requests: 4 }));
    const answer = await hit("/limited");
    expect(answer.status).toBe(200);
    expect(answer.headers["ratelimit-remaining"]).toBe("0");
    expect((await hit("/limited")).status).toBe(429);
  });

  test("starts afresh when the window changes", async () => {
    for (let i = 0; i < 3; i++) await hit("/limited");
    gw.gateway.apply(state({ window: 20 }));
    expect((await hit("/limited")).status).toBe(200);
  });
});

describe("memory", () => {
  test("a limiter remembers at most maxClients clients, and forgets those whose window has passed", () => {
    const limiter = createRateLimiter({ windowSeconds: 1, maxClients: 100 });
    const out: RateDecision = { allowed: false, limit: 0, remaining: 0, resetSeconds: 0, retryAfterSeconds: 0 };
    const start = 1_000_000;
    for (let i = 0; i < 10_000; i++) limiter.take(`a:10.0.${i >> 8}.${i & 255}`, start, 5, out);
    expect(limiter.size).toBeLessThanOrEqual(100);
    limiter.take("a:fresh", start + 5_000, 5, out);
    expect(out.allowed).toBe(true);
    expect(limiter.size).toBeLessThanOrEqual(100);
  });
});
