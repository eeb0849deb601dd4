import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { connect as http2Connect } from "node:http2";
import { createServer, type AddressInfo } from "node:net";
import { join } from "node:path";
import {
  GetConfigRequestSchema,
  GetConfigResponseSchema,
  WatchConfigRequestSchema,
  WatchConfigResponseSchema,
} from "../../gen/svc/v1/config_pb.js";
import { applyOk } from "../support/config-documents.js";
import { startTestGateway, stateFromYaml, type TestGateway } from "../support/gateway.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * gRPC through the gateway (docs/gateway.md, "gRPC"), with two clients
 * nobody here wrote, `buf curl` and Python's grpcio, against the platform's
 * own gRPC port (h2c) as the upstream: unary, server streaming (a config
 * revision made while the stream is open arrives through the gateway) and
 * bidirectional streaming (buf curl reads the schema through server
 * reflection, itself a bidi stream, proxied). The gateway's own refusals are
 * Trailers-Only gRPC statuses.
 */
let server: TestServer;
let gw: TestGateway;
let closedPort: number;

const buf = join(process.cwd(), "node_modules", ".bin", "buf");
/** Debian's interpreter, where python3-grpcio is installed (scripts/ensure-protocol-clients.mjs). */
const python = existsSync("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
const grpcCall = join(process.cwd(), "test", "support", "grpc_call.py");

async function freeClosedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const port = (probe.address() as AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

beforeAll(async () => {
  server = await startTestServer();
  closedPort = await freeClosedPort();
  const upstream = server.grpcUrl;
  gw = await startTestGateway(
    {},
    stateFromYaml(`version: 1
plugins:
  - name: keys
    type: api-key-auth
  - name: once
    type: rate-limit
    config: {requests: 1, window_seconds: 60}
rules:
  - name: no-delete
    match: {path_prefix: /svc.v1.SecretsService/DeleteSecret}
    action: deny
routes:
  - name: config
    path: /svc.v1.ConfigService/*
    upstream: ${upstream}
  - name: reflection
    path: /grpc.reflection.v1.ServerReflection/*
    upstream: ${upstream}
  - name: secrets
    path: /svc.v1.SecretsService/*
    upstream: ${upstream}
    rules: [no-delete]
  - name: identity
    path: /svc.v1.IdentityService/*
    upstream: ${upstream}
    plugins: [keys]
  - name: limited
    path: /svc.v1.ConfigService/ListConfigRevisions
    upstream: ${upstream}
    plugins: [once]
  - name: dead
    path: /dead.v1.Dead/*
    upstream: http://127.0.0.1:${closedPort}
`),
  );
});
afterAll(async () => {
  await gw?.close();
  await server?.close();
});

function bufCurl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      buf,
      ["curl", "--protocol", "grpc", "--http2-prior-knowledge", ...args],
      { encoding: "utf8", timeout: 60_000 },
      (error, stdout, stderr) => resolve({ code: error ? (typeof error.code === "number" ? error.code : 1) : 0, stdout, stderr }),
    );
  });
}

interface PythonResult {
  code: string;
  details: string;
  responses: string[];
  trailing: [string, string][];
}

function grpcio(call: {
  method: string;
  kind: "unary" | "server_stream";
  request: Uint8Array;
  metadata?: [string, string][];
  messages?: number;
  timeout?: number;
}): Promise<PythonResult> {
  const target = new URL(gw.url).host;
  const argument = JSON.stringify({ ...call, target, request: Buffer.from(call.request).toString("hex"), metadata: call.metadata ?? [] });
  return new Promise((resolve, reject) => {
    execFile(python, [grpcCall, argument], { encoding: "utf8", timeout: 60_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`grpc_call.py failed: ${stderr || error.message}`));
      else resolve(JSON.parse(stdout) as PythonResult);
    });
  });
}

const bearer = () => [["authorization", `Bearer ${server.credentials.api_key}`]] as [string, string][];
const getConfigRequest = () =>
  toBinary(GetConfigRequestSchema, create(GetConfigRequestSchema, { organizationId: server.credentials.organization_id }));

describe("buf curl through the gateway", () => {
  test("unary, the schema read through server reflection (a bidirectional stream) proxied by the gateway", async () => {
    const result = await bufCurl([
      "-H",
      `Authorization: Bearer ${server.credentials.api_key}`,
      "-d",
      JSON.stringify({ organizationId: server.credentials.organization_id }),
      `${gw.url}/svc.v1.ConfigService/GetConfig`,
    ]);
    expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: "" });
    expect(JSON.parse(result.stdout)).toHaveProperty("yaml");
  });

  test("server streaming: a revision made while the stream is open arrives through the gateway at once", async () => {
    const child = spawn(buf, [
      "curl",
      "--protocol",
      "grpc",
      "--http2-prior-knowledge",
      "--schema",
      "proto",
      "-H",
      `Authorization: Bearer ${server.credentials.api_key}`,
      "-d",
      JSON.stringify({ organizationId: server.credentials.organization_id }),
      `${gw.url}/svc.v1.ConfigService/WatchConfig`,
    ]);
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString("utf8");
    });
    const until = async (what: RegExp) => {
      const deadline = Date.now() + 20_000;
      while (!what.test(out)) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} in ${out}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    try {
      await until(/"yaml"/);
      await applyOk(
        server,
        server.credentials.api_key,
        "version: 1\nrules:\n  - name: streamed-through\n    match: {path_prefix: /x}\n    action: deny\n",
      );
      await until(/streamed-through/);
    } finally {
      child.kill();
    }
  });

  test("the gateway's refusals reach buf curl as gRPC codes", async () => {
    const call = (path: string, headers: string[] = []) =>
      bufCurl(["--schema", "proto", ...headers.flatMap((h) => ["-H", h]), "-d", "{}", `${gw.url}${path}`]);
    const denied = await call("/svc.v1.SecretsService/DeleteSecret", [`Authorization: Bearer ${server.credentials.api_key}`]);
    expect(denied.stderr).toContain("permission_denied");
    const unauthenticated = await call("/svc.v1.IdentityService/GenerateMagicLink");
    expect(unauthenticated.stderr).toContain("unauthenticated");
  });
});

describe("grpcio through the gateway", () => {
  test("unary: the answer decodes to the platform's GetConfig response, trailers kept", async () => {
    const result = await grpcio({
      method: "/svc.v1.ConfigService/GetConfig",
      kind: "unary",
      request: getConfigRequest(),
      metadata: bearer(),
    });
    expect(result.code).toBe("OK");
    const answer = fromBinary(GetConfigResponseSchema, Buffer.from(result.responses[0]!, "hex"));
    expect(answer.yaml).toContain("version: 1");
  });

  test("server streaming: the first revision arrives; the client's cancel ends the call", async () => {
    const request = toBinary(
      WatchConfigRequestSchema,
      create(WatchConfigRequestSchema, { organizationId: server.credentials.organization_id }),
    );
    const result = await grpcio({
      method: "/svc.v1.ConfigService/WatchConfig",
      kind: "server_stream",
      request,
      metadata: bearer(),
      messages: 1,
    });
    expect(result.code).toBe("OK");
    const first = fromBinary(WatchConfigResponseSchema, Buffer.from(result.responses[0]!, "hex"));
    expect(first.yaml).toContain("version: 1");
  });

  test("the platform's own errors pass through with their status and message", async () => {
    const result = await grpcio({ method: "/svc.v1.ConfigService/GetConfig", kind: "unary", request: getConfigRequest() });
    expect(result.code).toBe("UNAUTHENTICATED");
    expect(result.details).toContain("missing credential");
    expect(result.trailing.map(([key]) => key)).toContain("grpc-status-details-bin");
  });

  test.each([
    ["an api-key-auth plugin (401)", "UNAUTHENTICATED", "/svc.v1.IdentityService/GenerateMagicLink", 401],
    ["a deny rule (403)", "PERMISSION_DENIED", "/svc.v1.SecretsService/DeleteSecret", 403],
    ["no route (404)", "UNIMPLEMENTED", "/unrouted.v1.Nothing/Call", 404],
    ["a target that refuses connections (502)", "UNAVAILABLE", "/dead.v1.Dead/Call", 502],
  ])("%s is the Trailers-Only status %s, logged with the HTTP status it stands for", async (_what, code, method, status) => {
    const requestId = `grpc-refusal-${status}`;
    const result = await grpcio({ method, kind: "unary", request: new Uint8Array(), metadata: [...bearer(), ["x-request-id", requestId]] });
    expect(gw.logs.find((line) => line.reqId === requestId)).toMatchObject({ status });
    expect(result.code).toBe(code);
    expect(result.details.length).toBeGreaterThan(0);
    // The gateway's request id comes with the status, so that an operator can find the refusal in the access log.
    expect(result.trailing.map(([key]) => key)).toContain("x-request-id");
  });

  test("a rate limit (429) is RESOURCE_EXHAUSTED once the window's request is spent", async () => {
    const request = new Uint8Array();
    const first = await grpcio({ method: "/svc.v1.ConfigService/ListConfigRevisions", kind: "unary", request, metadata: bearer() });
    expect(first.code).not.toBe("RESOURCE_EXHAUSTED");
    const second = await grpcio({ method: "/svc.v1.ConfigService/ListConfigRevisions", kind: "unary", request, metadata: bearer() });
    expect(second.code).toBe("RESOURCE_EXHAUSTED");
  });
});

describe("deadlines", () => {
  test("grpc-timeout is honoured: a stream still open when it passes ends with DEADLINE_EXCEEDED from the gateway", async () => {
    const session = http2Connect(gw.url);
    try {
      const request = toBinary(
        WatchConfigRequestSchema,
        create(WatchConfigRequestSchema, { organizationId: server.credentials.organization_id }),
      );
      const frame = Buffer.alloc(5 + request.length);
      frame.writeUInt32BE(request.length, 1);
      frame.set(request, 5);
      const started = Date.now();
      const outcome = await new Promise<{ headers: Record<string, unknown>; trailers: Record<string, unknown>; bytes: number }>(
        (resolve, reject) => {
          const stream = session.request({
            ":method": "POST",
            ":path": "/svc.v1.ConfigService/WatchConfig",
            "content-type": "application/grpc",
            te: "trailers",
            "grpc-timeout": "300m",
            authorization: `Bearer ${server.credentials.api_key}`,
          });
          let headers: Record<string, unknown> = {};
          let trailers: Record<string, unknown> = {};
          let bytes = 0;
          stream.on("response", (h) => {
            headers = h;
          });
          stream.on("trailers", (t) => {
            trailers = t;
          });
          stream.on("data", (chunk: Buffer) => {
            bytes += chunk.length;
          });
          stream.on("close", () => resolve({ headers, trailers, bytes }));
          stream.on("error", reject);
          stream.end(frame);
        },
      );
      const elapsed = Date.now() - started;
      expect(outcome.bytes).toBeGreaterThan(0); // the first revision came through
      expect({ ...outcome.headers, ...outcome.trailers }["grpc-status"]).toBe("4");
      expect(elapsed).toBeGreaterThanOrEqual(250);
    } finally {
      session.close();
    }
  });
});
