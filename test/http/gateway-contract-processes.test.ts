import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WebSocket, WebSocketServer } from "ws";
import { runCli } from "../support/cli.js";
import { isBuilt, spawnServer, type ServerProcess } from "../support/config-process.js";
import { createTestDatabase, type TestDatabase } from "../support/database.js";
import { echoOf, reasonOf, send, startEchoUpstream, type Answer, type EchoUpstream } from "../support/gateway.js";
import { signInWithMagicLink } from "../support/gateway-control.js";
import { freePort, revisionAt, startGatewayProcess, until, type GatewayProcess } from "../support/gateway-process.js";
import { secretsApi } from "../support/secrets-client.js";
import type { TestServer } from "../support/server.js";

/**
 * docs/gateway.md, "The data plane: how the gateway enforces it", behaviour by behaviour, with every part
 * a process of its own as in production: the control plane (`gatehouse
 * serve`), one gateway (`gatehouse gateway`), the operator commands; the
 * configuration goes in through the API, sessions come from IdentityService,
 * consumer keys from the CLI, the secret from the Secrets API. The upstreams
 * are real HTTP servers in the test. The same behaviours, with more edge
 * cases each, are tested against the data plane directly in test/gateway/.
 */
if (!isBuilt()) throw new Error("dist/ is not built (node scripts/build.mjs)");

let db: TestDatabase;
let work: string;
let control: ServerProcess;
let gateway: GatewayProcess;
let a: EchoUpstream;
let b: EchoUpstream;
let c: EchoUpstream;
let slow: Server;
let slowUrl: string;
let sink: { server: Server; url: string; received: number; onReading?: () => void };
let sockets: { http: Server; wss: WebSocketServer; url: string };
let closedUrl: string;
let org: string;
let adminKey: string;
let memberKey: string;
let secretKey: string;
let consumer: { consumer_key: string; consumer_id: string };
let session: { token: string; identityId: string; sessionId: string };

const cliEnv = () => ({ DATABASE_URL: db.url, GATEHOUSE_DATA_DIR: db.dataDir });

function cli<T>(args: string[]): T {
  const answer = runCli([...args, "--json"], cliEnv());
  if (answer.status !== 0) throw new Error(`gatehouse ${args.join(" ")}: ${answer.status} ${answer.stderr}`);
  return JSON.parse(answer.stdout) as T;
}

const api = (path: string, init: RequestInit & { bearer?: string } = {}) => {
  const { bearer, headers, ...rest } = init;
  const merged = new Headers(headers);
  if (bearer !== undefined) merged.set("authorization", `Bearer ${bearer}`);
  return fetch(`${control.url}${path}`, { ...rest, headers: merged });
};

/** A new identity signed in with a magic link, through the control plane's IdentityService. */
const signIn = () => signInWithMagicLink({ call: api } as unknown as TestServer, secretKey);

/** PUTs a configuration (strict) with the given API key; the answer's status and body. */
async function putConfig(yaml: string, bearer = adminKey): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await api(`/organization/${org}/config?strict=true`, {
    method: "PUT",
    bearer,
    headers: { "content-type": "application/yaml" },
    body: yaml,
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** PUTs a configuration and waits until the gateway serves its revision. */
async function apply(yaml: string): Promise<void> {
  const put = await putConfig(yaml);
  if (put.status !== 200) throw new Error(`PUT config: ${put.status} ${JSON.stringify(put.body)}`);
  const revision = Number(put.body.revision);
  await until(async () => (await revisionAt(gateway)) >= revision, `the gateway at revision ${revision}`);
}

const through = (path: string, headers: Record<string, string | string[]> = {}, method = "GET", body?: string) =>
  send(gateway.url, { method, path, headers: { host: "unknown.example.com", ...headers }, ...(body !== undefined ? { body } : {}) });

/** A gateway answer of its own: the Connect error body of the platform, with its code and reason. */
function expectGatewayError(answer: Answer, status: number, code: string, reason?: string): void {
  expect(answer.status).toBe(status);
  expect(answer.headers["content-type"]).toMatch(/^application\/json/);
  expect(answer.json.code).toBe(code);
  expect(typeof answer.json.message).toBe("string");
  if (reason !== undefined) expect(reasonOf(answer)).toBe(reason);
}

const documentOf = () => `version: 1
domains:
  - name: api.example.com
  - name: catch.example.com
plugins:
  - name: cors-app
    type: cors
    config:
      allowed_origins: [https://app.example.com]
      allowed_methods: [GET, POST]
      allowed_headers: [authorization, content-type]
  - name: signed-in
    type: session-auth
    config: {forward_identity_header: x-identity-id}
  - name: maybe-signed-in
    type: session-auth
    config: {required: false, forward_identity_header: x-identity-id}
  - name: keys
    type: api-key-auth
  - name: keys-hidden
    type: api-key-auth
    config: {header: x-consumer-key, hide_credentials: true}
  - name: three-a-minute
    type: rate-limit
    config: {requests: 3, window_seconds: 60}
  - name: upstream-headers
    type: request-headers
    config:
      set: {x-env: production, authorization: "Bearer \${secret:production/UPSTREAM_TOKEN}"}
      add: {x-tag: gateway}
      remove: [x-debug]
rules:
  - name: block-bots
    match: {header: user-agent, regex: "bot", ignore_case: true}
    action: deny
  - name: block-admin
    match: {path_prefix: /ruled/admin}
    action: deny
  - name: deny-loopback
    match: {ip_cidr: 127.0.0.0/8}
    action: deny
  - name: allow-internal-net
    match: {ip_cidr: 10.0.0.0/8}
    action: allow
  - name: allow-loopback
    match: {ip_cidr: 127.0.0.0/8}
    action: allow
routes:
  - name: exact-plants
    path: /plants
    methods: [GET]
    upstream: ${a.url}
  - name: plants-prefix
    path: /plants/*
    upstream: ${b.url}
  - name: plants-deep
    path: /plants/rare/*
    upstream: ${c.url}
  - name: api-plants
    domains: [api.example.com]
    path: /plants/*
    upstream: ${c.url}
  - name: zeta-catch-all
    domains: [catch.example.com]
    path: /*
    upstream: ${a.url}
  - name: alpha-catch-all
    domains: [catch.example.com]
    path: /*
    upstream: ${b.url}
  - name: orders
    path: /orders
    methods: [POST, PUT]
    upstream: ${a.url}
  - name: based
    path: /based/*
    upstream: ${c.url}/base/
  - name: ruled
    path: /ruled/*
    upstream: ${a.url}
    rules: [block-bots, block-admin]
  - name: ip-denied
    path: /ip-denied/*
    upstream: ${a.url}
    rules: [deny-loopback]
  - name: ip-allowed
    path: /ip-allowed/*
    upstream: ${a.url}
    rules: [allow-internal-net, allow-loopback]
  - name: allow-none-matches
    path: /allow-none/*
    upstream: ${a.url}
    rules: [allow-internal-net]
  - name: cors
    path: /cors/*
    methods: [GET, POST]
    upstream: ${a.url}
    plugins: [cors-app, signed-in]
    rules: [block-bots]
  - name: session
    path: /session/*
    upstream: ${a.url}
    plugins: [signed-in]
  - name: optional-session
    path: /optional/*
    upstream: ${a.url}
    plugins: [maybe-signed-in]
  - name: keyed
    path: /keyed/*
    upstream: ${a.url}
    plugins: [keys]
  - name: keyed-hidden
    path: /keyed-hidden/*
    upstream: ${a.url}
    plugins: [keys-hidden]
  - name: limited
    path: /limited/*
    upstream: ${a.url}
    plugins: [keys, three-a-minute]
  - name: ordered
    path: /ordered/*
    upstream: ${a.url}
    rules: [block-bots]
    plugins: [keys, three-a-minute]
  - name: rewritten
    path: /rewritten/*
    upstream: ${a.url}
    plugins: [upstream-headers]
  - name: refused
    path: /refused/*
    upstream: ${closedUrl}
  - name: slow
    path: /slow/*
    upstream: ${slowUrl}
  - name: upload
    path: /upload/*
    upstream: ${sink.url}
  - name: sockets
    path: /ws/*
    upstream: ${sockets.url}
    plugins: [keys]
`;

beforeAll(async () => {
  db = await createTestDatabase();
  work = mkdtempSync(join(tmpdir(), "gatehouse-gateway-contract-"));
  [a, b, c] = await Promise.all([startEchoUpstream("a"), startEchoUpstream("b"), startEchoUpstream("c")]);
  // An upstream that answers after 3 s (the gateway runs with a 1 s upstream timeout), one that is closed,
  // one that counts what it reads of a body (reading slowly at first), and a WebSocket echo.
  slow = createServer((_req, res) => {
    setTimeout(() => res.end("late"), 3_000).unref();
  });
  await new Promise<void>((resolve) => slow.listen(0, "127.0.0.1", resolve));
  slowUrl = `http://127.0.0.1:${(slow.address() as AddressInfo).port}`;
  closedUrl = `http://127.0.0.1:${await freePort()}`;
  const sinkServer = createServer((req, res) => {
    req.pause();
    setTimeout(() => {
      sink.onReading?.();
      req.on("data", (chunk: Buffer) => {
        sink.received += chunk.length;
      });
      req.on("end", () => res.end(JSON.stringify({ received: sink.received })));
      req.resume();
    }, 500);
  });
  await new Promise<void>((resolve) => sinkServer.listen(0, "127.0.0.1", resolve));
  sink = { server: sinkServer, url: `http://127.0.0.1:${(sinkServer.address() as AddressInfo).port}`, received: 0 };
  const http = createServer();
  const wss = new WebSocketServer({ server: http });
  wss.on("connection", (socket, req) => {
    socket.send(`hello ${req.url} ${req.headers["x-api-key"] === undefined ? "" : "with key"}`);
    socket.on("message", (data) => socket.send(`echo ${String(data)}`));
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  sockets = { http, wss, url: `http://127.0.0.1:${(http.address() as AddressInfo).port}` };

  const init = cli<{ organization_id: string; api_key: string; secret_key: string }>(["init"]);
  org = init.organization_id;
  adminKey = init.api_key;
  secretKey = init.secret_key;
  memberKey = cli<{ api_key: string }>(["keys", "create", "--org", org, "--role", "member", "--name", "member"]).api_key;
  consumer = cli(["consumers", "create", "--org", org, "--name", "partner"]);
  const gatewayKey = cli<{ gateway_key: string }>(["keys", "create", "--org", org, "--kind", "gateway", "--name", "edge"]).gateway_key;
  control = await spawnServer({ ...cliEnv(), PORT: String(await freePort()) });
  await until(async () => (await fetch(`${control.url}/readyz`)).status === 200, "the control plane's /readyz", 30_000);
  const server = { call: (path: string, init: RequestInit & { bearer?: string } = {}) => api(path, init) } as unknown as TestServer;
  await secretsApi(server, adminKey, org).put("UPSTREAM_TOKEN", "production", "upstream-token-1");
  const put = await putConfig(documentOf());
  if (put.status !== 200) throw new Error(`PUT config: ${put.status} ${JSON.stringify(put.body)}`);
  gateway = await startGatewayProcess({
    id: "edge-contract",
    key: gatewayKey,
    urls: [control.url],
    cache: join(work, "cache.json"),
    env: { GATEWAY_UPSTREAM_TIMEOUT_MS: "1000" },
  });
  await until(async () => (await fetch(`${gateway.adminUrl}/readyz`)).status === 200, "the gateway's /readyz");
  session = await signIn();
}, 120_000);

afterAll(async () => {
  await gateway?.stop();
  await control?.stop();
  await Promise.all([a?.close(), b?.close(), c?.close()]);
  for (const server of [slow, sink?.server, sockets?.http]) {
    server?.closeAllConnections();
    server?.close();
  }
  sockets?.wss.close();
  await db?.drop();
  if (work) rmSync(work, { recursive: true, force: true });
}, 60_000);

describe("routing", () => {
  test("exact beats prefix, a longer prefix a shorter one, and /a/* matches /a itself", async () => {
    expect(echoOf(await through("/plants")).upstream).toBe("a");
    expect(echoOf(await through("/plants/ficus")).upstream).toBe("b");
    expect(echoOf(await through("/plants/rare/orchid")).upstream).toBe("c");
    expect(echoOf(await through("/plants/rare")).upstream).toBe("c");
    // Not a path under /plants/, and no route of this host matches it.
    expectGatewayError(await through("/plantsx"), 404, "not_found", "route_not_found");
    expect(a.seen.concat(b.seen, c.seen).some((echo) => echo.url === "/plantsx")).toBe(false);
  });

  test("between equal paths, a route with domains wins for its Host (port ignored), then the name in byte order", async () => {
    expect(echoOf(await through("/plants/ficus", { host: "api.example.com:8443" })).upstream).toBe("c");
    expect(echoOf(await through("/plants/ficus", { host: "elsewhere.example.com" })).upstream).toBe("b");
    // alpha-catch-all (b) before zeta-catch-all (a); only for their domain.
    expect(echoOf(await through("/anything", { host: "catch.example.com" })).upstream).toBe("b");
    expectGatewayError(await through("/anything"), 404, "not_found");
  });

  test("a method the path's routes do not serve is 405 with Allow; no path match is 404", async () => {
    const answer = await through("/orders");
    expectGatewayError(answer, 405, "unimplemented", "method_not_allowed");
    expect(answer.headers.allow).toBe("POST, PUT");
    expect(echoOf(await through("/orders", {}, "POST", "{}")).method).toBe("POST");
    expectGatewayError(await through("/nothing/here"), 404, "not_found", "route_not_found");
  });

  test("the upstream URL's path is a prefix; the path and query go on as sent; X-Forwarded-* and X-Request-Id are set", async () => {
    const echo = echoOf(await through("/based/x/y?q=1&r=%20", { "x-request-id": "req-123" }));
    expect(echo.url).toBe("/base/based/x/y?q=1&r=%20");
    expect(echo.headers["x-forwarded-for"]).toBe("127.0.0.1");
    expect(echo.headers["x-forwarded-proto"]).toBe("http");
    expect(echo.headers["x-forwarded-host"]).toBe("unknown.example.com");
    expect(echo.headers["x-request-id"]).toBe("req-123");
    // Generated when the client sent none (or one that is not a safe token): unique per request.
    const generated = [echoOf(await through("/plants")), echoOf(await through("/plants", { "x-request-id": "bad id!" }))];
    for (const one of generated) expect(one.headers["x-request-id"]).toMatch(/^[A-Za-z0-9._:-]{8,64}$/);
    expect(generated[0]?.headers["x-request-id"]).not.toBe(generated[1]?.headers["x-request-id"]);
  });

  test("hop-by-hop headers are dropped, with those the Connection header names", async () => {
    const echo = echoOf(
      await through("/plants", {
        connection: "keep-alive, x-hop",
        "x-hop": "1",
        "keep-alive": "timeout=5",
        te: "trailers",
        "proxy-authorization": "Basic eDp5",
        "x-kept": "yes",
      }),
    );
    for (const name of ["x-hop", "keep-alive", "te", "proxy-authorization"]) expect(echo.headers[name]).toBeUndefined();
    expect(echo.headers["x-kept"]).toBe("yes");
  });

  test("an upstream that refuses is 502, one that does not answer in time is 504, as the platform's error bodies", async () => {
    expectGatewayError(await through("/refused/x"), 502, "unavailable");
    const started = performance.now();
    expectGatewayError(await through("/slow/x"), 504, "deadline_exceeded");
    expect(performance.now() - started).toBeLessThan(2_900);
  });

  test("a 32 MiB upload streams through the process with bounded memory", async () => {
    const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${gateway.child.pid}/status`, "utf8"))?.[1]) * 1024;
    const before = rss();
    let peak = before;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rss());
    }, 10);
    const size = 32 * 1024 * 1024;
    const target = new URL(gateway.url);
    let sent = 0;
    let sentBeforeReading = -1;
    sink.received = 0;
    sink.onReading = () => {
      sentBeforeReading = sent;
    };
    const answer = await new Promise<string>((resolve, reject) => {
      const req = request(
        { host: target.hostname, port: target.port, method: "POST", path: "/upload/big", headers: { "content-length": size } },
        (res) => {
          let text = "";
          res.on("data", (chunk: Buffer) => {
            text += chunk.toString();
          });
          res.on("end", () => resolve(text));
        },
      );
      req.on("error", reject);
      const chunk = Buffer.alloc(64 * 1024, 7);
      const pump = () => {
        while (sent < size) {
          sent += chunk.length;
          if (!req.write(chunk)) return void req.once("drain", pump);
        }
        req.end();
      };
      pump();
    });
    clearInterval(sampler);
    expect(JSON.parse(answer)).toEqual({ received: size });
    // The upstream read nothing for its first 500 ms: a gateway that buffered bodies would have taken all 32 MiB
    // from the client meanwhile; one that streams with backpressure stops reading once the sockets' buffers are full.
    expect(sentBeforeReading).toBeGreaterThan(0);
    expect(sentBeforeReading).toBeLessThan(size * 0.75);
    // RSS is reported, not asserted: freed 64 KiB chunks stay in the allocator's arenas for a while, so the
    // resident size of a process says little of what it holds (test/gateway/gateway-streaming.test.ts measures
    // the heap after collections, in-process).
    console.log(
      `gateway process, 32 MiB upload to an upstream that waits 500 ms: ${(sentBeforeReading / 2 ** 20).toFixed(1)} MiB sent before it read; RSS ${Math.round(before / 2 ** 20)} MiB before, peak +${Math.round((peak - before) / 2 ** 20)} MiB`,
    );
  }, 30_000);

  test("a WebSocket upgrade is tunnelled after the route's credentials, both ways", async () => {
    const url = `${gateway.url.replace(/^http/, "ws")}/ws/chat`;
    const refused = await new Promise<number>((resolve) => {
      const socket = new WebSocket(url);
      socket.on("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
      socket.on("open", () => resolve(101));
    });
    expect(refused).toBe(401);
    const socket = new WebSocket(url, { headers: { "x-api-key": consumer.consumer_key } });
    const messages: string[] = [];
    socket.on("message", (data) => messages.push(String(data)));
    await new Promise<void>((resolve, reject) => {
      socket.on("open", () => resolve());
      socket.on("error", reject);
    });
    socket.send("ping");
    await until(() => messages.length >= 2, "two WebSocket messages", 5_000);
    expect(messages).toEqual(["hello /ws/chat with key", "echo ping"]);
    socket.close();
  });
});

describe("rules", () => {
  test("a matching deny rule is 403 naming it: header regex (ignore_case) and path prefix", async () => {
    const bot = await through("/ruled/x", { "user-agent": "FriendlyBot/1.0" });
    expectGatewayError(bot, 403, "permission_denied", "denied_by_rule");
    expect(String(bot.json.message)).toContain("block-bots");
    expect(String((await through("/ruled/admin/users")).json.message)).toContain("block-admin");
    expect(echoOf(await through("/ruled/x", { "user-agent": "curl/8" })).url).toBe("/ruled/x");
  });

  test("ip_cidr matches the TCP peer address, never X-Forwarded-For; allow rules refuse when none matches", async () => {
    expectGatewayError(await through("/ip-denied/x", { "x-forwarded-for": "10.1.2.3" }), 403, "permission_denied", "denied_by_rule");
    expect(echoOf(await through("/ip-allowed/x")).url).toBe("/ip-allowed/x");
    expectGatewayError(await through("/allow-none/x", { "x-forwarded-for": "10.1.2.3" }), 403, "permission_denied");
  });
});

describe("plugins, in their documented order", () => {
  test("cors: a preflight is answered 204 by the gateway before rules and credentials; answers carry the CORS headers", async () => {
    const preflight = await through(
      "/cors/x",
      { origin: "https://app.example.com", "access-control-request-method": "POST", "user-agent": "bot" },
      "OPTIONS",
    );
    expect(preflight.status).toBe(204);
    expect(preflight.text).toBe("");
    expect(preflight.headers["access-control-allow-origin"]).toBe("https://app.example.com");
    expect(String(preflight.headers["access-control-allow-methods"])).toContain("POST");
    const seen = a.seen.length;
    const answered = await through("/cors/x", { origin: "https://app.example.com", authorization: `Bearer ${session.token}` });
    expect(answered.status).toBe(200);
    expect(answered.headers["access-control-allow-origin"]).toBe("https://app.example.com");
    expect(a.seen.length).toBe(seen + 1);
    // Not a preflight: the rules and the session run.
    expectGatewayError(await through("/cors/x", { origin: "https://app.example.com" }), 401, "unauthenticated");
  });

  test("session-auth: missing or invalid is 401 with WWW-Authenticate: Bearer; a live session passes with its identity", async () => {
    const missing = await through("/session/me");
    expectGatewayError(missing, 401, "unauthenticated");
    expect(missing.headers["www-authenticate"]).toMatch(/^Bearer/);
    const forged = `${session.token.slice(0, -4)}AAAA`;
    expectGatewayError(await through("/session/me", { authorization: `Bearer ${forged}` }), 401, "unauthenticated");
    expectGatewayError(await through("/session/me", { authorization: "Bearer not-a-token" }), 401, "unauthenticated");
    const echo = echoOf(await through("/session/me", { authorization: `Bearer ${session.token}`, "x-identity-id": "spoofed" }));
    expect(echo.headers["x-identity-id"]).toBe(session.identityId);
  });

  test("session-auth required: false lets a request without a token through (its identity header removed), not an invalid one", async () => {
    const anonymous = echoOf(await through("/optional/x", { "x-identity-id": "spoofed" }));
    expect(anonymous.headers["x-identity-id"]).toBeUndefined();
    expectGatewayError(await through("/optional/x", { authorization: "Bearer not-a-token" }), 401, "unauthenticated");
  });

  test("api-key-auth: a live consumer key passes; missing or unknown is 401; hide_credentials removes it", async () => {
    expectGatewayError(await through("/keyed/x"), 401, "unauthenticated", "consumer_key_missing");
    expectGatewayError(await through("/keyed/x", { "x-api-key": `ck_${"A".repeat(43)}` }), 401, "unauthenticated", "consumer_key_invalid");
    expect(echoOf(await through("/keyed/x", { "x-api-key": consumer.consumer_key })).headers["x-api-key"]).toBe(consumer.consumer_key);
    const hidden = echoOf(await through("/keyed-hidden/x", { "x-consumer-key": consumer.consumer_key }));
    expect(hidden.headers["x-consumer-key"]).toBeUndefined();
  });

  test("rate-limit: at most `requests` per window per client, RateLimit-* on every answer, 429 with Retry-After beyond", async () => {
    const other = cli<{ consumer_key: string }>(["consumers", "create", "--org", org, "--name", "limited-partner"]);
    await until(async () => (await through("/limited/x", { "x-api-key": other.consumer_key })).status === 200, "the new consumer");
    const answers: Answer[] = [];
    for (let i = 0; i < 3; i++) answers.push(await through("/limited/x", { "x-api-key": consumer.consumer_key }));
    expect(answers.map((x) => x.status)).toEqual([200, 200, 200]);
    expect(answers.map((x) => x.headers["ratelimit-remaining"])).toEqual(["2", "1", "0"]);
    expect(answers[0]?.headers["ratelimit-limit"]).toBe("3");
    const refused = await through("/limited/x", { "x-api-key": consumer.consumer_key });
    expectGatewayError(refused, 429, "resource_exhausted");
    expect(Number(refused.headers["retry-after"])).toBeGreaterThan(0);
    expect(refused.headers["ratelimit-remaining"]).toBe("0");
    // Another consumer is another client: it has one left of its own three.
    expect((await through("/limited/x", { "x-api-key": other.consumer_key })).headers["ratelimit-remaining"]).toBe("1");
  });

  test("order: rules before credentials, credentials before the rate limit (a refused request is not counted)", async () => {
    expectGatewayError(await through("/ordered/x", { "user-agent": "bot" }), 403, "permission_denied");
    for (let i = 0; i < 5; i++) expectGatewayError(await through("/ordered/x"), 401, "unauthenticated");
    const first = await through("/ordered/x", { "x-api-key": consumer.consumer_key });
    expect(first.status).toBe(200);
    expect(first.headers["ratelimit-remaining"]).toBe("2");
  });

  test("request-headers: set (with the secret resolved), add and remove on the upstream request", async () => {
    const echo = echoOf(await through("/rewritten/x", { "x-debug": "1", "x-env": "from-client" }));
    expect(echo.headers.authorization).toBe("Bearer upstream-token-1");
    expect(echo.headers["x-env"]).toBe("production");
    expect(echo.headers["x-tag"]).toBe("gateway");
    expect(echo.headers["x-debug"]).toBeUndefined();
  });
});

describe("secret references, at the control plane", () => {
  test("a PUT referencing a missing secret is 400 with its line, and the gateway keeps the revision it has", async () => {
    const revision = await revisionAt(gateway);
    const yaml = documentOf().replace("production/UPSTREAM_TOKEN", "production/NOT_THERE");
    const put = await putConfig(yaml);
    expect(put.status).toBe(400);
    expect(JSON.stringify(put.body)).toContain("NOT_THERE");
    expect(JSON.stringify(put.body)).toMatch(/"line":\d+/);
    expect(await revisionAt(gateway)).toBe(revision);
  });

  test("deleting a referenced secret is 409 naming the plugin; a member may not add or change a reference", async () => {
    const deleted = await api(`/organization/${org}/secrets/UPSTREAM_TOKEN?env=production`, { method: "DELETE", bearer: adminKey });
    expect(deleted.status).toBe(409);
    expect(await deleted.text()).toContain("upstream-headers");
    const changed = documentOf().replace('authorization: "Bearer', 'authorization: "Token');
    expect(changed).not.toBe(documentOf());
    expect((await putConfig(changed, memberKey)).status).toBe(403);
    // The member's PUT that keeps the references as they are is allowed.
    expect((await putConfig(documentOf().replace("x-tag: gateway", "x-tag: member-edit"), memberKey)).status).toBe(200);
    await until(async () => echoOf(await through("/rewritten/x")).headers["x-tag"] === "member-edit", "the member's change at the gateway");
  });
});

describe("credentials revoked while the gateway runs", () => {
  test("a revoked session and a revoked consumer key are refused at once", async () => {
    const doomed = await signIn();
    expect((await through("/session/me", { authorization: `Bearer ${doomed.token}` })).status).toBe(200);
    const revoked = await api("/svc.v1.IdentityService/RevokeSession", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ sessionId: doomed.sessionId }),
      bearer: secretKey,
    });
    expect(revoked.status).toBe(200);
    await until(
      async () => (await through("/session/me", { authorization: `Bearer ${doomed.token}` })).status === 401,
      "the revoked session refused",
      5_000,
    );
    expect((await through("/session/me", { authorization: `Bearer ${session.token}` })).status).toBe(200);

    const partner = cli<{ consumer_key: string; consumer_id: string }>(["consumers", "create", "--org", org, "--name", "doomed"]);
    await until(async () => (await through("/keyed/x", { "x-api-key": partner.consumer_key })).status === 200, "the new consumer", 5_000);
    cli(["consumers", "revoke", "--org", org, partner.consumer_id]);
    await until(
      async () => (await through("/keyed/x", { "x-api-key": partner.consumer_key })).status === 401,
      "the revoked consumer",
      5_000,
    );
  });
});

test("a configuration change applies to the very next request", async () => {
  await apply(documentOf().replace("requests: 3, window_seconds: 60", "requests: 1000, window_seconds: 60"));
  expect((await through("/limited/x", { "x-api-key": consumer.consumer_key })).headers["ratelimit-limit"]).toBe("1000");
});
