import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { request } from "node:http";
import { connect, type Socket } from "node:net";
import type { GatewayOptions } from "../../src/gateway/gateway.js";
import { reasonOf, send, startTestGateway, stateFromYaml, type TestGateway } from "../support/gateway.js";
import { startTarget, type TargetMode, type TestTarget } from "../support/targets.js";

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

async function gatewayWith(yaml: string, options: Partial<GatewayOptions> = {}): Promise<TestGateway> {
  gw = await startTestGateway({ clock: () => now, upstreamTimeoutMs: 2_000, ...options }, stateFromYaml(yaml, { revision: revision++ }));
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

/** Things a test opened besides targets and the gateway, closed after it. */
const closers: (() => unknown)[] = [];

afterEach(async () => {
  await gw?.close();
  gw = undefined;
  await Promise.all(targets.map((t) => t.close()));
  targets = [];
  await Promise.all(closers.splice(0).map((close) => close()));
});

/** Debian's interpreter when present. */
const python = existsSync("/usr/bin/python3") ? "/usr/bin/python3" : "python3";

/**
 * A TCP listener that never completes a handshake: it listens with a backlog of 0 and never
 * accepts, and one connection of the test's own fills its accept queue, so Linux drops every
 * further SYN (the connection stays in SYN-SENT, as with a host that does not answer). Node's
 * listeners accept on their own, hence a Python process.
 */
async function neverAccepting(): Promise<string> {
  const child = spawn(
    python,
    [
      "-c",
      "import socket, sys\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen(0)\nprint(s.getsockname()[1], flush=True)\nsys.stdin.read()",
    ],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  closers.push(() => child.kill());
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.once("data", (data: Buffer) => resolve(Number(String(data).trim())));
    child.once("exit", (code) => reject(new Error(`the listener exited with ${code}`)));
  });
  const filler = await new Promise<Socket>((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => resolve(socket));
    socket.once("error", reject);
  });
  closers.push(() => filler.destroy());
  // The queue is full: a second connection does not complete.
  const probe = connect(port, "127.0.0.1");
  const connected = await new Promise<boolean>((resolve) => {
    probe.once("connect", () => resolve(true));
    probe.once("error", () => resolve(false));
    setTimeout(() => resolve(false), 300);
  });
  probe.destroy();
  if (connected) throw new Error("the listener accepted a second connection: its queue is not full");
  return `http://127.0.0.1:${port}`;
}

/**
 * One GET on a fresh connection, read to its end or its cut-off: the status, the body that
 * arrived, and whether the answer was complete.
 */
function getToTheEnd(path: string, requestId: string): Promise<{ status: number; body: string; complete: boolean }> {
  const { port } = new URL(gw!.url);
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = request({ host: "127.0.0.1", port, path, agent: false, headers: { host: "gw.test", "x-request-id": requestId } }, (res) => {
      answered = true;
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        body += chunk;
      });
      res.on("error", () => {});
      res.on("close", () => resolve({ status: res.statusCode ?? 0, body, complete: res.complete }));
    });
    req.on("error", (error) => {
      if (!answered) reject(error);
    });
    req.end();
  });
}

async function metricsOf(g: TestGateway): Promise<string> {
  return (await fetch(`${g.adminUrl}/metrics`)).text();
}

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
  const pool = (a: TestTarget, b: TestTarget, retries = 1, extra = "") => `version: 1
upstreams:
  - name: pool
    retries: ${retries}
    targets:
      - {url: ${a.url}}
      - {url: ${b.url}}
${extra}routes:
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

  test.each([502, 504])(
    "a target's %d to an idempotent GET is tried again on the other target, under the same X-Request-Id",
    async (status) => {
      const [a, b] = await targetsNamed("a", "b");
      const g = await gatewayWith(pool(a!, b!));
      a!.mode = `error${status}` as TargetMode;
      for (let i = 0; i < 6; i++) expect((await get("/x", { "x-request-id": `answer-${status}-${i}` })).status).toBe(200);
      expect(a!.received.length).toBeGreaterThan(0);
      expect(b!.received.length).toBe(6);
      for (const { requestId } of a!.received) expect(b!.received.map((r) => r.requestId)).toContain(requestId);
      expect(Number(/gatehouse_gateway_upstream_retries_total\{route="r"\} (\d+)/.exec(await metricsOf(g))?.[1])).toBe(a!.received.length);
    },
  );

  test("every method the docs list as idempotent (HEAD, OPTIONS, PUT, DELETE) is tried again after a 502; a POST or PATCH is not, even without a body", async () => {
    const [a, b] = await targetsNamed("a", "b");
    await gatewayWith(pool(a!, b!));
    a!.mode = "error502";
    for (const method of ["HEAD", "OPTIONS", "PUT", "DELETE"]) {
      for (let i = 0; i < 2; i++) expect({ method, status: (await get("/x", {}, method)).status }).toEqual({ method, status: 200 });
    }
    const idempotentAtA = a!.received.length;
    expect(idempotentAtA).toBeGreaterThan(0);
    const relayed: number[] = [];
    for (const method of ["POST", "PATCH"]) {
      for (let i = 0; i < 2; i++) relayed.push((await get("/x", { "x-request-id": `${method}-${i}` }, method)).status);
    }
    // Round-robin sends every other request to a: its 502s reach the client, b never sees those requests.
    const notIdempotentAtA = a!.received.slice(idempotentAtA);
    expect(notIdempotentAtA.length).toBeGreaterThan(0);
    expect(relayed.filter((s) => s === 502).length).toBe(notIdempotentAtA.length);
    for (const { requestId } of notIdempotentAtA) expect(b!.received.map((r) => r.requestId)).not.toContain(requestId);
  });

  test("a target that does not answer within response_ms (the 504 case): a GET is tried on the other target; a POST whose body was sent is not, and is 504", async () => {
    const slow = await startTarget("slow", { slowMs: 20_000 });
    targets.push(slow);
    slow.mode = "slow";
    const [b] = await targetsNamed("b");
    const g = await gatewayWith(pool(slow, b!, 1, "    timeouts: {response_ms: 300}\n"), { upstreamTimeoutMs: 20_000 });
    for (let i = 0; i < 4; i++) expect((await get("/x", { "x-request-id": `slow-get-${i}` })).status).toBe(200);
    expect(slow.received.length).toBeGreaterThan(0);
    for (const { requestId } of slow.received) expect(b!.received.map((r) => r.requestId)).toContain(requestId);
    const retriedGets = g.logs.filter((l) => l.msg === "request" && l.tries === 2);
    expect(retriedGets.length).toBe(slow.received.length);
    const getsAtSlow = slow.received.length;
    const posts: { status: number; reason: string | undefined }[] = [];
    for (let i = 0; i < 4; i++) {
      const answer = await get("/x", { "x-request-id": `slow-post-${i}`, "content-type": "text/plain" }, "POST", "payload");
      posts.push({ status: answer.status, reason: reasonOf(answer) });
    }
    const postsAtSlow = slow.received.slice(getsAtSlow);
    expect(postsAtSlow.length).toBeGreaterThan(0);
    expect(posts.filter((p) => p.status === 504 && p.reason === "upstream_timeout").length).toBe(postsAtSlow.length);
    expect(posts.filter((p) => p.status === 200).length).toBe(4 - postsAtSlow.length);
    for (const { requestId } of postsAtSlow) expect(b!.received.map((r) => r.requestId)).not.toContain(requestId);
  });

  test("no retry once part of the answer reached the client: a target that sends its head and some body, then resets, cuts the client's answer off, and the other target never receives the request", async () => {
    const [a, b] = await targetsNamed("a", "b");
    const g = await gatewayWith(pool(a!, b!));
    a!.mode = "partial";
    const answers: { status: number; body: string; complete: boolean }[] = [];
    for (let i = 0; i < 4; i++) answers.push(await getToTheEnd("/x", `partial-${i}`));
    expect(a!.received.length).toBeGreaterThan(0);
    const cut = answers.filter((answer) => !answer.complete);
    expect(cut.length).toBe(a!.received.length);
    for (const answer of cut) expect(answer).toEqual({ status: 200, body: "a partial", complete: false });
    expect(answers.filter((answer) => answer.complete && answer.body === "b").length).toBe(4 - cut.length);
    for (const { requestId } of a!.received) expect(b!.received.map((r) => r.requestId)).not.toContain(requestId);
    expect(b!.received.length).toBe(4 - cut.length);
    // The access log counts one try for each, and the cut-off answers as 502.
    const lines = g.logs.filter((l) => l.msg === "request" && typeof l.reqId === "string" && l.reqId.startsWith("partial-"));
    expect(lines.every((l) => l.tries === 1)).toBe(true);
    expect(lines.filter((l) => l.status === 502).length).toBe(cut.length);
    expect(await metricsOf(g)).not.toMatch(/gatehouse_gateway_upstream_retries_total\{route="r"\}/);
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

  test("an upstream's timeouts.response_ms on its own (no route timeout_ms) bounds the wait for the answer's head: 504 upstream_timeout at about that time", async () => {
    const slow = await startTarget("slow", { slowMs: 20_000 });
    targets.push(slow);
    slow.mode = "slow";
    // GATEWAY_UPSTREAM_TIMEOUT_MS far beyond: the 504 can only come from response_ms.
    await gatewayWith(
      `version: 1
upstreams:
  - name: pool
    retries: 0
    targets:
      - {url: ${slow.url}}
    timeouts: {response_ms: 300}
routes:
  - name: r
    path: /*
    upstream: pool
`,
      { upstreamTimeoutMs: 20_000 },
    );
    const started = performance.now();
    const answer = await get("/x");
    const ms = performance.now() - started;
    expect(answer.status).toBe(504);
    expect(answer.json.code).toBe("deadline_exceeded");
    expect(reasonOf(answer)).toBe("upstream_timeout");
    // About response_ms: a timer of coarse ticks (half a second) would take a second or more.
    expect(ms).toBeGreaterThanOrEqual(280);
    expect(ms).toBeLessThan(300 + 450);
    expect(slow.received.length).toBe(1);
  });

  test("response_ms counts from the end of the request's body: an upload slower than response_ms is the client's time, and its answer is 200", async () => {
    const [a] = await targetsNamed("a");
    const g = await gatewayWith(
      `version: 1
upstreams:
  - name: pool
    retries: 0
    targets:
      - {url: ${a!.url}}
    timeouts: {response_ms: 300}
routes:
  - name: r
    path: /*
    upstream: pool
`,
      { upstreamTimeoutMs: 300 },
    );
    const { hostname, port } = new URL(g.url);
    // Eight chunks 150 ms apart: the body takes about a second to arrive, over three times response_ms.
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        { host: hostname, port, method: "POST", path: "/slow-upload", headers: { "content-type": "text/plain" } },
        (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode ?? 0));
        },
      );
      req.on("error", reject);
      let sent = 0;
      const next = () => {
        if (sent++ === 8) return void req.end();
        req.write("x".repeat(1024));
        setTimeout(next, 150);
      };
      next();
    });
    expect(status).toBe(200);
    expect(a!.received.filter((r) => r.url === "/slow-upload")).toHaveLength(1);
  });

  test("timeouts.connect_ms bounds the connection: a target that never completes the handshake is 504 upstream_timeout after about connect_ms, and a POST to it is tried on another target (it never reached the first)", async () => {
    const silent = await neverAccepting();
    const [b] = await targetsNamed("b");
    // Response timeouts far beyond: a 504 within seconds can only be the connect timeout.
    const g = await gatewayWith(
      `version: 1
upstreams:
  - name: alone
    retries: 0
    targets:
      - {url: ${silent}}
    timeouts: {connect_ms: 300, response_ms: 60000}
  - name: pair
    retries: 1
    targets:
      - {url: ${silent}}
      - {url: ${b!.url}}
    timeouts: {connect_ms: 300, response_ms: 60000}
routes:
  - name: alone
    path: /alone/*
    upstream: alone
  - name: pair
    path: /pair/*
    upstream: pair
`,
      { upstreamTimeoutMs: 60_000 },
    );
    const started = performance.now();
    const answer = await get("/alone/x");
    const ms = performance.now() - started;
    expect(answer.status).toBe(504);
    expect(reasonOf(answer)).toBe("upstream_timeout");
    expect(ms).toBeGreaterThanOrEqual(280);
    expect(ms).toBeLessThan(300 + 450);
    expect(await metricsOf(g)).toMatch(/gatehouse_gateway_upstream_errors_total\{route="alone",kind="timeout"\} 1/);
    for (let i = 0; i < 4; i++) {
      expect((await get("/pair/x", { "x-request-id": `connect-${i}`, "content-type": "text/plain" }, "POST", "payload")).status).toBe(200);
    }
    expect(b!.received.filter((r) => r.method === "POST" && r.body === 7).length).toBe(4);
    const retried = g.logs.filter((l) => l.msg === "request" && l.route === "pair" && l.tries === 2);
    expect(retried.length).toBeGreaterThan(0);
    expect(retried.every((l) => l.target === b!.url)).toBe(true);
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
