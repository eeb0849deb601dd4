import { request } from "node:http";
import { send, startTestGateway, stateFromYaml, type TestGateway } from "../support/gateway.js";
import { startTarget, type TestTarget } from "../support/targets.js";

/**
 * Upstreams at the gateway (docs/gateway.md, "Upstreams, health and
 * retries"): balancing over several targets, active and passive health,
 * retries, timeouts and body limits, with real node:http targets that count
 * what they receive and fail on cue. Time for the circuit breaker comes from
 * the gateway's clock seam.
 */
let targets: TestTarget[] = [];
let gw: TestGateway | undefined;
let now = Date.parse("2026-11-27T10:00:00Z");
let revision = 1;

async function targetsNamed(...names: string[]): Promise<TestTarget[]> {
  const started = await Promise.all(names.map((name) => startTarget(name)));
  targets.push(...started);
  return started;
}

async function gatewayWith(yaml: string): Promise<TestGateway> {
  gw = await startTestGateway({ clock: () => now, upstreamTimeoutMs: 2_000 }, stateFromYaml(yaml, { revision: revision++ }));
  return gw;
}

function apply(yaml: string): void {
  gw!.gateway.apply(stateFromYaml(yaml, { revision: revision++ }));
}

const get = (path: string, headers: Record<string, string> = {}, method = "GET", body?: string) =>
  send(gw!.url, { method, path, headers: { host: "gw.test", ...headers }, ...(body !== undefined ? { body } : {}) });

const counts = (list: TestTarget[]) => list.map((t) => t.received.length);

async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

afterEach(async () => {
  await gw?.close();
  gw = undefined;
  await Promise.all(targets.map((t) => t.close()));
  targets = [];
});

describe("balancing", () => {
  test("round-robin spreads requests in proportion to weight: over 1,000 requests to 100/100/200, each within 10% of its share", async () => {
    const [a, b, c] = await targetsNamed("a", "b", "c");
    await gatewayWith(`version: 1
upstreams:
  - name: plants
    targets:
      - {url: ${a!.url}, weight: 100}
      - {url: ${b!.url}}
      - {url: ${c!.url}, weight: 200}
routes:
  - name: plants
    path: /plants/*
    upstream: plants
`);
    for (let i = 0; i < 1_000; i += 50) await Promise.all(Array.from({ length: 50 }, () => get("/plants/x")));
    const [na, nb, nc] = counts([a!, b!, c!]);
    for (const [n, share] of [
      [na!, 250],
      [nb!, 250],
      [nc!, 500],
    ] as const)
      expect(Math.abs(n - share)).toBeLessThanOrEqual(share * 0.1);
    expect(na! + nb! + nc!).toBe(1_000);
  });

  test("a weight of 0 drains a target: it gets no request", async () => {
    const [a, b] = await targetsNamed("a", "b");
    await gatewayWith(`version: 1
upstreams:
  - name: pool
    targets:
      - {url: ${a!.url}, weight: 0}
      - {url: ${b!.url}}
routes:
  - name: r
    path: /*
    upstream: pool
`);
    for (let i = 0; i < 20; i++) expect((await get("/x")).status).toBe(200);
    expect(counts([a!, b!])).toEqual([0, 20]);
  });

  test("least-requests prefers the target with fewest requests in flight", async () => {
    const [slow, fast] = await targetsNamed("slow", "fast");
    slow!.mode = "slow";
    await gatewayWith(`version: 1
upstreams:
  - name: pool
    balancer: least-requests
    targets:
      - {url: ${slow!.url}}
      - {url: ${fast!.url}}
routes:
  - name: r
    path: /*
    upstream: pool
`);
    // Requests until one settles on the slow target and stays there; then every request goes to the idle one.
    const pending: Promise<unknown>[] = [];
    await until(() => {
      if (slow!.inFlight === 0) pending.push(get("/first"));
      return slow!.inFlight > 0;
    }, "a request held by the slow target");
    const before = fast!.received.length;
    for (let i = 0; i < 20; i++) await get("/x");
    expect(fast!.received.length - before).toBe(20);
    await Promise.all(pending);
  });

  test("consistent-hash sends one key to one target, spreads keys, and moves only the keys of a target that leaves", async () => {
    const [a, b, c] = await targetsNamed("a", "b", "c");
    const document = (cWeight: number) => `version: 1
upstreams:
  - name: pool
    balancer: consistent-hash
    hash_on: header:x-user
    targets:
      - {url: ${a!.url}}
      - {url: ${b!.url}}
      - {url: ${c!.url}, weight: ${cWeight}}
routes:
  - name: r
    path: /*
    upstream: pool
`;
    await gatewayWith(document(100));
    const placeOf = async (user: string) => (await get("/x", { "x-user": user })).headers["x-target"] as string;
    const users = Array.from({ length: 60 }, (_, i) => `user-${i}`);
    const before = new Map<string, string>();
    for (const user of users) before.set(user, await placeOf(user));
    for (const user of users.slice(0, 10)) expect(await placeOf(user)).toBe(before.get(user));
    expect(new Set(before.values())).toEqual(new Set(["a", "b", "c"]));
    apply(document(0)); // c drained
    for (const user of users) {
      const after = await placeOf(user);
      if (before.get(user) === "c") expect(after).not.toBe("c");
      else expect({ user, after }).toEqual({ user, after: before.get(user) });
    }
  });

  test("consistent-hash on a cookie, and on the client's address when the key is absent", async () => {
    const [a, b] = await targetsNamed("a", "b");
    await gatewayWith(`version: 1
upstreams:
  - name: pool
    balancer: consistent-hash
    hash_on: cookie:session
    targets:
      - {url: ${a!.url}}
      - {url: ${b!.url}}
routes:
  - name: r
    path: /*
    upstream: pool
`);
    const places = new Set<string>();
    for (let i = 0; i < 10; i++) places.add((await get("/x", { cookie: "theme=dark; session=abc123" })).headers["x-target"] as string);
    expect(places.size).toBe(1);
    const anonymous = new Set<string>();
    for (let i = 0; i < 10; i++) anonymous.add((await get("/x")).headers["x-target"] as string);
    expect(anonymous.size).toBe(1);
  });
});

describe("health", () => {
  test("active checks take a failing target out after unhealthy_after probes and bring it back after healthy_after; the gauge and the log follow", async () => {
    const [a, b] = await targetsNamed("a", "b");
    const g = await gatewayWith(`version: 1
upstreams:
  - name: pool
    targets:
      - {url: ${a!.url}}
      - {url: ${b!.url}}
    health_check:
      active: {path: /healthz, interval_seconds: 1, timeout_ms: 200, healthy_after: 1, unhealthy_after: 1}
routes:
  - name: r
    path: /*
    upstream: pool
`);
    a!.health = 500;
    const gauge = async (target: TestTarget) => {
      const text = await (await fetch(`${g.adminUrl}/metrics`)).text();
      return Number(
        new RegExp(`gatehouse_gateway_upstream_target_healthy\\{upstream="pool",target="${target.url}"\\} (\\d)`).exec(text)?.[1],
      );
    };
    await until(async () => (await gauge(a!)) === 0, "target a out of rotation");
    const before = a!.received.length;
    for (let i = 0; i < 10; i++) expect((await get("/x")).status).toBe(200);
    expect(a!.received.length).toBe(before);
    expect(g.logs.some((l) => l.msg === "upstream target unhealthy" && l.target === a!.url)).toBe(true);
    a!.health = 200;
    await until(async () => (await gauge(a!)) === 1, "target a back");
    for (let i = 0; i < 10; i++) await get("/x");
    expect(a!.received.length).toBeGreaterThan(before);
  });

  test("passive checks: unhealthy_after failures take a target out; after recover_after_seconds one request is let through, and its success brings it back", async () => {
    const [a, b] = await targetsNamed("a", "b");
    await gatewayWith(`version: 1
upstreams:
  - name: pool
    retries: 0
    targets:
      - {url: ${a!.url}}
      - {url: ${b!.url}}
    health_check:
      passive: {unhealthy_after: 2, recover_after_seconds: 30}
routes:
  - name: r
    path: /*
    upstream: pool
`);
    a!.mode = "error500";
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await get("/x")).status);
    // Round-robin alternates: a fails twice, then is out.
    expect(statuses.filter((s) => s === 500).length).toBe(2);
    expect(a!.received.length).toBe(2);
    for (let i = 0; i < 10; i++) expect((await get("/x")).status).toBe(200);
    expect(a!.received.length).toBe(2);
    a!.mode = "ok";
    now += 31_000;
    for (let i = 0; i < 10; i++) expect((await get("/x")).status).toBe(200);
    expect(a!.received.length).toBeGreaterThanOrEqual(5);
  });

  test("a failed trial request opens the breaker again for another recovery period", async () => {
    const [a, b] = await targetsNamed("a", "b");
    await gatewayWith(`version: 1
upstreams:
  - name: pool
    retries: 0
    targets:
      - {url: ${a!.url}}
      - {url: ${b!.url}}
    health_check:
      passive: {unhealthy_after: 1, recover_after_seconds: 10}
routes:
  - name: r
    path: /*
    upstream: pool
`);
    a!.mode = "reset";
    for (let i = 0; i < 4; i++) await get("/x");
    expect(a!.received.length).toBe(1);
    now += 11_000;
    for (let i = 0; i < 6; i++) await get("/x");
    expect(a!.received.length).toBe(2); // one trial, failed
    for (let i = 0; i < 6; i++) await get("/x");
    expect(a!.received.length).toBe(2);
  });

  test("no healthy target: 503 with Retry-After, and no target is contacted", async () => {
    const [a] = await targetsNamed("a");
    await gatewayWith(`version: 1
upstreams:
  - name: pool
    retries: 0
    targets:
      - {url: ${a!.url}}
    health_check:
      passive: {unhealthy_after: 1, recover_after_seconds: 30}
routes:
  - name: r
    path: /*
    upstream: pool
`);
    a!.mode = "reset";
    expect((await get("/x")).status).toBe(502);
    const answer = await get("/x");
    expect(answer.status).toBe(503);
    expect(answer.headers["retry-after"]).toBe("30");
    expect(answer.json.code).toBe("unavailable");
    expect(a!.received.length).toBe(1);
  });

  test("health survives a configuration change for targets that stay; a new target starts healthy", async () => {
    const [a, b, c] = await targetsNamed("a", "b", "c");
    const document = (extra: string) => `version: 1
upstreams:
  - name: pool
    retries: 0
    targets:
      - {url: ${a!.url}}
      - {url: ${b!.url}}
${extra}    health_check:
      passive: {unhealthy_after: 1, recover_after_seconds: 60}
routes:
  - name: r
    path: /*
    upstream: pool
`;
    await gatewayWith(document(""));
    a!.mode = "reset";
    for (let i = 0; i < 4; i++) await get("/x");
    expect(a!.received.length).toBe(1);
    apply(document(`      - {url: ${c!.url}}\n`));
    for (let i = 0; i < 10; i++) expect((await get("/y")).status).toBe(200);
    expect(a!.received.length).toBe(1);
    expect(c!.received.length).toBeGreaterThan(0);
  });
});

describe("retries", () => {
  const pool = (a: TestTarget, b: TestTarget, retries = 1) => `version: 1
upstreams:
  - name: pool
    retries: ${retries}
    targets:
      - {url: ${a.url}}
      - {url: ${b.url}}
routes:
  - name: r
    path: /*
    upstream: pool
`;

  test("an idempotent request whose target resets is tried on another target, with the same X-Request-Id; retries are counted", async () => {
    const [a, b] = await targetsNamed("a", "b");
    const g = await gatewayWith(pool(a!, b!));
    a!.mode = "reset";
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await get("/x", { "x-request-id": `retry-${i}` })).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200]);
    expect(a!.received.length).toBeGreaterThan(0);
    const metrics = await (await fetch(`${g.adminUrl}/metrics`)).text();
    expect(Number(/gatehouse_gateway_upstream_retries_total\{route="r"\} (\d+)/.exec(metrics)?.[1])).toBe(a!.received.length);
    const retried = g.logs.filter((l) => l.msg === "request" && l.tries === 2);
    expect(retried.length).toBe(a!.received.length);
    expect(retried.every((l) => l.target === b!.url)).toBe(true);
    // Each retried request reached both targets under its one id.
    for (const { requestId } of a!.received) expect(b!.received.map((r) => r.requestId)).toContain(requestId);
  });

  test("a POST whose body was sent is never retried: the target reset it, the client gets 502", async () => {
    const [a, b] = await targetsNamed("a", "b");
    await gatewayWith(pool(a!, b!));
    a!.mode = "reset";
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await get("/x", { "content-type": "text/plain" }, "POST", "payload")).status);
    expect(statuses.filter((s) => s === 502).length).toBe(a!.received.length);
    expect(b!.received.filter((r) => r.method === "POST").length).toBe(statuses.filter((s) => s === 200).length);
  });

  test("a request that never reached its target (connection refused) is retried elsewhere, a POST too", async () => {
    const [a, b] = await targetsNamed("a", "b");
    await gatewayWith(pool(a!, b!));
    await a!.stop();
    for (let i = 0; i < 4; i++) expect((await get("/x", { "content-type": "text/plain" }, "POST", "payload")).status).toBe(200);
    expect(b!.received.length).toBe(4);
  });

  test("a target's 502, 503 or 504 to an idempotent request is tried again elsewhere; a 500 is relayed", async () => {
    const [a, b] = await targetsNamed("a", "b");
    await gatewayWith(pool(a!, b!));
    a!.mode = "error503";
    for (let i = 0; i < 4; i++) expect((await get("/x")).status).toBe(200);
    a!.mode = "error500";
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await get("/x")).status);
    expect(statuses).toContain(500);
  });

  test("retries: 0 makes one try only", async () => {
    const [a, b] = await targetsNamed("a", "b");
    await gatewayWith(pool(a!, b!, 0));
    a!.mode = "reset";
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await get("/x")).status);
    expect(statuses.filter((s) => s === 502).length).toBe(2);
  });
});

describe("timeouts and body limits", () => {
  test("a route's timeout_ms overrides its upstream's response timeout: 504", async () => {
    const [a] = await targetsNamed("a");
    a!.mode = "slow";
    await gatewayWith(`version: 1
upstreams:
  - name: pool
    retries: 0
    targets:
      - {url: ${a!.url}}
    timeouts: {response_ms: 10000}
routes:
  - name: quick
    path: /quick/*
    upstream: pool
    timeout_ms: 200
`);
    const started = Date.now();
    const answer = await get("/quick/x");
    expect(answer.status).toBe(504);
    expect(answer.json.code).toBe("deadline_exceeded");
    expect(Date.now() - started).toBeLessThan(1_500);
  });

  test("a body over max_body_bytes is 413 before the target sees any of it when Content-Length says so", async () => {
    const [a] = await targetsNamed("a");
    await gatewayWith(`version: 1
routes:
  - name: small
    path: /*
    upstream: ${a!.url}
    max_body_bytes: 1000
`);
    const answer = await get("/upload", { "content-type": "application/octet-stream" }, "POST", "x".repeat(2_000));
    expect(answer.status).toBe(413);
    expect(answer.json.code).toBe("resource_exhausted");
    expect(a!.received.length).toBe(0);
    expect((await get("/upload", { "content-type": "application/octet-stream" }, "POST", "x".repeat(1_000))).status).toBe(200);
  });

  test("a chunked body that grows past max_body_bytes is cut off: 413, and the target never sees a complete body", async () => {
    const [a] = await targetsNamed("a");
    await gatewayWith(`version: 1
routes:
  - name: small
    path: /*
    upstream: ${a!.url}
    max_body_bytes: 10000
`);
    const status = await new Promise<number>((resolve, reject) => {
      const { port } = new URL(gw!.url);
      const req = request(
        { host: "127.0.0.1", port, method: "POST", path: "/stream", headers: { host: "gw.test", "transfer-encoding": "chunked" } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", reject);
      let sent = 0;
      const pump = (): void => {
        if (sent >= 50_000) {
          req.end();
          return;
        }
        sent += 4_000;
        req.write("y".repeat(4_000));
        setTimeout(pump, 5);
      };
      pump();
    });
    expect(status).toBe(413);
    await new Promise((r) => setTimeout(r, 200));
    expect(a!.received.filter((r) => r.url === "/stream")).toEqual([]);
  });
});
