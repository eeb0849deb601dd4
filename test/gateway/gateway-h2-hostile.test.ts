import {
  connect as http2Connect,
  createServer as createH2Server,
  type ClientHttp2Session,
  type Http2Server,
  type ServerHttp2Stream,
} from "node:http2";
import { connect as tcpConnect, type AddressInfo } from "node:net";
import { grpcTimeoutMs } from "../../src/gateway/proxy/grpc.js";
import { reasonOf, send, startTestGateway, stateFromYaml, type TestGateway } from "../support/gateway.js";
import { rawExchange, startWitness, type Witness } from "../support/raw-http.js";

/**
 * Hostile HTTP/2 and gRPC clients (docs/security.md, "TLS, HTTP/2 and gRPC at
 * the gateway"; docs/gateway.md, "The edge" and "gRPC"): streams that would
 * hold more requests than a client's connection budget, sessions that say
 * nothing, bodies that stop, unknown methods, deadlines too far to time, an
 * upstream that takes two streams at a time, a gRPC body over the route's
 * limit, and bytes that are not TLS on the TLS port. A witness upstream
 * records what the gateway forwards.
 */
let witness: Witness;
/** Small per-client budget; TLS port; a head timeout long enough that only the fix closes a failed handshake early. */
let tight: TestGateway;
/** Short head, request and idle times. */
let quick: TestGateway;
/** Default limits, for gRPC. */
let grpcGw: TestGateway;
let upstream: GrpcUpstream;

/** Requests the witness holds unanswered, by path prefix /hold. */
const held: (() => void)[] = [];
/** Bodies the witness read to their end, and those cut short. */
const uploads = { complete: 0, aborted: 0 };

const routesTo = (url: string) => `version: 1
routes:
  - name: open
    path: /*
    upstream: ${url}
`;

interface GrpcUpstream {
  url: string;
  server: Http2Server;
  /** Sessions the gateway opened to it. */
  sessions: number;
  /** Streams of /pool.v1.Pool/Watch open now, and at most at once. */
  watching: number;
  mostWatching: number;
  /** What became of each Upload call: its body ended ("complete") or the stream was reset (its code). */
  uploads: (string | number)[];
  /** Calls of /pool.v1.Pool/Slow answered. */
  slow: number;
}

/** One gRPC message: the 5-byte prefix (uncompressed, length) and the bytes. */
function grpcFrame(bytes: Buffer): Buffer {
  const frame = Buffer.alloc(5 + bytes.length);
  frame.writeUInt32BE(bytes.length, 1);
  bytes.copy(frame, 5);
  return frame;
}

/**
 * An h2c gRPC-shaped server that takes two streams at a time per session (SETTINGS_MAX_CONCURRENT_STREAMS 2).
 * Watch: answers its head at once, and its message and OK once six Watch calls are open at the same time.
 * Upload: answers when the body ends (or at once with `x-head-first`). Slow: answers after 300 ms.
 */
async function startGrpcUpstream(): Promise<GrpcUpstream> {
  const server = createH2Server({ settings: { maxConcurrentStreams: 2 } });
  const state: GrpcUpstream = { url: "", server, sessions: 0, watching: 0, mostWatching: 0, uploads: [], slow: 0 };
  const waiting: ServerHttp2Stream[] = [];
  server.on("session", (session) => {
    state.sessions++;
    session.on("error", () => {});
  });
  server.on("stream", (stream, headers) => {
    stream.on("error", () => {});
    const path = headers[":path"];
    const ok = () => {
      if (stream.closed || stream.destroyed) return;
      stream.write(grpcFrame(Buffer.from("ok")));
      stream.end();
    };
    const head = () => stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
    stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
    if (path === "/pool.v1.Pool/Watch") {
      stream.resume();
      head();
      state.watching++;
      state.mostWatching = Math.max(state.mostWatching, state.watching);
      stream.once("close", () => state.watching--);
      waiting.push(stream);
      if (state.watching >= 6) for (const s of waiting.splice(0)) if (!s.closed) s.write(grpcFrame(Buffer.from("ok")), () => s.end());
      return;
    }
    if (path === "/pool.v1.Pool/Upload") {
      if (headers["x-head-first"] === "1") head();
      let bytes = 0;
      stream.on("data", (chunk: Buffer) => {
        bytes += chunk.length;
      });
      // 'end' also follows a reset: only a stream still open after it ended with END_STREAM.
      stream.once("end", () =>
        setImmediate(() => {
          if (stream.closed || stream.destroyed) return;
          if (!stream.headersSent) head();
          ok();
        }),
      );
      stream.once("close", () => state.uploads.push(stream.rstCode === 0 ? `complete ${bytes}` : stream.rstCode));
      return;
    }
    stream.resume();
    setTimeout(() => {
      if (stream.closed) return;
      state.slow++;
      head();
      ok();
    }, 300);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return state;
}

beforeAll(async () => {
  witness = await startWitness();
  witness.handler = (req, res) => {
    const answer = () => {
      const body = JSON.stringify({ method: req.method, url: req.url });
      if (!res.headersSent) res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
      res.end(body);
    };
    if (req.url?.startsWith("/upload")) {
      req.on("aborted", () => uploads.aborted++);
      req.resume();
      req.on("end", () => {
        uploads.complete++;
        answer();
      });
      return;
    }
    req.resume();
    if (req.url?.startsWith("/hold")) held.push(answer);
    else answer();
  };
  upstream = await startGrpcUpstream();
  tight = await startTestGateway(
    { tlsPort: 0, limits: { maxConnectionsPerClient: 4, headerTimeoutMs: 30_000 } },
    stateFromYaml(routesTo(witness.url)),
  );
  quick = await startTestGateway(
    { limits: { headerTimeoutMs: 1_000, requestTimeoutMs: 1_500 }, http2IdleTimeoutMs: 1_500 },
    stateFromYaml(routesTo(witness.url)),
  );
  grpcGw = await startTestGateway(
    {},
    stateFromYaml(`version: 1
upstreams:
  - name: grpc-pool
    targets:
      - url: ${upstream.url}
    health_check: {passive: {unhealthy_after: 1}}
    retries: 0
routes:
  - name: pool
    path: /pool.v1.Pool/*
    upstream: grpc-pool
    max_body_bytes: 100
`),
  );
});
afterAll(async () => {
  for (const release of held.splice(0)) release();
  await Promise.all([tight?.close(), quick?.close(), grpcGw?.close()]);
  await witness?.close();
  await new Promise<void>((resolve) => (upstream ? upstream.server.close(() => resolve()) : resolve()));
});

/** Polls `check` until it holds, for up to `ms`. */
async function until(check: () => boolean, ms = 20_000, what = "a condition"): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** `promise`, or a failure saying `what` was kept when it has not settled within `ms`. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} was kept`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

interface StreamOutcome {
  status: number | undefined;
  headers: Record<string, unknown>;
  trailers: Record<string, unknown>;
  body: string;
  /** The RST_STREAM code the stream closed with (0: none). */
  rstCode: number;
}

/** One stream on a session, read until it closes. `body`: sent, then the stream ended unless `keepOpen`. */
function h2Stream(
  session: ClientHttp2Session,
  headers: Record<string, string>,
  options: { body?: Buffer | string; keepOpen?: boolean; opened?: (stream: ReturnType<ClientHttp2Session["request"]>) => void } = {},
): Promise<StreamOutcome> {
  return new Promise((resolve) => {
    const stream = session.request({ ":path": "/", ...headers }, { endStream: options.body === undefined && options.keepOpen !== true });
    const outcome: StreamOutcome = { status: undefined, headers: {}, trailers: {}, body: "", rstCode: 0 };
    stream.on("response", (h) => {
      outcome.status = Number(h[":status"]);
      outcome.headers = h;
    });
    stream.on("trailers", (t) => {
      outcome.trailers = t;
    });
    stream.on("data", (chunk: Buffer) => {
      outcome.body += chunk.toString("latin1");
    });
    stream.on("error", () => {});
    stream.on("close", () => resolve({ ...outcome, rstCode: stream.rstCode ?? 0 }));
    if (options.body !== undefined) {
      if (options.keepOpen) stream.write(options.body);
      else stream.end(options.body);
    }
    options.opened?.(stream);
  });
}

function sessionClosed(session: ClientHttp2Session): Promise<void> {
  return new Promise((resolve) => {
    if (session.closed || session.destroyed) resolve();
    session.once("close", () => resolve());
  });
}

const get = (path: string, method = "GET") => ({ ":method": method, ":path": path, ":authority": "gw.test" });

describe("HTTP/2 streams count against the connection budgets", () => {
  test("streams beyond the client's budget are REFUSED_STREAM; the admin port and other clients are served; then the client is again", async () => {
    const session = http2Connect(tight.url);
    session.on("error", () => {});
    try {
      const before = held.length;
      // One connection of a client allowed four: it holds four requests at once, as four HTTP/1.1 connections would.
      const calls = Array.from({ length: 10 }, (_, i) => h2Stream(session, get(`/hold/${i}`)));
      const refused: StreamOutcome[] = [];
      for (const call of calls) void call.then((outcome) => outcome.rstCode === 7 && refused.push(outcome));
      await until(() => refused.length === 6 && held.length - before === 4, 20_000, "4 held and 6 refused streams");
      // Refused streams never reached the upstream.
      expect(witness.requests.filter((r) => r.url.startsWith("/hold/")).length).toBe(4);
      expect((await fetch(`${tight.adminUrl}/healthz`)).status).toBe(200);
      const metrics = await (await fetch(`${tight.adminUrl}/metrics`)).text();
      expect(metrics).toMatch(/gatehouse_gateway_connections_refused_total\{reason="client_streams"\} ([6-9]|\d{2,})\n/);
      // Another client is served, over HTTP/1.1 and HTTP/2.
      expect((await send(tight.url, { path: "/other", localAddress: "127.0.0.2", headers: { host: "gw.test" } })).status).toBe(200);
      const port = Number(new URL(tight.url).port);
      const other = http2Connect(tight.url, { createConnection: () => tcpConnect({ host: "127.0.0.1", port, localAddress: "127.0.0.3" }) });
      expect((await h2Stream(other, get("/other-h2"))).status).toBe(200);
      other.close();
      for (const release of held.splice(before)) release();
      const outcomes = await Promise.all(calls);
      expect(outcomes.filter((o) => o.status === 200).length).toBe(4);
      // The streams ended: the same client, on the same connection, is served again, several at once.
      const again = await Promise.all([1, 2, 3].map((i) => h2Stream(session, get(`/again/${i}`))));
      expect(again.map((o) => o.status)).toEqual([200, 200, 200]);
    } finally {
      session.destroy();
    }
  });
});

describe("silent HTTP/2 sessions and stalled streams", () => {
  test("a session that opens no stream is closed after the head timeout", async () => {
    const session = http2Connect(quick.url);
    session.on("error", () => {});
    await new Promise<void>((resolve) => session.once("connect", () => resolve()));
    const started = Date.now();
    await within(sessionClosed(session), 20_000, "the silent session");
    // The head timeout is 1 s; Node's own session timeout (30 s) would be the only other end.
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  test("a session with no stream open is closed after the idle time, however often it PINGs", async () => {
    const session = http2Connect(quick.url);
    session.on("error", () => {});
    expect((await h2Stream(session, get("/idle"))).status).toBe(200);
    const pings = setInterval(() => {
      if (!session.closed && !session.destroyed) session.ping(() => {});
    }, 200);
    try {
      await within(sessionClosed(session), 20_000, "the idle session");
    } finally {
      clearInterval(pings);
      session.destroy();
    }
  });

  test("a request body that stops is reset with CANCEL; the upstream never sees it complete", async () => {
    const session = http2Connect(quick.url);
    session.on("error", () => {});
    const completeBefore = uploads.complete;
    try {
      const outcome = await within(
        h2Stream(session, { ...get("/upload", "POST"), "content-length": "100" }, { body: "0123456789", keepOpen: true }),
        20_000,
        "the stalled stream",
      );
      expect(outcome.rstCode).toBe(8); // NGHTTP2_CANCEL
      await until(() => uploads.aborted > 0 || witness.requests.every((r) => r.url !== "/upload"), 10_000, "the upstream request to end");
      expect(uploads.complete).toBe(completeBefore);
      // The session itself stays usable.
      expect((await h2Stream(session, get("/after-stall"))).status).toBe(200);
    } finally {
      session.destroy();
    }
  });
});

describe("methods on HTTP/2 as on HTTP/1.1", () => {
  test("a method Node does not know is 400 method_unknown, never forwarded", async () => {
    const session = http2Connect(tight.url);
    session.on("error", () => {});
    try {
      const outcome = await h2Stream(session, get("/unknown-method", "FROBNICATE"));
      expect(outcome.status).toBe(400);
      expect(reasonOf({ status: 400, headers: {}, text: outcome.body, json: JSON.parse(outcome.body) as Record<string, unknown> })).toBe(
        "method_unknown",
      );
      // A registered method that is not common still passes.
      expect((await h2Stream(session, get("/propfind", "PROPFIND"))).status).toBe(200);
    } finally {
      session.close();
    }
    expect(witness.received()).not.toContain("FROBNICATE");
    expect(witness.received()).toContain("PROPFIND /propfind");
  });

  test("CONNECT and TRACE are 405 method_not_allowed on HTTP/2 as on HTTP/1.1, never forwarded", async () => {
    const session = http2Connect(tight.url);
    session.on("error", () => {});
    try {
      const tunnel = await new Promise<StreamOutcome>((resolve) => {
        const stream = session.request({ ":method": "CONNECT", ":authority": "victim.test:443" });
        const outcome: StreamOutcome = { status: undefined, headers: {}, trailers: {}, body: "", rstCode: 0 };
        stream.on("response", (h) => {
          outcome.status = Number(h[":status"]);
          outcome.headers = h;
        });
        stream.on("data", (chunk: Buffer) => {
          outcome.body += chunk.toString("latin1");
        });
        stream.on("error", () => {});
        stream.on("close", () => resolve(outcome));
        stream.end();
      });
      expect(tunnel.status).toBe(405);
      expect(JSON.parse(tunnel.body)).toMatchObject({ code: "unimplemented" });
      expect(tunnel.body).toContain("method_not_allowed");
      const trace = await h2Stream(session, get("/trace-me", "TRACE"));
      expect(trace.status).toBe(405);
      expect(trace.body).toContain("method_not_allowed");
    } finally {
      session.close();
    }
    const http1Connect = await rawExchange(tight.url, ["CONNECT victim.test:443 HTTP/1.1\r\nHost: victim.test:443\r\n\r\n"]);
    expect(http1Connect.text).toMatch(/^HTTP\/1\.1 405 /);
    expect(http1Connect.text).toContain("method_not_allowed");
    expect((await send(tight.url, { method: "TRACE", path: "/trace-me", headers: { host: "gw.test" } })).status).toBe(405);
    expect(witness.received()).not.toMatch(/CONNECT |TRACE /);
  });
});

describe("gRPC", () => {
  function call(
    session: ClientHttp2Session,
    path: string,
    headers: Record<string, string> = {},
    body: Buffer | string = grpcFrame(Buffer.from("hi")),
  ): Promise<StreamOutcome> {
    return h2Stream(
      session,
      { ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...headers },
      { body },
    );
  }
  const statusOf = (o: StreamOutcome) => (o.trailers["grpc-status"] ?? o.headers["grpc-status"]) as string | undefined;

  test("a grpc-timeout beyond what a timer holds is no deadline, not one already passed", async () => {
    expect(grpcTimeoutMs("99999999H")).toBeUndefined();
    expect(grpcTimeoutMs("597H")).toBeUndefined(); // 2,149,200,000 ms > 2^31-1
    expect(grpcTimeoutMs("596H")).toBe(596 * 3_600_000);
    expect(grpcTimeoutMs("300m")).toBe(300);
    const session = http2Connect(grpcGw.url);
    session.on("error", () => {});
    try {
      const outcome = await call(session, "/pool.v1.Pool/Slow", { "grpc-timeout": "99999999H" });
      expect(statusOf(outcome)).toBe("0");
    } finally {
      session.close();
    }
  });

  test("six server-streaming calls to an upstream that takes two streams per connection all complete", async () => {
    const sessionsBefore = upstream.sessions;
    const clients = Array.from({ length: 6 }, () => http2Connect(grpcGw.url));
    for (const client of clients) client.on("error", () => {});
    try {
      const outcomes = await Promise.all(clients.map((client) => call(client, "/pool.v1.Pool/Watch")));
      expect(outcomes.map(statusOf)).toEqual(["0", "0", "0", "0", "0", "0"]);
      expect(upstream.mostWatching).toBe(6);
      const opened = upstream.sessions - sessionsBefore;
      expect(opened).toBeGreaterThanOrEqual(2);
      expect(opened).toBeLessThanOrEqual(16);
    } finally {
      for (const client of clients) client.destroy();
    }
  });

  test("a body over max_body_bytes: the upstream's stream is cancelled, the call ends RESOURCE_EXHAUSTED, the target stays healthy", async () => {
    const session = http2Connect(grpcGw.url);
    session.on("error", () => {});
    try {
      const big = grpcFrame(Buffer.alloc(300, 0x61));
      // Before the upstream answered: Trailers-Only.
      const before = upstream.uploads.length;
      const early = await call(session, "/pool.v1.Pool/Upload", {}, big);
      expect(early.status).toBe(200);
      expect(early.headers["grpc-status"]).toBe("8");
      // After its head: in the trailers.
      const late = await call(session, "/pool.v1.Pool/Upload", { "x-head-first": "1" }, big);
      expect(statusOf(late)).toBe("8");
      await until(() => upstream.uploads.length - before >= 2, 10_000, "the upstream's streams to end");
      // The upstream never saw either call complete: both were cancelled (RST_STREAM CANCEL).
      expect(upstream.uploads.slice(before)).toEqual([8, 8]);
      // A client that cancels its call is not the target's failure either.
      await h2Stream(
        session,
        { ":method": "POST", ":path": "/pool.v1.Pool/Upload", "content-type": "application/grpc", te: "trailers" },
        { body: "x", keepOpen: true, opened: (stream) => setTimeout(() => stream.close(8), 200) },
      );
      // Passive health takes a target out after one failure: it is still in.
      const small = await call(session, "/pool.v1.Pool/Upload", {}, grpcFrame(Buffer.from("small")));
      expect(statusOf(small)).toBe("0");
      expect(upstream.uploads.at(-1)).toBe("complete 10");
    } finally {
      session.close();
    }
  });
});

describe("TLS", () => {
  test("bytes that are not TLS on the TLS port: the connection is closed at once, not at the handshake timeout", async () => {
    const socket = tcpConnect(tight.tlsPort!, "127.0.0.1");
    socket.on("error", () => {});
    socket.resume();
    const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
    socket.write("GET / HTTP/1.1\r\nHost: gw.test\r\n\r\n");
    // The handshake timeout of this gateway is 30 s.
    try {
      await within(closed, 10_000, "the socket");
    } finally {
      socket.destroy();
    }
  });
});
