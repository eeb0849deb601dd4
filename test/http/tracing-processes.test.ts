import { constants, publicEncrypt, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect as connectHttp2 } from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { runCli, startServe, type ServeProcess } from "../support/cli.js";
import { isBuilt } from "../support/config-process.js";
import { createTestDatabase, testProvider, type TestDatabase } from "../support/database.js";
import { startEchoUpstream, type EchoUpstream } from "../support/gateway.js";
import { freePort, revisionAt, startGatewayProcess, until, type GatewayProcess } from "../support/gateway-process.js";
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "../support/otlp-receiver.js";

/**
 * Tracing (docs/gateway.md, "Tracing"; docs/security.md, "Tracing") with
 * every part a real process: `gatehouse serve` exporting OTLP/JSON (its
 * platform as "gatehouse", its embedded gateway as "gatehouse-gateway"), a
 * `gatehouse gateway` exporting OTLP/protobuf, and one without the
 * OpenTelemetry variables. The test holds the OTLP receiver and the echo
 * upstream. Tracing does not touch storage: the file runs once, on SQLite.
 */
if (!isBuilt()) throw new Error("dist/ is not built (node scripts/build.mjs)");
const describeOnce = testProvider === "sqlite" ? describe : describe.skip;

const preload = pathToFileURL(join(process.cwd(), "test", "support", "loaded-modules.mjs")).href;

let db: TestDatabase;
let work: string;
let receiver: OtlpReceiver;
let echo: EchoUpstream;
let serve: ServeProcess;
let embedded: string;
/** Exports http/protobuf, and only when it stops (its batch delay is a minute). */
let exporting: GatewayProcess;
/** No OpenTelemetry variable. */
let quiet: GatewayProcess;
let org: string;
let adminKey: string;
let consumerKey: string;

/** Every value a request below carries that must never be an attribute, nor anywhere in an export. */
const secrets = {
  bearer: `bearer${randomBytes(12).toString("hex")}`,
  cookie: `cookie${randomBytes(12).toString("hex")}`,
  query: `query${randomBytes(12).toString("hex")}`,
  body: `body${randomBytes(12).toString("hex")}`,
  sealed: `sealed${randomBytes(12).toString("hex")}`,
  path: `path${randomBytes(12).toString("hex")}`,
};

const cliEnv = () => ({ DATABASE_URL: db.url, GATEHOUSE_DATA_DIR: db.dataDir });
function cli<T>(args: string[]): T {
  const answer = runCli([...args, "--json"], cliEnv());
  if (answer.status !== 0) throw new Error(`gatehouse ${args.join(" ")}: ${answer.status} ${answer.stderr}`);
  return JSON.parse(answer.stdout) as T;
}

/** A caller's trace context: a fresh trace id and parent id. */
function caller(sampled = true) {
  const traceId = randomBytes(16).toString("hex");
  const parentId = randomBytes(8).toString("hex");
  return { traceId, parentId, traceparent: `00-${traceId}-${parentId}-${sampled ? "01" : "00"}` };
}

const spansOf = (traceId: string) => receiver.spans.filter((span) => span.traceId === traceId);
const one = (spans: ReceivedSpan[], kind: ReceivedSpan["kind"], service?: string) => {
  const found = spans.filter((span) => span.kind === kind && (service === undefined || span.service === service));
  expect(found).toHaveLength(1);
  return found[0]!;
};
/** The traceparent the upstream received with the request that carried `marker`. */
const upstreamTraceparent = (marker: string) => {
  const seen = echo.seen.find((request) => request.headers["x-marker"] === marker);
  if (seen === undefined) throw new Error(`the upstream never saw ${marker}`);
  return { traceparent: String(seen.headers.traceparent ?? ""), tracestate: seen.headers.tracestate };
};
const traceparentSyntax = /^00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])$/;

const documentOf = (down: number) => `version: 1
plugins:
  - name: keyed
    type: api-key-auth
  - name: inject
    type: request-headers
    config:
      set:
        x-upstream-token: "\${secret:production/UPSTREAM_TOKEN}"
routes:
  - name: echo
    path: /echo/*
    upstream: ${echo.url}
    plugins: [inject]
  - name: keyed
    path: /keyed/*
    upstream: ${echo.url}
    plugins: [keyed]
  - name: down
    path: /down
    upstream: http://127.0.0.1:${down}
  - name: platform-health
    path: /grpc.health.v1.Health/Check
    upstream: ${serve.url}
`;

async function putSealedSecret(value: string): Promise<void> {
  const auth = { authorization: `Bearer ${adminKey}` };
  const key = (await (await fetch(`${serve.url}/organization/${org}/secrets/public-key`, { headers: auth })).json()) as {
    public_key_pem: string;
  };
  const sealed = publicEncrypt(
    { key: key.public_key_pem, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha256" },
    Buffer.from(value),
  ).toString("base64");
  const put = await fetch(`${serve.url}/organization/${org}/secrets`, {
    method: "PUT",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ name: "UPSTREAM_TOKEN", environment: "production", encrypted_value: sealed, sealed: true }),
  });
  if (put.status !== 200) throw new Error(`PUT secret: ${put.status} ${await put.text()}`);
}

/** What the exporting gateway was sent before it stopped: each request's caller context (or none). */
const sent: Record<string, ReturnType<typeof caller> | undefined> = {};

beforeAll(async () => {
  if (testProvider !== "sqlite") return;
  db = await createTestDatabase();
  work = mkdtempSync(join(tmpdir(), "gatehouse-tracing-"));
  receiver = await startOtlpReceiver();
  echo = await startEchoUpstream();
  const init = cli<{ organization_id: string; api_key: string }>(["init"]);
  org = init.organization_id;
  adminKey = init.api_key;
  serve = await startServe({
    ...cliEnv(),
    HOST: "127.0.0.1",
    GATEWAY_PORT: "0",
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_BSP_SCHEDULE_DELAY: "100",
  });
  embedded = /gateway\s+(http\S+) \(admin/.exec(serve.output())?.[1] ?? "";
  await putSealedSecret(secrets.sealed);
  consumerKey = cli<{ consumer_key: string }>(["consumers", "create", "--org", org, "--name", "partner"]).consumer_key;
  const put = await fetch(`${serve.url}/organization/${org}/config?strict=true`, {
    method: "PUT",
    headers: { authorization: `Bearer ${adminKey}`, "content-type": "application/yaml" },
    body: documentOf(await freePort()),
  });
  if (put.status !== 200) throw new Error(`PUT config: ${put.status} ${await put.text()}`);
  const revision = ((await put.json()) as { revision: number }).revision;
  const gatewayKey = () =>
    cli<{ gateway_key: string }>(["keys", "create", "--org", org, "--kind", "gateway", "--name", `gw-${randomBytes(3).toString("hex")}`])
      .gateway_key;
  const modules = (name: string) => ({ NODE_OPTIONS: `--import=${preload}`, LOADED_MODULES_FILE: join(work, `${name}.modules`) });
  [exporting, quiet] = await Promise.all([
    startGatewayProcess({
      id: "exporting",
      key: gatewayKey(),
      urls: [serve.url],
      cache: join(work, "exporting.json"),
      env: {
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/protobuf",
        OTEL_SERVICE_NAME: "edge-gateway",
        OTEL_BSP_SCHEDULE_DELAY: "60000",
        ...modules("exporting"),
      },
    }),
    startGatewayProcess({
      id: "quiet",
      key: gatewayKey(),
      urls: [serve.url],
      cache: join(work, "quiet.json"),
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: "", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "", ...modules("quiet") },
    }),
  ]);
  await until(
    async () => (await revisionAt(exporting)) >= revision && (await revisionAt(quiet)) >= revision,
    "both gateway processes at the revision",
  );

  // What the exporting gateway is sent; its spans leave when it stops (SIGTERM), below.
  const send = async (name: string, path: string, init: RequestInit = {}, context = caller()) => {
    sent[name] = context;
    const headers = new Headers(init.headers);
    headers.set("x-marker", name);
    if (context !== undefined) headers.set("traceparent", context.traceparent);
    await (await fetch(`${exporting.url}${path}`, { ...init, headers })).arrayBuffer();
  };
  await send("continued", "/echo/items", { headers: { tracestate: "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7" } });
  sent.started = undefined;
  await (await fetch(`${exporting.url}/echo/items`, { headers: { "x-marker": "started" } })).arrayBuffer();
  await (
    await fetch(`${exporting.url}/echo/items`, {
      headers: { "x-marker": "malformed", traceparent: caller().traceparent.toUpperCase(), tracestate: "congo=t61rcWkgMzE" },
    })
  ).arrayBuffer();
  await send("refused-by-plugin", "/keyed/orders");
  await send("target-down", "/down");
  await send("secret-bearing", `/echo/${secrets.path}?api_key=${secrets.query}&token=${secrets.query}`, {
    method: "POST",
    headers: { authorization: `Bearer ${secrets.bearer}`, cookie: `session=${secrets.cookie}`, "content-type": "text/plain" },
    body: `password=${secrets.body}`,
  });
  await send("consumer-key", `/keyed/orders?key=${consumerKey}`, { headers: { "x-api-key": consumerKey } });
  await exporting.stop();
}, 120_000);

afterAll(async () => {
  await quiet?.stop();
  await exporting?.stop();
  await serve?.stop();
  await echo?.close();
  await receiver?.close();
  await db?.drop();
  if (work) rmSync(work, { recursive: true, force: true });
}, 60_000);

describeOnce("a gateway exporting spans (gatehouse gateway, OTLP/protobuf)", () => {
  test("what it held is exported when it stops (SIGTERM), though its batch delay is a minute", () => {
    const exported = receiver.requests.filter((request) => request.contentType.startsWith("application/x-protobuf"));
    expect(exported.length).toBeGreaterThan(0);
    expect(exported.every((request) => request.path === "/v1/traces")).toBe(true);
    expect(receiver.spans.filter((span) => span.service === "edge-gateway").length).toBeGreaterThanOrEqual(7);
  });

  test("a caller's traceparent is continued: its span is the server span's parent, the client span is the upstream's", () => {
    const context = sent.continued!;
    const spans = spansOf(context.traceId).filter((span) => span.service === "edge-gateway");
    const server = one(spans, "server");
    const client = one(spans, "client");
    expect(server.parentSpanId).toBe(context.parentId);
    expect(client.parentSpanId).toBe(server.spanId);
    const upstream = upstreamTraceparent("continued");
    expect(upstream.traceparent).toBe(`00-${context.traceId}-${client.spanId}-01`);
    // The caller's tracestate travels on, with the trace.
    expect(upstream.tracestate).toBe("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
    expect(server.traceState).toBe("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
    expect(server).toMatchObject({
      name: "GET echo",
      status: 0,
      attributes: { "http.request.method": "GET", "http.route": "echo", "http.response.status_code": 200 },
    });
    expect(server.attributes).not.toHaveProperty("gatehouse.gateway.answered_by");
    expect(client).toMatchObject({
      name: "GET",
      attributes: {
        "http.request.method": "GET",
        "server.address": "127.0.0.1",
        "server.port": Number(new URL(echo.url).port),
        "http.response.status_code": 200,
      },
    });
  });

  test("without a traceparent a trace starts at the gateway, and the upstream's parent is its client span", () => {
    const [, traceId, parentId] = traceparentSyntax.exec(upstreamTraceparent("started").traceparent) ?? [];
    expect(traceId).toBeDefined();
    const spans = spansOf(traceId!);
    expect(one(spans, "server").parentSpanId).toBe("");
    expect(one(spans, "client").spanId).toBe(parentId);
  });

  test("a malformed traceparent (upper-case hex) starts a new trace, and its tracestate is not passed on", () => {
    const upstream = upstreamTraceparent("malformed");
    const [, traceId] = traceparentSyntax.exec(upstream.traceparent) ?? [];
    expect(upstream.tracestate).toBeUndefined();
    expect(one(spansOf(traceId!), "server").parentSpanId).toBe("");
  });

  test("a plugin that answers is named on the server span, and no target is tried", () => {
    const spans = spansOf(sent["refused-by-plugin"]!.traceId);
    expect(spans.map((span) => span.kind)).toEqual(["server"]);
    expect(spans[0]).toMatchObject({
      name: "GET keyed",
      status: 0,
      attributes: { "http.route": "keyed", "http.response.status_code": 401, "gatehouse.gateway.answered_by": "api-key-auth" },
    });
  });

  test("a try to a target that refuses the connection is a failed client span; the answer, a 502, is an error", () => {
    const spans = spansOf(sent["target-down"]!.traceId);
    const server = one(spans, "server");
    expect(server).toMatchObject({
      status: 2,
      attributes: { "http.route": "down", "http.response.status_code": 502, "error.type": "502" },
    });
    const tries = spans.filter((span) => span.kind === "client");
    expect(tries.length).toBeGreaterThanOrEqual(1);
    for (const attempt of tries) {
      expect(attempt).toMatchObject({ parentSpanId: server.spanId, status: 2, attributes: { "error.type": "refused" } });
      expect(attempt.attributes).not.toHaveProperty("http.response.status_code");
    }
  });
});

describeOnce("the platform exporting spans (gatehouse serve, OTLP/JSON)", () => {
  const post = (url: string, path: string, headers: Record<string, string>, body: BodyInit) =>
    fetch(`${url}${path}`, { method: "POST", headers, body }).then(async (response) => ({
      status: response.status,
      text: await response.text(),
    }));

  /** The platform's one span of a trace, once it has arrived. */
  async function platformSpan(traceId: string): Promise<ReceivedSpan> {
    await until(() => spansOf(traceId).some((span) => span.service === "gatehouse"), `the platform's span of ${traceId}`);
    // A later export would show a second span: give it the batch delay (100 ms) twice over.
    await new Promise((resolve) => setTimeout(resolve, 250));
    return one(spansOf(traceId), "server", "gatehouse");
  }

  test("one server span per RPC on every door (Connect, REST, gRPC, gRPC-Web), continuing the caller's trace", async () => {
    const connectCall = caller();
    const connect = await post(
      serve.url,
      "/svc.v1.ConfigService/GetConfig",
      { authorization: `Bearer ${adminKey}`, "content-type": "application/json", traceparent: connectCall.traceparent },
      JSON.stringify({ organizationId: org }),
    );
    expect(connect.status).toBe(200);
    expect(await platformSpan(connectCall.traceId)).toMatchObject({
      name: "svc.v1.ConfigService/GetConfig",
      parentSpanId: connectCall.parentId,
      status: 0,
      attributes: {
        "rpc.system": "connect_rpc",
        "rpc.service": "svc.v1.ConfigService",
        "rpc.method": "GetConfig",
        "gatehouse.rpc.protocol": "connect",
        "gatehouse.rpc.code": "ok",
      },
    });

    const restCall = caller();
    const rest = await fetch(`${serve.url}/organization/${org}/config`, {
      headers: { authorization: `Bearer ${adminKey}`, traceparent: restCall.traceparent },
    });
    expect(rest.status).toBe(200);
    const restSpan = await platformSpan(restCall.traceId);
    expect(restSpan).toMatchObject({
      parentSpanId: restCall.parentId,
      attributes: {
        "rpc.system": "connect_rpc",
        "rpc.service": "svc.v1.ConfigService",
        "rpc.method": "GetConfig",
        "gatehouse.rpc.protocol": "rest",
        "gatehouse.rpc.code": "ok",
        "http.request.method": "GET",
      },
    });
    // The REST pattern, never the path as sent.
    expect(restSpan.attributes["http.route"]).toMatch(/^\/organization\/\{[a-z_]+\}\/config$/);

    const grpcCall = caller();
    const grpcStatus = await new Promise<string>((resolve, reject) => {
      const session = connectHttp2(serve.grpcUrl);
      session.on("error", reject);
      const stream = session.request({
        ":method": "POST",
        ":path": "/grpc.health.v1.Health/Check",
        "content-type": "application/grpc",
        te: "trailers",
        traceparent: grpcCall.traceparent,
      });
      let status = "";
      stream.on("response", (headers) => {
        if (headers["grpc-status"] !== undefined) status = String(headers["grpc-status"]);
      });
      stream.on("trailers", (trailers) => {
        status = String(trailers["grpc-status"]);
      });
      stream.on("data", () => {});
      stream.on("end", () => {
        session.close();
        resolve(status);
      });
      stream.on("error", reject);
      stream.end(Buffer.alloc(5));
    });
    expect(grpcStatus).toBe("0");
    expect(await platformSpan(grpcCall.traceId)).toMatchObject({
      name: "grpc.health.v1.Health/Check",
      parentSpanId: grpcCall.parentId,
      attributes: { "rpc.system": "grpc", "rpc.grpc.status_code": 0, "gatehouse.rpc.protocol": "grpc", "gatehouse.rpc.code": "ok" },
    });

    const webCall = caller();
    const web = await fetch(`${serve.url}/grpc.health.v1.Health/Check`, {
      method: "POST",
      headers: { "content-type": "application/grpc-web+proto", traceparent: webCall.traceparent },
      body: new Uint8Array(5),
    });
    expect(web.status).toBe(200);
    await web.arrayBuffer();
    expect(await platformSpan(webCall.traceId)).toMatchObject({
      attributes: {
        "rpc.system": "grpc",
        "rpc.service": "grpc.health.v1.Health",
        "rpc.method": "Check",
        "gatehouse.rpc.protocol": "grpc_web",
      },
    });
  });

  test("a refused call is one span with its code; the caller's mistake is not the server's error", async () => {
    const call = caller();
    const refused = await post(
      serve.url,
      "/svc.v1.ConfigService/GetConfig",
      { authorization: `Bearer ${secrets.bearer}`, "content-type": "application/json", traceparent: call.traceparent },
      JSON.stringify({ organizationId: org }),
    );
    expect(refused.status).toBe(401);
    expect(await platformSpan(call.traceId)).toMatchObject({
      status: 0,
      attributes: { "gatehouse.rpc.code": "unauthenticated", "rpc.connect_rpc.error_code": "unauthenticated" },
    });
  });

  test("without a traceparent the platform's span starts a trace", async () => {
    const before = new Set(receiver.spans.map((span) => span.spanId));
    const answer = await post(serve.url, "/grpc.health.v1.Health/Check", { "content-type": "application/json", "x-marker": "root" }, "{}");
    expect(answer.status).toBe(200);
    await until(
      () => receiver.spans.some((span) => !before.has(span.spanId) && span.attributes["rpc.method"] === "Check"),
      "the health check's span",
    );
    const fresh = receiver.spans.filter((span) => !before.has(span.spanId) && span.attributes["rpc.method"] === "Check");
    expect(fresh).toHaveLength(1);
    expect(fresh[0]!.parentSpanId).toBe("");
  });

  test("through the embedded gateway to the platform, one trace: gateway server span, its try, the platform's span under the try", async () => {
    const call = caller();
    const answer = await post(
      embedded,
      "/grpc.health.v1.Health/Check",
      { "content-type": "application/json", traceparent: call.traceparent },
      "{}",
    );
    expect(answer.status).toBe(200);
    const platform = await platformSpan(call.traceId);
    await until(() => spansOf(call.traceId).length >= 3, "the embedded gateway's spans");
    const spans = spansOf(call.traceId);
    const server = one(spans, "server", "gatehouse-gateway");
    const client = one(spans, "client", "gatehouse-gateway");
    expect(server).toMatchObject({
      parentSpanId: call.parentId,
      attributes: { "http.route": "platform-health", "http.request.method": "POST" },
    });
    expect(client.parentSpanId).toBe(server.spanId);
    expect(platform.parentSpanId).toBe(client.spanId);
    expect(platform.attributes).toMatchObject({ "rpc.service": "grpc.health.v1.Health", "rpc.method": "Check" });
  });

  test("the platform's calls carrying credentials, cookies and query strings", async () => {
    const calls = [caller(), caller()];
    const connect = await post(
      serve.url,
      "/svc.v1.ConfigService/GetConfig",
      {
        authorization: `Bearer ${adminKey}`,
        cookie: `gatehouse_session=${secrets.cookie}`,
        "content-type": "application/json",
        traceparent: calls[0]!.traceparent,
      },
      JSON.stringify({ organizationId: org }),
    );
    expect(connect.status).toBe(200);
    const rest = await fetch(`${serve.url}/organization/${org}/secrets?env=${secrets.query}`, {
      headers: { authorization: `Bearer ${adminKey}`, traceparent: calls[1]!.traceparent },
    });
    expect(rest.status).toBe(200);
    for (const call of calls) await platformSpan(call.traceId);
  });
});

describeOnce("nothing secret is ever an attribute", () => {
  test("no attribute of any exported span, and no byte of any export, holds a credential, cookie, query, body, path or secret value", async () => {
    // Every request above that carried one has been exported: the exporting gateway's at its stop, the platform's awaited.
    const carriers = ["secret-bearing", "consumer-key"].map((name) => spansOf(sent[name]!.traceId));
    expect(carriers.every((spans) => spans.some((span) => span.kind === "server"))).toBe(true);
    expect(one(carriers[0]!, "client").attributes["http.response.status_code"]).toBe(200);
    // The upstream did get them: the test sent what it thinks it sent.
    const upstream = echo.seen.find((request) => request.headers["x-marker"] === "secret-bearing")!;
    expect(upstream.headers["x-upstream-token"]).toBe(secrets.sealed);
    expect(upstream.body).toContain(secrets.body);
    const forbidden = [...Object.values(secrets), consumerKey, adminKey, org];
    const values = receiver.spans.flatMap((span) => [span.name, span.traceState, ...Object.values(span.attributes).map(String)]);
    expect(values.filter((value) => forbidden.some((secret) => value.includes(secret)))).toEqual([]);
    const bodies = receiver.requests.map((request) => request.body);
    expect(forbidden.filter((secret) => bodies.some((body) => body.includes(secret)))).toEqual([]);
  });
});

describeOnce("a gateway without the OpenTelemetry variables", () => {
  test("continues a caller's trace with a span id of its own, keeping the sampled flag and the tracestate", async () => {
    for (const sampled of [true, false]) {
      const context = caller(sampled);
      const marker = `quiet-${context.traceId}`;
      const response = await fetch(`${quiet.url}/echo/items`, {
        headers: { traceparent: context.traceparent, tracestate: "congo=t61rcWkgMzE", "x-marker": marker },
      });
      expect(response.status).toBe(200);
      const upstream = upstreamTraceparent(marker);
      const [, traceId, parentId, flags] = traceparentSyntax.exec(upstream.traceparent) ?? [];
      expect(traceId).toBe(context.traceId);
      expect(parentId).not.toBe(context.parentId);
      expect(parentId).not.toBe("0000000000000000");
      expect(flags).toBe(sampled ? "01" : "00");
      expect(upstream.tracestate).toBe("congo=t61rcWkgMzE");
    }
  });

  test("starts a new trace for a request without a valid traceparent, a different one each time", async () => {
    const traceIds = new Set<string>();
    for (const traceparent of [undefined, undefined, "00-ffffffffffffffffffffffffffffffff-0000000000000000-01"]) {
      const marker = `quiet-new-${traceIds.size}-${randomBytes(4).toString("hex")}`;
      const headers: Record<string, string> = { "x-marker": marker };
      if (traceparent !== undefined) headers.traceparent = traceparent;
      expect((await fetch(`${quiet.url}/echo/items`, { headers })).status).toBe(200);
      const [, traceId, , flags] = traceparentSyntax.exec(upstreamTraceparent(marker).traceparent) ?? [];
      expect(traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(traceId).not.toBe("ffffffffffffffffffffffffffffffff");
      // Nothing records it: the new trace is not sampled.
      expect(flags).toBe("00");
      traceIds.add(traceId!);
    }
    expect(traceIds.size).toBe(3);
  });

  test("exports nothing and loads no module of the OpenTelemetry SDK (the gateway that exports does)", async () => {
    const context = caller();
    expect((await fetch(`${quiet.url}/echo/items`, { headers: { traceparent: context.traceparent } })).status).toBe(200);
    await quiet.stop();
    expect(spansOf(context.traceId)).toEqual([]);
    const loaded = (name: string) => {
      const file = join(work, `${name}.modules`);
      expect(existsSync(file)).toBe(true);
      return readFileSync(file, "utf8").split("\n");
    };
    // prom-client (metrics) brings @opentelemetry/api, which is no part of the SDK.
    const sdkModules = (files: string[]) =>
      [...new Set(files.flatMap((file) => /node_modules\/(@opentelemetry\/[^/]+)\//.exec(file)?.[1] ?? []))].filter(
        (name) => name !== "@opentelemetry/api",
      );
    expect(sdkModules(loaded("quiet"))).toEqual([]);
    expect(sdkModules(loaded("exporting"))).toEqual(
      expect.arrayContaining(["@opentelemetry/sdk-trace-base", "@opentelemetry/exporter-trace-otlp-proto", "@opentelemetry/resources"]),
    );
    expect(sdkModules(loaded("exporting"))).not.toContain("@opentelemetry/exporter-trace-otlp-http");
  });
});

describeOnce("the variables are checked at start", () => {
  const misconfigured = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4317", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" };

  test("an OTLP protocol other than http/protobuf or http/json stops gatehouse gateway and gatehouse serve, naming the variable", () => {
    const gateway = runCli(["gateway"], { ...cliEnv(), ...misconfigured, GATEHOUSE_GATEWAY_KEY: "gw_unused", GATEWAY_PORT: "0" });
    expect(gateway.status).toBe(1);
    expect(gateway.stderr).toContain("OTEL_EXPORTER_OTLP_PROTOCOL");
    const served = runCli(["serve"], { ...cliEnv(), ...misconfigured, PORT: "0", GRPC_PORT: "0", SAMPLE_PORT: "0", GATEWAY_PORT: "off" });
    expect(served.status).not.toBe(0);
    expect(served.stderr).toContain("OTEL_EXPORTER_OTLP_PROTOCOL");
  });

  test("operator commands export nothing and run whatever the variables say", () => {
    const listed = runCli(["keys", "list", "--org", org, "--json"], { ...cliEnv(), ...misconfigured });
    expect(listed.status).toBe(0);
  });
});
