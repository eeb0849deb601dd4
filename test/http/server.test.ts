import { createClient, ConnectError, Code } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { Health, HealthCheckResponse_ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { ConfigService } from "../../gen/svc/v1/config_pb.js";
import { connectCall } from "../support/credentials.js";
import { startTestServer, type TestServer } from "../support/server.js";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

describe("probes", () => {
  test("/healthz and /readyz answer 200 SERVING", async () => {
    for (const path of ["/healthz", "/readyz"]) {
      const response = await server.call(path);
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ status: "SERVING" });
    }
  });

  test("/metrics exposes request counts and latency per route", async () => {
    await server.call("/healthz");
    const text = await (await server.call("/metrics")).text();
    expect(text).toMatch(/gatehouse_rpc_requests_total\{service="grpc\.health\.v1\.Health",method="Check",protocol="rest",code="ok"\} \d+/);
    expect(text).toContain("gatehouse_rpc_duration_seconds_bucket");
  });

  test("/metrics counts each answer once, errors apart, with cumulative latency buckets", async () => {
    const scrape = async () => (await server.call("/metrics")).text();
    const value = (text: string, series: string) => {
      const line = text.split("\n").find((l) => l.startsWith(`${series} `));
      return line === undefined ? 0 : Number(line.slice(series.length + 1));
    };
    const labels = 'service="grpc.health.v1.Health",method="Check",protocol="rest",code="ok"';
    const ok = `gatehouse_rpc_requests_total{${labels}}`;
    const missing =
      'gatehouse_rpc_requests_total{service="svc.v1.ConfigService",method="GetConfig",protocol="connect",code="unauthenticated"}';
    const before = await scrape();
    for (let i = 0; i < 3; i++) expect((await server.call("/readyz")).status).toBe(200);
    const refused = await server.call("/svc.v1.ConfigService/GetConfig", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(refused.status).toBe(401);
    const after = await scrape();
    expect(value(after, ok) - value(before, ok)).toBe(3);
    expect(value(after, missing) - value(before, missing)).toBe(1);

    const buckets = after
      .split("\n")
      .filter((l) => l.startsWith("gatehouse_rpc_duration_seconds_bucket{") && l.includes(labels))
      .map((l) => Number(l.slice(l.lastIndexOf(" ") + 1)));
    expect(buckets).toHaveLength(15);
    for (let i = 1; i < buckets.length; i++) expect(buckets[i]).toBeGreaterThanOrEqual(buckets[i - 1] as number);
    const count = value(after, `gatehouse_rpc_duration_seconds_count{${labels}}`);
    expect(buckets[buckets.length - 1]).toBe(count);
    expect(count).toBe(value(after, ok));
    expect(value(after, `gatehouse_rpc_duration_seconds_sum{${labels}}`)).toBeGreaterThan(0);
    expect(after).toMatch(/# TYPE gatehouse_rpc_duration_seconds histogram/);
    expect(after).toMatch(/gatehouse_process_cpu_seconds_total \d/);
  });

  test("every response carries a request id, and a sane incoming one is kept", async () => {
    const response = await server.call("/healthz", { headers: { "x-request-id": "trace-123" } });
    expect(response.headers.get("x-request-id")).toBe("trace-123");
    const generated = await server.call("/healthz", { headers: { "x-request-id": "bad id with spaces" } });
    expect(generated.headers.get("x-request-id")).toMatch(/^[0-9a-f]{8}-[0-9a-z]+$/);
  });

  test("answers written every way carry it: REST, lean and stock Connect, errors, pages, browser calls", async () => {
    const json = { "content-type": "application/json" };
    const calls: [string, RequestInit][] = [
      ["/healthz", {}],
      ["/organization/nope/config", {}],
      ["/healthz", { method: "POST" }],
      ["/grpc.health.v1.Health/Check", { method: "POST", headers: json, body: "{}" }],
      ["/grpc.health.v1.Health/Check", { method: "POST", headers: { ...json, "connect-timeout-ms": "5000" }, body: "{}" }],
      ["/svc.v1.ConfigService/GetConfig", { method: "POST", headers: json, body: "{}" }],
      ["/svc.v1.ConfigService/GetConfig", { method: "POST", headers: json, body: "{" }],
      ["/no/such/thing", {}],
      ["/metrics", {}],
      ["/.well-known/jwks.json", {}],
      ["/dashboard/", {}],
      ["/identity/login/password", { method: "POST", headers: { ...json, origin: "https://app.example" }, body: "{}" }],
    ];
    for (const [i, [path, init]] of calls.entries()) {
      const id = `every-way-${i}`;
      const response = await server.call(path, { ...init, headers: { ...(init.headers as Record<string, string>), "x-request-id": id } });
      await response.arrayBuffer();
      expect({ path, status: response.status, id: response.headers.get("x-request-id") }).toEqual({ path, status: response.status, id });
    }
  });
});

describe("one implementation, every protocol", () => {
  const check = async (transport: Parameters<typeof createClient>[1]) => {
    const client = createClient(Health, transport);
    return (await client.check({ service: "gatehouse.storage" })).status;
  };

  test("Connect JSON and binary over HTTP/1.1", async () => {
    expect(await check(createConnectTransport({ baseUrl: server.url, httpVersion: "1.1" }))).toBe(
      HealthCheckResponse_ServingStatus.SERVING,
    );
    expect(await check(createConnectTransport({ baseUrl: server.url, httpVersion: "1.1", useBinaryFormat: true }))).toBe(
      HealthCheckResponse_ServingStatus.SERVING,
    );
  });

  test("Connect GET, compression and timeouts take the stock handler and still work", async () => {
    const transport = createConnectTransport({ baseUrl: server.url, httpVersion: "1.1", useHttpGet: true, defaultTimeoutMs: 5000 });
    expect(await check(transport)).toBe(HealthCheckResponse_ServingStatus.SERVING);
  });

  test("gRPC-Web over HTTP/1.1", async () => {
    expect(await check(createGrpcWebTransport({ baseUrl: server.url, httpVersion: "1.1" }))).toBe(
      HealthCheckResponse_ServingStatus.SERVING,
    );
  });

  test("gRPC over HTTP/2 cleartext on the gRPC port", async () => {
    expect(await check(createGrpcTransport({ baseUrl: server.grpcUrl }))).toBe(HealthCheckResponse_ServingStatus.SERVING);
  });

  test("the auth interceptor guards the gRPC path like every other", async () => {
    const client = createClient(ConfigService, createGrpcTransport({ baseUrl: server.grpcUrl }));
    const error = await client.getConfig({ organizationId: server.credentials.organization_id }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.Unauthenticated);
    const wrongKind = await client
      .getConfig(
        { organizationId: server.credentials.organization_id },
        { headers: { authorization: `Bearer ${server.credentials.secret_key}` } },
      )
      .catch((e: unknown) => e);
    expect((wrongKind as ConnectError).code).toBe(Code.PermissionDenied);
  });

  test("an unknown health service is not_found with a message saying what exists", async () => {
    const response = await connectCall(server, "/grpc.health.v1.Health/Check", { service: "nope" });
    expect(response.status).toBe(404);
    expect((await response.json()).message).toContain("gatehouse.storage");
  });
});

describe("bad requests get a clear Connect error, never a 500", () => {
  const org = () => server.credentials.organization_id;

  test("malformed JSON on the Connect path", async () => {
    const response = await server.call("/svc.v1.ConfigService/GetConfig", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{not json",
      bearer: server.credentials.api_key,
    });
    expect(response.status).toBe(400);
    expect((await response.json()).code).toBe("invalid_argument");
  });

  test("an unknown field is refused without repeating it, listing the fields there are", async () => {
    const response = await connectCall(
      server,
      "/svc.v1.ConfigService/GetConfig",
      { organizationId: org(), bogus: 1 },
      server.credentials.api_key,
    );
    expect(response.status).toBe(400);
    const message = (await response.json()).message as string;
    expect(message).not.toContain("bogus");
    expect(message).toContain("organizationId");
  });

  test("a body over the limit is 413 on REST and resource_exhausted on Connect", async () => {
    const big = "x".repeat(1024 * 1024 + 10);
    const rest = await server.call("/identity/login/password", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ identifier: big, password: "p" }),
      bearer: server.credentials.publishable_key,
    });
    expect(rest.status).toBe(413);
    expect((await rest.json()).code).toBe("resource_exhausted");
    const connect = await connectCall(
      server,
      "/svc.v1.ConfigService/GetConfig",
      { organizationId: "x".repeat(6 * 1024 * 1024) },
      server.credentials.api_key,
    );
    expect(connect.status).toBe(429);
    expect((await connect.json()).code).toBe("resource_exhausted");
  });

  test("a JSON route with another Content-Type is 415", async () => {
    const response = await server.call("/identity/login/password", {
      method: "POST",
      headers: { "content-type": "text/plain" },
      body: "identifier=a",
      bearer: server.credentials.publishable_key,
    });
    expect(response.status).toBe(415);
    expect((await response.json()).code).toBe("invalid_argument");
  });

  test("a JSON body that is not an object is refused", async () => {
    const response = await server.call("/identity/login/password", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "[1,2]",
      bearer: server.credentials.publishable_key,
    });
    expect(response.status).toBe(400);
    expect((await response.json()).message).toContain("JSON object");
  });

  test("a known path with another method is 405 with Allow; an unknown RPC is 404", async () => {
    const wrongMethod = await server.call(`/organization/${org()}/config`, { method: "DELETE", bearer: server.credentials.api_key });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get("allow")).toBe("GET, PUT");
    const unknown = await connectCall(server, "/svc.v1.ConfigService/Nope", {});
    expect(unknown.status).toBe(404);
  });

  test("a query flag that is not a boolean is refused", async () => {
    const response = await server.call(`/organization/${org()}/config?strict=yes`, {
      method: "PUT",
      headers: { "content-type": "application/yaml" },
      body: "version: 1\n",
      bearer: server.credentials.api_key,
    });
    expect(response.status).toBe(400);
    expect((await response.json()).message).toContain("strict");
  });
});

describe("logs", () => {
  test("each RPC call is one JSON line with its id, route, procedure, protocol, outcome and time", async () => {
    const response = await server.call("/healthz", { headers: { "x-request-id": "log-line-check" } });
    expect(response.status).toBe(200);
    const lines = server.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.reqId === "log-line-check");
    expect(lines).toEqual([
      {
        level: 30,
        time: expect.any(Number),
        service: "gatehouse",
        reqId: "log-line-check",
        method: "GET",
        route: "/healthz",
        rpc: "/grpc.health.v1.Health/Check",
        protocol: "rest",
        code: "ok",
        ms: expect.any(Number),
        msg: "rpc",
      },
    ]);
  });

  test("an answer that is not an RPC call is one JSON line with its status", async () => {
    await (await server.call("/no/such/path", { headers: { "x-request-id": "page-line-check" } })).arrayBuffer();
    const lines = server.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.reqId === "page-line-check");
    expect(lines).toEqual([expect.objectContaining({ method: "GET", route: "not_found", status: 404, msg: "request" })]);
  });

  test("request logs never contain credentials", async () => {
    await server.call(`/organization/${server.credentials.organization_id}/config`, { bearer: server.credentials.api_key });
    await connectCall(server, "/svc.v1.IdentityService/ValidateSession", { token: "abc" }, server.credentials.secret_key);
    const text = server.logs.join("\n");
    expect(text).toContain('"route":"/organization/{organization_id}/config"');
    for (const key of [server.credentials.api_key, server.credentials.publishable_key, server.credentials.secret_key]) {
      expect(text).not.toContain(key);
    }
  });
});
