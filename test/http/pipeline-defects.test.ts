import { create, toBinary } from "@bufbuild/protobuf";
import { connect } from "node:http2";
import { gzipSync } from "node:zlib";
import { HealthCheckRequestSchema } from "../../gen/grpc/health/v1/health_pb.js";
import { WatchConfigRequestSchema } from "../../gen/svc/v1/config_pb.js";
import { closeGrpcClients, envelope } from "../support/doors.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * What outside clients found at the seams between the doors, one test each
 * (the request matrix of pipeline-doors.test.ts covers the rest).
 */
let server: TestServer;
let org: string;
beforeAll(async () => {
  server = await startTestServer();
  org = server.credentials.organization_id;
});
afterAll(async () => {
  closeGrpcClients();
  await server.close();
});

const metricOf = async (labels: string) => {
  const text = await (await server.call("/metrics")).text();
  const line = text.split("\n").find((l) => l.startsWith(`gatehouse_rpc_requests_total{${labels}} `));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1));
};

describe("streaming errors are counted with their code and protocol", () => {
  const watch = toBinary(WatchConfigRequestSchema, create(WatchConfigRequestSchema, { organizationId: "x" }));

  test("Connect streaming without a credential: an end-stream error unauthenticated, counted as connect", async () => {
    const labels = 'service="svc.v1.ConfigService",method="WatchConfig",protocol="connect",code="unauthenticated"';
    const before = await metricOf(labels);
    const response = await server.call("/svc.v1.ConfigService/WatchConfig", {
      method: "POST",
      headers: { "content-type": "application/connect+proto" },
      body: new Uint8Array(envelope(0, watch)),
    });
    expect(response.status).toBe(200);
    const body = Buffer.from(await response.arrayBuffer());
    expect(body[0]).toBe(2);
    const end = JSON.parse(body.subarray(5).toString("utf8")) as { error: { code: string } };
    expect(end.error.code).toBe("unauthenticated");
    expect((await metricOf(labels)) - before).toBe(1);
  });

  test("gRPC-Web without a credential: grpc-status 16 in the trailers frame, counted as grpc_web", async () => {
    const labels = 'service="svc.v1.ConfigService",method="WatchConfig",protocol="grpc_web",code="unauthenticated"';
    const before = await metricOf(labels);
    const response = await server.call("/svc.v1.ConfigService/WatchConfig", {
      method: "POST",
      headers: { "content-type": "application/grpc-web+proto" },
      body: new Uint8Array(envelope(0, watch)),
    });
    expect(response.status).toBe(200);
    const text = Buffer.from(await response.arrayBuffer()).toString("latin1");
    expect(text).toContain("grpc-status: 16");
    expect((await metricOf(labels)) - before).toBe(1);
  });
});

describe("malformed input is a 4xx, never a 500", () => {
  test("broken percent-encoding in a path, with no credential at all", async () => {
    const response = await server.call("/organization/%ZZ/config");
    expect(response.status).toBe(400);
    expect(((await response.json()) as { message: string }).message).toContain("percent-encoding");
  });

  test("broken UTF-8 in a percent-encoded path segment", async () => {
    const response = await server.call("/organization/x/secrets/%C0?env=p", { method: "DELETE", bearer: server.credentials.api_key });
    expect(response.status).toBe(400);
  });

  test("broken percent-encoding in a query", async () => {
    const response = await server.call(`/organization/${org}/secrets?env=%E0%A4`, { bearer: server.credentials.api_key });
    expect(response.status).toBe(400);
  });

  test("JSON nested deeper than 64 levels, on REST and Connect", async () => {
    const deep = `{"identifier":${"[".repeat(100)}${"]".repeat(100)}}`;
    for (const path of ["/identity/login/password", "/svc.v1.IdentityService/LoginPassword"]) {
      const response = await server.call(path, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: deep,
        bearer: server.credentials.publishable_key,
      });
      expect(response.status).toBe(400);
      expect(((await response.json()) as { message: string }).message).toMatch(/deeper than 64 levels at line 1, column \d+/);
    }
  });
});

describe("Content-Encoding on REST paths", () => {
  test("a gzip YAML body is decoded like on the Connect paths", async () => {
    const yaml = "version: 1\ndomains:\n  - name: gzip.example.com\n";
    const response = await server.call(`/organization/${org}/config?dry_run=true`, {
      method: "PUT",
      headers: { "content-type": "application/yaml", "content-encoding": "gzip" },
      body: new Uint8Array(gzipSync(yaml)),
      bearer: server.credentials.api_key,
    });
    expect(response.status).toBe(200);
    expect((await response.json()) as { created: string[] }).toMatchObject({ created: ["domains/gzip.example.com"], applied: false });
  });

  test("a gzip bomb is cut off at the decoded limit: 413", async () => {
    const bomb = gzipSync(Buffer.alloc(6 * 1024 * 1024, 0x20));
    expect(bomb.length).toBeLessThan(64 * 1024);
    const response = await server.call(`/organization/${org}/config`, {
      method: "PUT",
      headers: { "content-type": "application/yaml", "content-encoding": "gzip" },
      body: new Uint8Array(bomb),
      bearer: server.credentials.api_key,
    });
    expect(response.status).toBe(413);
  });

  test("an encoding the platform does not decode is 415", async () => {
    const response = await server.call(`/organization/${org}/config`, {
      method: "PUT",
      headers: { "content-type": "application/yaml", "content-encoding": "compress" },
      body: "version: 1\n",
      bearer: server.credentials.api_key,
    });
    expect(response.status).toBe(415);
  });
});

describe("REST query parameters", () => {
  test("dryrun=true (a typo of dry_run) is refused, naming it, and applies nothing", async () => {
    const before = await (await server.call(`/organization/${org}/config`, { bearer: server.credentials.api_key })).text();
    const response = await server.call(`/organization/${org}/config?dryrun=true`, {
      method: "PUT",
      headers: { "content-type": "application/yaml" },
      body: "version: 1\ndomains:\n  - name: typo.example.com\n",
      bearer: server.credentials.api_key,
    });
    expect(response.status).toBe(400);
    const message = ((await response.json()) as { message: string }).message;
    expect(message).toContain('"dryrun"');
    expect(message).toContain("dry_run");
    expect(await (await server.call(`/organization/${org}/config`, { bearer: server.credentials.api_key })).text()).toBe(before);
  });
});

describe("answers that are not successes have the error body", () => {
  test("an unknown path is 404 not_found", async () => {
    const response = await server.call("/nothing/here");
    expect(response.status).toBe(404);
    expect(response.headers.get("content-type")).toBe("application/json");
    expect(((await response.json()) as { code: string }).code).toBe("not_found");
  });

  test("a Connect call without Content-Type is 415 with a body saying what to send", async () => {
    const response = await server.call("/svc.v1.ConfigService/GetConfig", { method: "POST", body: "{}" });
    expect(response.status).toBe(415);
    expect(((await response.json()) as { message: string }).message).toContain("application/json");
  });

  test("a GET of a Connect path is 405 with Allow: POST", async () => {
    const response = await server.call("/svc.v1.ConfigService/GetConfig");
    expect(response.status).toBe(405);
    expect(response.headers.get("allow")).toBe("POST");
    expect(((await response.json()) as { code: string }).code).toBe("unimplemented");
  });

  test("a REST path with another method is 405 with Allow and the error body", async () => {
    const response = await server.call(`/organization/${org}/config`, { method: "POST", bearer: server.credentials.api_key });
    expect(response.status).toBe(405);
    expect(response.headers.get("allow")).toBe("GET, PUT");
    expect(await response.json()).toMatchObject({ code: "unimplemented" });
  });

  test("a 401 carries WWW-Authenticate: Bearer, on REST and Connect", async () => {
    const rest = await server.call(`/organization/${org}/config`);
    const connectAnswer = await server.call("/svc.v1.ConfigService/GetConfig", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ organizationId: org }),
    });
    for (const response of [rest, connectAnswer]) {
      expect(response.status).toBe(401);
      expect(response.headers.get("www-authenticate")).toMatch(/^Bearer/);
    }
  });
});

describe("If-Match uses strong comparison (RFC 9110 13.1.1)", () => {
  const put = (ifMatch: string) =>
    server.call(`/organization/${org}/config?dry_run=true`, {
      method: "PUT",
      headers: { "content-type": "application/yaml", "if-match": ifMatch },
      body: "version: 1\n",
      bearer: server.credentials.api_key,
    });
  const current = async () =>
    Number(
      ((await server.call(`/organization/${org}/config`, { bearer: server.credentials.api_key })).headers.get("etag") ?? "").replace(
        /"/g,
        "",
      ),
    );

  test('a weak tag W/"<current>" never matches: 412', async () => {
    const response = await put(`W/"${await current()}"`);
    expect(response.status).toBe(412);
  });

  test("a list of tags matches when one of them does; * matches", async () => {
    const revision = await current();
    expect((await put(`"${revision + 5}", "${revision}"`)).status).toBe(200);
    expect((await put(`"${revision + 5}", W/"${revision}"`)).status).toBe(412);
    expect((await put("*")).status).toBe(200);
  });
});

describe("gRPC on the gRPC port", () => {
  const call = (path: string, message: Uint8Array) =>
    new Promise<{ headers: Record<string, unknown>; trailers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
      const session = connect(server.grpcUrl);
      const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers" });
      const chunks: Buffer[] = [];
      let headers: Record<string, unknown> = {};
      let trailers: Record<string, unknown> = {};
      stream.on("response", (h) => {
        headers = h;
        // Health/Watch never ends by itself: one message is the answer.
        if (path.endsWith("/Watch")) stream.once("data", () => setTimeout(() => stream.close(), 10));
      });
      stream.on("trailers", (t) => {
        trailers = t;
      });
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("error", reject);
      stream.on("close", () => {
        session.close();
        resolve({ headers, trailers, body: Buffer.concat(chunks) });
      });
      stream.end(envelope(0, message));
    });

  test("an unknown method answers trailers-only with grpc-status 12", async () => {
    const answer = await call("/svc.v1.ConfigService/Nope", new Uint8Array());
    expect(answer.headers[":status"]).toBe(200);
    expect(answer.headers["grpc-status"]).toBe("12");
    expect(answer.body.length).toBe(0);
  });

  test("grpc.health.v1.Health/Watch sends the current status", async () => {
    const answer = await call(
      "/grpc.health.v1.Health/Watch",
      toBinary(HealthCheckRequestSchema, create(HealthCheckRequestSchema, { service: "gatehouse.storage" })),
    );
    expect(answer.headers[":status"]).toBe(200);
    // One message: HealthCheckResponse { status: SERVING (1) } = field 1, varint 1.
    expect([...answer.body]).toEqual([0, 0, 0, 0, 2, 0x08, 0x01]);
  });
});
