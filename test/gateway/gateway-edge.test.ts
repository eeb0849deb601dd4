import { request } from "node:http";
import { connect, type Socket } from "node:net";
import type { Consumer } from "../../src/gateway/gateway-state.js";
import { connectionBudget } from "../../src/gateway/proxy/edge-server.js";
import { parseTrustedProxies } from "../../src/server/client-address.js";
import { newConsumerKey, send, startTestGateway, stateFromYaml, type TestGateway } from "../support/gateway.js";
import { firstHeadersOf, firstJsonOf, rawExchange, startWitness, statusesOf, type Witness } from "../support/raw-http.js";

/**
 * The gateway as an edge (docs/security.md, "The gateway"): every byte a
 * client sends is hostile until a plugin let it through, and the upstream
 * sees the request the plugins judged, never another. The witness behind
 * every route is a plain HTTP server behind a relay that records every byte
 * it receives: each test says what it must never have seen.
 */
let witness: Witness;
let gw: TestGateway;
const consumer = newConsumerKey();
const consumers = new Map<string, Consumer>([[consumer.hash, { id: "c1", name: "c1" }]]);

const documentFor = (upstream: string) => `version: 1
domains:
  - name: api.example.com
plugins:
  - name: signed-in
    type: session-auth
    config: {forward_identity_header: x-identity-id}
  - name: maybe-signed-in
    type: session-auth
    config: {required: false, forward_identity_header: x-identity-id}
  - name: keys
    type: api-key-auth
    config: {hide_credentials: true}
  - name: tag
    type: request-headers
    config: {set: {x-env: production}, add: {x-tag: gw}, remove: [x-debug]}
rules:
  - name: no-admin
    match: {path_prefix: /admin}
    action: deny
routes:
  - name: open
    path: /*
    upstream: ${upstream}/r-open
    rules: [no-admin]
  - name: pub
    path: /pub/*
    upstream: ${upstream}/r-pub
    plugins: [tag]
  - name: sess
    path: /sess/*
    upstream: ${upstream}/r-sess
    plugins: [signed-in]
  - name: keyed
    path: /keyed/*
    upstream: ${upstream}/r-keyed
    plugins: [keys, maybe-signed-in]
  - name: posts
    path: /posts
    methods: [POST]
    upstream: ${upstream}/r-posts
`;

beforeAll(async () => {
  witness = await startWitness();
  gw = await startTestGateway({}, stateFromYaml(documentFor(witness.url), { consumers }));
});
afterAll(async () => {
  await gw.close();
  await witness.close();
});

const upgradeHead = (path: string, extra = "") =>
  `GET ${path} HTTP/1.1\r\nHost: gw.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n${extra}\r\n`;
const smuggled =
  "GET /admin/secret HTTP/1.1\r\nHost: gw.test\r\n\r\nGET /sess/profile HTTP/1.1\r\nHost: gw.test\r\nx-identity-id: forged-identity\r\n\r\n";

/** Whether the witness saw any of these (it records every byte sent to the upstream). */
const sawAny = (...needles: string[]) => needles.filter((needle) => witness.received().includes(needle));

describe("WebSocket upgrades", () => {
  test("an upstream that answers an upgrade with 200 gets no later request of that connection: the answer is relayed, then the connection closes", async () => {
    const exchange = await rawExchange(gw.url, [upgradeHead("/pub/x"), smuggled], { gapMs: 300 });
    expect(statusesOf(exchange.text)).toEqual([200]);
    expect(firstHeadersOf(exchange.text).connection).toBe("close");
    expect(exchange.closed).toBe(true);
    expect(sawAny("/admin/secret", "/sess/profile", "forged-identity")).toEqual([]);
  });

  test("bytes sent right behind the upgrade's head (a pipelined request) never reach an upstream that did not switch", async () => {
    const exchange = await rawExchange(gw.url, [upgradeHead("/pub/y") + smuggled]);
    expect(statusesOf(exchange.text)).toEqual([200]);
    expect(exchange.closed).toBe(true);
    expect(sawAny("/admin/secret", "/sess/profile", "forged-identity")).toEqual([]);
  });

  test("an upgrade is judged by its route's plugins before any byte goes upstream", async () => {
    const before = witness.received().length;
    const exchange = await rawExchange(gw.url, [upgradeHead("/sess/ws"), smuggled], { gapMs: 200 });
    expect(statusesOf(exchange.text)).toEqual([401]);
    expect(firstHeadersOf(exchange.text).date).toBeDefined();
    expect(firstJsonOf(exchange.text).code).toBe("unauthenticated");
    expect(witness.received().length).toBe(before);
  });

  test("an upgrade with a body is refused: a WebSocket handshake is a bodiless GET", async () => {
    const exchange = await rawExchange(gw.url, [upgradeHead("/pub/z", "Content-Length: 5\r\n") + "hello"]);
    expect(statusesOf(exchange.text)).toEqual([400]);
    expect(sawAny("/pub/z")).toEqual([]);
  });

  test("beyond GATEWAY_MAX_TUNNELS an upgrade is 503 with Retry-After, before the upstream is asked", async () => {
    const tight = await startTestGateway({ limits: { maxTunnels: 0 } }, stateFromYaml(documentFor(witness.url)));
    try {
      const exchange = await rawExchange(tight.url, [upgradeHead("/pub/full")]);
      expect(statusesOf(exchange.text)).toEqual([503]);
      expect(firstHeadersOf(exchange.text)["retry-after"]).toBe("5");
      expect(sawAny("/pub/full")).toEqual([]);
    } finally {
      await tight.close();
    }
  });
});

describe("one canonical path, judged and forwarded", () => {
  test.each([
    "/x/..\\admin/x",
    "/pub/..\\sess/profile",
    "/pub/%5Cadmin",
    "/pub/%5csess",
    "/x/..;/admin",
    "/pub/.;x/../sess",
    "/pub/..%2Fsess/a",
    "/pub/%2e%2e;/admin",
    "/pub/%2E%2e%2fadmin",
    "/pub/%zz",
  ])("%s is refused with 400 and never forwarded", async (path) => {
    const exchange = await rawExchange(gw.url, [`GET ${path} HTTP/1.1\r\nHost: gw.test\r\nx-identity-id: forged-identity\r\n\r\n`], {
      quietMs: 100,
    });
    expect(statusesOf(exchange.text)).toEqual([400]);
    expect(firstJsonOf(exchange.text)).toMatchObject({ code: "invalid_argument" });
    expect(sawAny(path, "forged-identity")).toEqual([]);
  });

  test("the upstream receives the path the routes judged: unreserved characters decoded, hex upper-cased, slashes collapsed, encoded slashes and parameters kept", async () => {
    const exchange = await rawExchange(gw.url, [
      "GET /pub//a/%61b/%7e/%41%2f%2F;v=1/x%20y/caf%e9?q=%zz&r=1 HTTP/1.1\r\nHost: gw.test\r\n\r\n",
    ]);
    expect(statusesOf(exchange.text)).toEqual([200]);
    expect(witness.requests.at(-1)?.url).toBe("/r-pub/pub/a/ab/~/A%2F%2F;v=1/x%20y/caf%E9?q=%zz&r=1");
  });

  test.each(["/%61dmin/x", "//admin", "/admin;x/y", "/adm%69n", "/admin%2Fx"])("%s is the /admin a deny rule names", async (path) => {
    const answer = await send(gw.url, { path, headers: { host: "gw.test" } });
    expect(answer.status).toBe(403);
    expect(sawAny(path)).toEqual([]);
  });

  test("an encoded slash or a parameter reaches the route whose path it spells: /sess%2Fprofile needs a session", async () => {
    for (const path of ["/sess%2Fprofile", "/sess;x/profile", "/%73ess/profile"]) {
      const answer = await send(gw.url, { path, headers: { host: "gw.test", "x-identity-id": "forged-identity" } });
      expect(answer.status).toBe(401);
    }
    expect(sawAny("forged-identity")).toEqual([]);
  });

  test("route and rule prefixes compare case-sensitively, as the document writes them", async () => {
    const answer = await send(gw.url, { path: "/ADMIN/x", headers: { host: "gw.test" } });
    expect(answer.status).toBe(200);
    expect(witness.requests.at(-1)?.url).toBe("/r-open/ADMIN/x");
  });
});

describe("methods and targets", () => {
  test("TRACE is 405 with Allow and the error body, never forwarded", async () => {
    const answer = await send(gw.url, { method: "TRACE", path: "/pub/trace-me", headers: { host: "gw.test" } });
    expect(answer.status).toBe(405);
    expect(answer.headers.allow).toBe("GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS");
    expect(answer.json.code).toBe("unimplemented");
    expect(sawAny("trace-me")).toEqual([]);
  });

  test("CONNECT is 405 with Date and the error body", async () => {
    const exchange = await rawExchange(gw.url, ["CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"]);
    expect(statusesOf(exchange.text)).toEqual([405]);
    expect(firstHeadersOf(exchange.text).date).toMatch(/GMT$/);
    expect(firstJsonOf(exchange.text).code).toBe("unimplemented");
    expect(sawAny("example.com:443")).toEqual([]);
  });

  test("two Host fields are 400 (RFC 9112 section 3.2); a missing one on HTTP/1.1 too; HTTP/1.0 may omit it", async () => {
    const two = await rawExchange(gw.url, ["GET /pub/two-hosts HTTP/1.1\r\nHost: api.example.com\r\nHost: evil.example\r\n\r\n"]);
    expect(statusesOf(two.text)).toEqual([400]);
    expect(firstJsonOf(two.text).details).toEqual([
      expect.objectContaining({ debug: expect.objectContaining({ reason: "host_repeated" }) }),
    ]);
    const none = await rawExchange(gw.url, ["GET /pub/no-host HTTP/1.1\r\n\r\n"]);
    expect(statusesOf(none.text)).toEqual([400]);
    expect(sawAny("two-hosts", "no-host")).toEqual([]);
    const old = await rawExchange(gw.url, ["GET /pub/old HTTP/1.0\r\n\r\n"]);
    expect(statusesOf(old.text)).toEqual([200]);
  });

  test("a Host that is not host[:port] is 400 host_invalid: user information, a path, a comma list or a backslash never route or go upstream", async () => {
    for (const host of [
      "user@api.example.com",
      "api.example.com/pub",
      "api.example.com\\evil",
      "api.example.com:80:81",
      "api.example.com, evil.example",
      "[::1",
      "api.example.com:port",
    ]) {
      const exchange = await rawExchange(gw.url, [`GET /pub/bad-host HTTP/1.1\r\nHost: ${host}\r\n\r\n`]);
      expect([host, statusesOf(exchange.text)]).toEqual([host, [400]]);
      expect(firstJsonOf(exchange.text).details).toEqual([
        expect.objectContaining({ debug: expect.objectContaining({ reason: "host_invalid" }) }),
      ]);
    }
    for (const host of ["api.example.com", "API.example.com:8080", "[::1]:8000", "127.0.0.1", "xn--bcher-kva.example"]) {
      const exchange = await rawExchange(gw.url, [`GET /pub/good-host HTTP/1.1\r\nHost: ${host}\r\n\r\n`]);
      expect([host, statusesOf(exchange.text)]).toEqual([host, [200]]);
    }
    expect(sawAny("bad-host")).toEqual([]);
  });

  test("an absolute-form target is routed by its authority (RFC 9112 section 3.2.2); a Host that differs is 400", async () => {
    const absolute = await rawExchange(gw.url, [
      "GET http://API.example.com:8000/pub/abs?x=1 HTTP/1.1\r\nHost: api.example.com:8000\r\n\r\n",
    ]);
    expect(statusesOf(absolute.text)).toEqual([200]);
    const seen = witness.requests.at(-1)!;
    expect(seen.url).toBe("/r-pub/pub/abs?x=1");
    expect(seen.headers["x-forwarded-host"]).toBe("API.example.com:8000");
    const mismatch = await rawExchange(gw.url, ["GET http://api.example.com/pub/mismatch HTTP/1.1\r\nHost: evil.example\r\n\r\n"]);
    expect(statusesOf(mismatch.text)).toEqual([400]);
    const userinfo = await rawExchange(gw.url, ["GET http://user@api.example.com/pub/userinfo HTTP/1.1\r\nHost: api.example.com\r\n\r\n"]);
    expect(statusesOf(userinfo.text)).toEqual([400]);
    expect(sawAny("mismatch", "userinfo")).toEqual([]);
  });

  test("method-override headers do not reach a route that serves some methods only", async () => {
    await send(gw.url, {
      method: "POST",
      path: "/posts",
      headers: { host: "gw.test", "x-http-method-override": "DELETE", "X-HTTP-Method": "DELETE", x_method_override: "DELETE" },
    });
    const seen = witness.requests.at(-1)!;
    expect(seen.url).toBe("/r-posts/posts");
    expect(Object.keys(seen.headers).filter((name) => name.includes("method"))).toEqual([]);
  });
});

describe("answers of the gateway's own HTTP/1.1 parser carry Date and the error body", () => {
  test.each([
    ["a malformed header line", "GET /pub/x HTTP/1.1\r\nHost: gw.test\r\nno colon here\r\n\r\n", 400],
    ["a head larger than the limit", `GET /pub/x HTTP/1.1\r\nHost: gw.test\r\nx-big: ${"a".repeat(20_000)}\r\n\r\n`, 431],
    ["an unknown HTTP version", "GET /pub/x HTTP/4.2\r\nHost: gw.test\r\n\r\n", 505],
    [
      "Content-Length and Transfer-Encoding together",
      "POST /pub/x HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      400,
    ],
    ["an expectation the gateway cannot meet", "GET /pub/x HTTP/1.1\r\nHost: gw.test\r\nExpect: 200-ok\r\n\r\n", 417],
  ])("%s", async (_what, bytes, status) => {
    const exchange = await rawExchange(gw.url, [bytes]);
    expect(statusesOf(exchange.text)).toEqual([status]);
    const headers = firstHeadersOf(exchange.text);
    expect(headers.date).toMatch(/GMT$/);
    expect(headers["content-type"]).toBe("application/json");
    const body = firstJsonOf(exchange.text);
    expect(typeof body.code).toBe("string");
    expect(typeof body.message).toBe("string");
    expect(JSON.stringify(body)).not.toContain("aaaa");
  });
});

describe("headers towards the upstream", () => {
  test("Via is appended on the request and on the answer (RFC 9110 section 7.6.3)", async () => {
    const answer = await send(gw.url, { path: "/pub/via", headers: { host: "gw.test", via: "1.1 edge-cdn" } });
    expect(witness.requests.at(-1)?.headers.via).toBe("1.1 edge-cdn, 1.1 gatehouse");
    expect(answer.headers.via).toBe("1.1 gatehouse");
  });

  test("a name spelled with _ for - never passes beside a header a plugin sets, removes or owns", async () => {
    await send(gw.url, {
      path: "/pub/variants",
      headers: {
        host: "gw.test",
        x_env: "staging",
        X_Debug: "1",
        "x-tag": "client",
        x_tag: "client-variant",
        x_forwarded_for: "203.0.113.9",
        X_Real_IP: "203.0.113.9",
      },
    });
    const seen = witness.requests.at(-1)!;
    expect(seen.headers["x-env"]).toBe("production");
    expect(seen.headers["x-tag"]).toBe("client, gw");
    const names = seen.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
    expect(names.filter((n) => n.includes("_"))).toEqual([]);
  });

  test("the identity header and a hidden credential are removed in every spelling", async () => {
    const answer = await send(gw.url, {
      path: "/keyed/k",
      headers: { host: "gw.test", "x-api-key": consumer.key, x_api_key: consumer.key, x_identity_id: "forged-identity" },
    });
    expect(answer.status).toBe(200);
    expect(witness.received()).not.toContain(consumer.key);
    expect(sawAny("forged-identity")).toEqual([]);
  });

  test("a client's X-Forwarded-*, Forwarded, X-Real-IP and X-Original-URL are replaced, not passed on", async () => {
    await send(gw.url, {
      path: "/pub/forwarded",
      headers: {
        host: "gw.test",
        "x-forwarded-for": "203.0.113.7",
        "x-forwarded-proto": "https",
        "x-forwarded-host": "spoofed.example",
        "x-forwarded-port": "443",
        forwarded: "for=203.0.113.7;proto=https",
        "x-real-ip": "203.0.113.7",
        "x-original-url": "/admin/secret",
        "x-rewrite-url": "/admin/secret",
      },
    });
    const seen = witness.requests.at(-1)!;
    expect(seen.headers["x-forwarded-for"]).toBe("127.0.0.1");
    expect(seen.headers["x-forwarded-proto"]).toBe("http");
    expect(seen.headers["x-forwarded-host"]).toBe("gw.test");
    for (const name of ["x-forwarded-port", "forwarded", "x-real-ip", "x-original-url", "x-rewrite-url"])
      expect(seen.headers[name]).toBeUndefined();
  });

  test("behind a trusted proxy (TRUSTED_PROXIES) they are passed on, and X-Forwarded-For is appended to", async () => {
    const trusted = await startTestGateway(
      { trustedProxies: parseTrustedProxies("127.0.0.0/8").proxies },
      stateFromYaml(documentFor(witness.url)),
    );
    try {
      await send(trusted.url, {
        path: "/pub/trusted",
        headers: { host: "gw.test", "x-forwarded-for": "203.0.113.7", "x-forwarded-proto": "https", "x-real-ip": "203.0.113.7" },
      });
      const seen = witness.requests.at(-1)!;
      expect(seen.headers["x-forwarded-for"]).toBe("203.0.113.7, 127.0.0.1");
      expect(seen.headers["x-forwarded-proto"]).toBe("https");
      expect(seen.headers["x-real-ip"]).toBe("203.0.113.7");
    } finally {
      await trusted.close();
    }
  });
});

test("trailers of the upstream's chunked answer reach the client", async () => {
  witness.handler = (req, res) => {
    req.resume();
    res.writeHead(200, { "content-type": "text/plain", trailer: "x-checksum" });
    res.write("part one, ");
    res.addTrailers({ "x-checksum": "abc123" });
    res.end("part two");
  };
  try {
    const trailers = await new Promise<Record<string, string | undefined>>((resolve, reject) => {
      const { port } = new URL(gw.url);
      const req = request({ host: "127.0.0.1", port, path: "/pub/trailers", headers: { host: "gw.test", te: "trailers" } }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.trailers));
      });
      req.on("error", reject);
      req.end();
    });
    expect(trailers["x-checksum"]).toBe("abc123");
  } finally {
    delete witness.handler;
  }
});

describe("limits per gateway process", () => {
  /** Opens `count` connections that send half a request head and wait. */
  async function halfOpen(url: string, count: number, localAddress = "127.0.0.1"): Promise<Socket[]> {
    const { port } = new URL(url);
    const sockets: Socket[] = [];
    await Promise.all(
      Array.from({ length: count }, () => {
        const socket = connect({ host: "127.0.0.1", port: Number(port), localAddress });
        socket.on("error", () => {});
        sockets.push(socket);
        return new Promise<void>((resolve) => {
          socket.once("connect", () => {
            socket.write("GET /pub/slow HTTP/1.1\r\nHost: gw.test\r\n");
            resolve();
          });
          socket.once("close", () => resolve());
        });
      }),
    );
    return sockets;
  }

  /** The sockets still open once the gateway has closed those over a limit (it does so at once; a loaded machine may take a moment). */
  async function openAfterLimit(sockets: Socket[], expected: number): Promise<number> {
    for (let i = 0; i < 60 && sockets.filter((s) => !s.destroyed).length > expected; i++) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 100));
    return sockets.filter((s) => !s.destroyed).length;
  }

  test("one client address holds at most GATEWAY_MAX_CONNECTIONS_PER_CLIENT connections; others and the admin port are served", async () => {
    const tight = await startTestGateway({ limits: { maxConnectionsPerClient: 5 } }, stateFromYaml(documentFor(witness.url)));
    const sockets = await halfOpen(tight.url, 40);
    try {
      expect(await openAfterLimit(sockets, 5)).toBe(5);
      expect((await send(tight.url, { path: "/pub/other-client", headers: { host: "gw.test" }, localAddress: "127.0.0.2" })).status).toBe(
        200,
      );
      expect((await fetch(`${tight.adminUrl}/healthz`)).status).toBe(200);
      const metrics = await (await fetch(`${tight.adminUrl}/metrics`)).text();
      expect(metrics).toContain('gatehouse_gateway_connections_refused_total{reason="client_connections"} 35');
    } finally {
      for (const socket of sockets) socket.destroy();
      await tight.close();
    }
  });

  test("the process holds at most GATEWAY_MAX_CONNECTIONS; the admin port keeps answering", async () => {
    const tight = await startTestGateway({ limits: { maxConnections: 64 } }, stateFromYaml(documentFor(witness.url)));
    const sockets = (await Promise.all(["127.0.0.3", "127.0.0.4", "127.0.0.5"].map((address) => halfOpen(tight.url, 40, address)))).flat();
    try {
      expect(await openAfterLimit(sockets, 64)).toBe(64);
      expect((await fetch(`${tight.adminUrl}/healthz`)).status).toBe(200);
      expect(await (await fetch(`${tight.adminUrl}/metrics`)).text()).toMatch(
        /gatehouse_gateway_connections_refused_total\{reason="connections"\} 56/,
      );
    } finally {
      for (const socket of sockets) socket.destroy();
      await tight.close();
    }
  });

  test("a request head that does not arrive within GATEWAY_HEADER_TIMEOUT_MS is answered 408 and closed", async () => {
    const tight = await startTestGateway(
      { limits: { headerTimeoutMs: 300, requestTimeoutMs: 300 } },
      stateFromYaml(documentFor(witness.url)),
    );
    try {
      const started = Date.now();
      const exchange = await rawExchange(tight.url, ["GET /pub/slowloris HTTP/1.1\r\nHost: gw.test\r\n"], { quietMs: 5_000 });
      expect(exchange.closed).toBe(true);
      expect(statusesOf(exchange.text)).toEqual([408]);
      expect(Date.now() - started).toBeLessThan(4_000);
    } finally {
      await tight.close();
    }
  });

  test("the connection limit is fitted to the process's open-file limit, leaving room for the upstream side and the rest of the process", () => {
    expect(connectionBudget(10_000, undefined, 0)).toBe(10_000);
    expect(connectionBudget(10_000, 1_048_576, 0)).toBe(10_000);
    expect(connectionBudget(10_000, 20_000, 0)).toBe(9_488);
    expect(connectionBudget(10_000, 20_000, 10_000)).toBe(4_488);
    expect(connectionBudget(10_000, 1_024, 0)).toBe(64);
  });
});

describe("what an outside review found after the first round of fixes", () => {
  test("a WebSocket upgrade with any method but GET is 405: it would be judged as that method and tunnelled as a GET", async () => {
    for (const method of ["POST", "DELETE", "HEAD", "PURGE"]) {
      const exchange = await rawExchange(gw.url, [upgradeHead("/pub/upgrade-method").replace(/^GET /, `${method} `)], { quietMs: 100 });
      expect({ method, statuses: statusesOf(exchange.text) }).toEqual({ method, statuses: [405] });
    }
    expect(sawAny("upgrade-method")).toEqual([]);
  });

  test("every client header with _ in its name is dropped (as nginx does), so no spelling passes beside one a rule or plugin judged", async () => {
    await send(gw.url, { path: "/pub/underscores", headers: { host: "gw.test", X_Role: "admin", x_custom: "1", content_length: "5" } });
    const seen = witness.requests.at(-1)!;
    expect(seen.rawHeaders.filter((_, i) => i % 2 === 0 && seen.rawHeaders[i]!.includes("_"))).toEqual([]);
  });

  test("client-address and destination headers from a client are not passed on", async () => {
    const names = [
      "x-client-ip",
      "true-client-ip",
      "cf-connecting-ip",
      "x-cluster-client-ip",
      "fastly-client-ip",
      "x-forwarded",
      "forwarded-for",
      "x-original-host",
      "x-host",
      "x-envoy-original-path",
      "x-http-host-override",
      "x-override-url",
    ];
    await send(gw.url, {
      path: "/pub/client-ip",
      headers: { host: "gw.test", ...Object.fromEntries(names.map((n) => [n, "203.0.113.99"])) },
    });
    const seen = witness.requests.at(-1)!;
    expect(names.filter((n) => seen.headers[n] !== undefined)).toEqual([]);
  });

  test("header rules judge the request as it goes upstream: a forged X-Forwarded-For, an absolute-form target's host", async () => {
    const ruled = await startTestGateway(
      {},
      stateFromYaml(`version: 1
rules:
  - name: only-office
    match: {header: x-forwarded-for, regex: "^10\\\\."}
    action: allow
  - name: no-internal-host
    match: {header: host, regex: "^internal"}
    action: deny
routes:
  - name: office
    path: /office/*
    upstream: ${witness.url}/r-office
    rules: [only-office]
  - name: hosts
    path: /hosts/*
    upstream: ${witness.url}/r-hosts
    rules: [no-internal-host]
`),
    );
    try {
      expect((await send(ruled.url, { path: "/office/x", headers: { host: "gw.test", "x-forwarded-for": "10.1.2.3" } })).status).toBe(403);
      const absolute = await rawExchange(ruled.url, ["GET http://internal.example/hosts/x HTTP/1.1\r\n\r\n"], { quietMs: 100 });
      expect(statusesOf(absolute.text)).toEqual([403]);
      expect(sawAny("/r-office/", "/r-hosts/")).toEqual([]);
    } finally {
      await ruled.close();
    }
  });

  test("a client that stops reading an answer is let go after GATEWAY_SEND_TIMEOUT_MS, and so is the upstream request", async () => {
    const upstreamClosed: string[] = [];
    witness.handler = (req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "application/octet-stream" });
      const chunk = Buffer.alloc(64 * 1024, 1);
      const pump = () => {
        while (res.write(chunk)) {}
      };
      res.on("drain", pump);
      pump();
      res.on("close", () => upstreamClosed.push(req.url ?? ""));
    };
    const tight = await startTestGateway({ limits: { sendTimeoutMs: 300 } }, stateFromYaml(documentFor(witness.url)));
    try {
      const { port } = new URL(tight.url);
      const socket = connect(Number(port), "127.0.0.1");
      socket.on("error", () => {});
      socket.write("GET /pub/never-read HTTP/1.1\r\nHost: gw.test\r\n\r\n");
      socket.pause(); // reads nothing
      const deadline = Date.now() + 10_000;
      while (!upstreamClosed.includes("/r-pub/pub/never-read") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(upstreamClosed).toContain("/r-pub/pub/never-read");
      socket.destroy();
    } finally {
      delete witness.handler;
      await tight.close();
    }
  });

  test("a request body the parser refuses after the request was handed on is answered 400, not a silent close", async () => {
    witness.handler = (req, res) => {
      req.on("data", () => {});
      req.on("error", () => {});
      req.on("end", () => res.end("ok"));
    };
    try {
      const exchange = await rawExchange(gw.url, [
        "POST /pub/bad-chunk HTTP/1.1\r\nHost: gw.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
        "zz\r\nnot a chunk\r\n",
      ]);
      expect(statusesOf(exchange.text)).toEqual([400]);
      expect(firstJsonOf(exchange.text).code).toBe("invalid_argument");
    } finally {
      delete witness.handler;
    }
  });

  test("the admin port has limits of its own: one address holds at most 16 of its connections; others are answered", async () => {
    const { port } = new URL(gw.adminUrl);
    const sockets = await Promise.all(
      Array.from(
        { length: 40 },
        () =>
          new Promise<Socket>((resolve) => {
            const socket = connect({ host: "127.0.0.1", port: Number(port), localAddress: "127.0.0.9" });
            socket.on("error", () => {});
            socket.once("connect", () => resolve(socket));
            socket.once("close", () => resolve(socket));
          }),
      ),
    );
    try {
      for (let i = 0; i < 60 && sockets.filter((s) => !s.destroyed).length > 16; i++) await new Promise((r) => setTimeout(r, 50));
      expect(sockets.filter((s) => !s.destroyed).length).toBe(16);
      expect((await fetch(`${gw.adminUrl}/healthz`)).status).toBe(200);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  });
});
