import { createServer, request, type Server } from "node:http";
import { createServer as createTcpServer, connect, type AddressInfo, type Socket } from "node:net";
import {
  echoOf,
  reasonOf,
  send,
  startEchoUpstream,
  startTestGateway,
  stateFromYaml,
  type EchoUpstream,
  type TestGateway,
} from "../support/gateway.js";

/**
 * docs/gateway.md, "The data plane: how the gateway enforces it", forwarding: hop-by-hop headers dropped,
 * X-Forwarded-* and X-Request-Id set, bodies streamed both ways, 502 on a
 * refused or reset upstream, 504 on a slow one, client aborts cancel the
 * upstream request, one access-log line per request.
 */
let upstream: EchoUpstream;
let gw: TestGateway;
/** An upstream that accepts connections and never answers (for 504). */
let silent: Server;
/** An upstream that resets every connection as soon as a request arrives (for 502). */
let resetting: Server;
/** An upstream that answers the headers then stops halfway through the body. */
let halfway: Server;
/** Requests to the slow upstream whose connection the gateway closed (client aborts). */
const slowClosed: string[] = [];
let refusedPort: number;

function listen(server: Server | ReturnType<typeof createTcpServer>): Promise<number> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)));
}

beforeAll(async () => {
  upstream = await startEchoUpstream("echo");
  silent = createServer((req) => {
    req.on("close", () => slowClosed.push(req.url ?? ""));
  });
  resetting = createServer((req) => req.socket.destroy());
  halfway = createServer((_req, res) => {
    res.writeHead(200, { "content-length": "100" });
    res.write("x".repeat(10));
    setTimeout(() => res.socket?.destroy(), 20);
  });
  const [silentPort, resettingPort, halfwayPort] = await Promise.all([listen(silent), listen(resetting), listen(halfway)]);
  // A port nothing listens on: take a free one and close it.
  const probe = createTcpServer();
  refusedPort = await listen(probe);
  await new Promise<void>((resolve) => probe.close(() => resolve()));

  gw = await startTestGateway(
    { upstreamTimeoutMs: 1_000 },
    stateFromYaml(`version: 1
routes:
  - name: echo
    path: /echo/*
    upstream: ${upstream.url}
  - name: silent
    path: /silent/*
    upstream: http://127.0.0.1:${silentPort}
  - name: refused
    path: /refused/*
    upstream: http://127.0.0.1:${refusedPort}
  - name: resetting
    path: /reset/*
    upstream: http://127.0.0.1:${resettingPort}
  - name: halfway
    path: /halfway/*
    upstream: http://127.0.0.1:${halfwayPort}
`),
  );
});
afterAll(async () => {
  await gw.close();
  for (const server of [silent, resetting, halfway]) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  await upstream.close();
});

describe("request headers", () => {
  test("hop-by-hop headers, and those the Connection header names, are not forwarded", async () => {
    const echo = echoOf(
      await send(gw.url, {
        path: "/echo/h",
        headers: {
          connection: "keep-alive, x-private-hop",
          "keep-alive": "timeout=5",
          "x-private-hop": "secret-to-this-hop",
          te: "trailers",
          "proxy-authorization": "Basic Zm9vOmJhcg==",
          "x-end-to-end": "kept",
        },
      }),
    );
    for (const name of ["keep-alive", "x-private-hop", "te", "proxy-authorization"]) expect(echo.headers[name]).toBeUndefined();
    expect(echo.headers["x-end-to-end"]).toBe("kept");
    // The gateway's own connection to the upstream is kept alive.
    expect(echo.headers.connection).toBe("keep-alive");
  });

  test("a client's X-Forwarded-* are replaced: X-Forwarded-For names the peer, X-Forwarded-Proto and X-Forwarded-Host are set, Host names the upstream", async () => {
    const echo = echoOf(
      await send(gw.url, {
        path: "/echo/f",
        headers: {
          host: "api.example.com:8443",
          "x-forwarded-for": "203.0.113.7",
          "x-forwarded-proto": "https",
          "x-forwarded-host": "spoofed",
        },
      }),
    );
    expect(echo.headers["x-forwarded-for"]).toBe("127.0.0.1");
    expect(echo.headers["x-forwarded-proto"]).toBe("http");
    expect(echo.headers["x-forwarded-host"]).toBe("api.example.com:8443");
    expect(echo.headers.host).toBe(new URL(upstream.url).host);
    const plain = echoOf(await send(gw.url, { path: "/echo/f" }));
    expect(plain.headers["x-forwarded-for"]).toBe("127.0.0.1");
  });

  test("a safe X-Request-Id is kept end to end; an unsafe or missing one is replaced by a generated one", async () => {
    const kept = await send(gw.url, { path: "/echo/id", headers: { "x-request-id": "trace-1234.abc:9" } });
    expect(echoOf(kept).headers["x-request-id"]).toBe("trace-1234.abc:9");
    expect(kept.headers["x-request-id"]).toBe("trace-1234.abc:9");
    const unsafe = await send(gw.url, { path: "/echo/id", headers: { "x-request-id": "<script>alert(1)</script>" } });
    const generated = echoOf(unsafe).headers["x-request-id"] as string;
    expect(generated).toMatch(/^[0-9a-f]{8}-[0-9a-z]+$/);
    expect(unsafe.headers["x-request-id"]).toBe(generated);
    const missing = await send(gw.url, { path: "/echo/id" });
    expect(echoOf(missing).headers["x-request-id"]).toMatch(/^[0-9a-f]{8}-[0-9a-z]+$/);
    expect(echoOf(missing).headers["x-request-id"]).not.toBe(generated);
  });

  test("an Expect: 100-continue upload is answered by the gateway and its body forwarded", async () => {
    const echo = echoOf(
      await send(gw.url, { method: "POST", path: "/echo/continue", headers: { expect: "100-continue" }, body: "after continue" }),
    );
    expect(echo.body).toBe("after continue");
    expect(echo.headers.expect).toBeUndefined();
  });
});

describe("responses", () => {
  test("the upstream's status, headers and body come back; its hop-by-hop headers do not", async () => {
    const answer = await send(gw.url, {
      method: "POST",
      path: "/echo/created?x=1",
      headers: { "x-echo-status": "201", "x-echo-header": "x-upstream: yes", "content-type": "text/plain" },
      body: "hello body",
    });
    expect(answer.status).toBe(201);
    expect(answer.headers["x-upstream"]).toBe("yes");
    const echo = echoOf(answer);
    expect(echo).toMatchObject({ method: "POST", url: "/echo/created?x=1", body: "hello body" });
    const hop = await send(gw.url, { path: "/echo/hop", headers: { "x-echo-header": "keep-alive: timeout=99" } });
    expect(hop.headers["keep-alive"]).not.toBe("timeout=99");
  });

  test("HEAD is forwarded as HEAD and answered without a body", async () => {
    const answer = await send(gw.url, { method: "HEAD", path: "/echo/head" });
    expect(answer.status).toBe(200);
    expect(answer.text).toBe("");
    expect(upstream.seen.at(-1)?.method).toBe("HEAD");
  });

  test("a chunked request body streams through", async () => {
    const answer = await new Promise<string>((resolve, reject) => {
      const target = new URL(gw.url);
      const req = request({ host: target.hostname, port: target.port, method: "PUT", path: "/echo/chunked", agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve(Buffer.concat(chunks).toString()));
      });
      req.on("error", reject);
      req.write("one,");
      setTimeout(() => req.end("two"), 20);
    });
    const echo = JSON.parse(answer) as { body: string; headers: Record<string, string> };
    expect(echo.body).toBe("one,two");
    // Re-framed for the upstream: chunked, or with its length when the whole body had arrived before it was sent on.
    expect(echo.headers["transfer-encoding"] === "chunked" || echo.headers["content-length"] === "7").toBe(true);
  });
});

describe("upstream failures", () => {
  test("a refused connection is 502 with the Connect error body", async () => {
    const answer = await send(gw.url, { path: "/refused/x" });
    expect(answer.status).toBe(502);
    expect(answer.json.code).toBe("unavailable");
    expect(reasonOf(answer)).toBe("upstream_unreachable");
    expect(answer.headers["x-request-id"]).toBeDefined();
  });

  test("a connection reset before the answer is 502", async () => {
    const answer = await send(gw.url, { method: "POST", path: "/reset/x", body: "data" });
    expect(answer.status).toBe(502);
    expect(reasonOf(answer)).toBe("upstream_unreachable");
  });

  test("an upstream that does not answer within the timeout is 504", async () => {
    const started = Date.now();
    const answer = await send(gw.url, { path: "/silent/slow" });
    expect(answer.status).toBe(504);
    expect(answer.json.code).toBe("deadline_exceeded");
    expect(reasonOf(answer)).toBe("upstream_timeout");
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
  });

  test("an upstream that fails halfway through its body cuts the client's connection instead of faking an end", async () => {
    const outcome = await new Promise<string>((resolve) => {
      const target = new URL(gw.url);
      const req = request({ host: target.hostname, port: target.port, path: "/halfway/x", agent: false }, (res) => {
        res.on("data", () => {});
        res.on("end", () => resolve("ended"));
        res.on("error", () => resolve("cut"));
        res.on("aborted", () => resolve("cut"));
      });
      req.on("error", () => resolve("cut"));
      req.end();
    });
    expect(outcome).toBe("cut");
  });
});

describe("client aborts", () => {
  test("a client that goes away cancels its upstream request", async () => {
    const socket: Socket = connect(Number(new URL(gw.url).port), "127.0.0.1");
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
    socket.write("GET /silent/abort-me HTTP/1.1\r\nHost: x\r\n\r\n");
    // Let the gateway reach the upstream, then leave.
    await new Promise((resolve) => setTimeout(resolve, 100));
    socket.destroy();
    for (let i = 0; i < 50 && !slowClosed.includes("/silent/abort-me"); i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(slowClosed).toContain("/silent/abort-me");
    const aborted = (l: Record<string, unknown>) => l.status === 499 && l.route === "silent";
    for (let i = 0; i < 50 && !gw.logs.some(aborted); i++) await new Promise((resolve) => setTimeout(resolve, 10));
    const line = gw.logs.find(aborted);
    expect(line).toMatchObject({ route: "silent", method: "GET", upstreamStatus: null });
  });
});

describe("access log", () => {
  test("one JSON line per request with id, route, method, status, upstream status, duration and client; never a credential", async () => {
    const before = gw.logs.length;
    await send(gw.url, {
      path: "/echo/logged?token=should-not-appear",
      headers: { "x-request-id": "log-check-1", authorization: "Bearer secret-token-value", "x-api-key": "ck_secretkeyvalue" },
    });
    for (let i = 0; i < 50 && !gw.logs.slice(before).some((l) => l.reqId === "log-check-1"); i++)
      await new Promise((r) => setTimeout(r, 10));
    const lines = gw.logs.slice(before).filter((l) => l.reqId === "log-check-1");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ msg: "request", route: "echo", method: "GET", status: 200, upstreamStatus: 200, client: "127.0.0.1" });
    expect(typeof lines[0]!.ms).toBe("number");
    const all = gw.rawLogs.join("\n");
    expect(all).not.toContain("secret-token-value");
    expect(all).not.toContain("ck_secretkeyvalue");
    expect(all).not.toContain("should-not-appear");
  });

  test("answers of no route are logged and counted as unmatched", async () => {
    await send(gw.url, { path: "/nowhere", headers: { "x-request-id": "log-check-2" } });
    for (let i = 0; i < 50 && !gw.logs.some((l) => l.reqId === "log-check-2"); i++) await new Promise((r) => setTimeout(r, 10));
    expect(gw.logs.find((l) => l.reqId === "log-check-2")).toMatchObject({ route: "_unmatched", status: 404, upstreamStatus: null });
  });
});

describe("before a configuration is loaded", () => {
  test("every request is 503 and /readyz is 503; both turn once a state is applied", async () => {
    const empty = await startTestGateway();
    try {
      const answer = await send(empty.url, { path: "/echo/x" });
      expect(answer.status).toBe(503);
      expect(reasonOf(answer)).toBe("gateway_not_configured");
      expect((await fetch(`${empty.adminUrl}/readyz`)).status).toBe(503);
      expect((await fetch(`${empty.adminUrl}/healthz`)).status).toBe(200);
      empty.gateway.apply(stateFromYaml(`version: 1\nroutes:\n  - name: echo\n    path: /echo/*\n    upstream: ${upstream.url}\n`));
      expect((await fetch(`${empty.adminUrl}/readyz`)).status).toBe(200);
      expect(echoOf(await send(empty.url, { path: "/echo/x" })).url).toBe("/echo/x");
    } finally {
      await empty.close();
    }
  });
});
