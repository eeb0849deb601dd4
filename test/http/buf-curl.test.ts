import { execFile } from "node:child_process";
import { join } from "node:path";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * An independent client: `buf curl` calls an RPC of each service over the
 * Connect protocol on the main port (with the proto schema) and over gRPC on
 * the HTTP/2 (h2c) port, where it reads the schema through server reflection.
 */
let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

/** Runs buf curl without blocking the event loop (the server under test runs in this process). */
function bufCurl(protocol: "connect" | "grpc", url: string, bearer: string, body: unknown) {
  // Over gRPC, buf learns the schema from the server's reflection service; the platform port (HTTP/1.1) has no reflection.
  const args = [
    "curl",
    ...(protocol === "grpc" ? [] : ["--schema", "proto"]),
    "--protocol",
    protocol,
    "-H",
    `Authorization: Bearer ${bearer}`,
    "-d",
    JSON.stringify(body),
  ];
  if (protocol === "grpc") args.push("--http2-prior-knowledge");
  return new Promise<{ status: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      join(process.cwd(), "node_modules", ".bin", "buf"),
      [...args, url],
      { encoding: "utf8", timeout: 60_000 },
      (error, stdout, stderr) => {
        resolve({ status: error ? (typeof error.code === "number" ? error.code : 1) : 0, stdout, stderr });
      },
    );
  });
}

const calls = () => [
  {
    rpc: "svc.v1.ConfigService/GetConfig",
    bearer: server.credentials.api_key,
    body: { organizationId: server.credentials.organization_id },
    expect: (out: Record<string, unknown>) => expect(out).toHaveProperty("yaml"),
  },
  {
    rpc: "svc.v1.SecretsService/GetPublicKey",
    bearer: server.credentials.api_key,
    body: { organizationId: server.credentials.organization_id },
    expect: (out: Record<string, unknown>) => expect(String(out.publicKeyPem)).toContain("BEGIN PUBLIC KEY"),
  },
  {
    rpc: "svc.v1.IdentityService/GenerateMagicLink",
    bearer: server.credentials.secret_key,
    body: { identifier: "buf@example.com" },
    expect: (out: Record<string, unknown>) => expect(String(out.token)).toMatch(/^[A-Za-z0-9_-]{43}$/),
  },
];

describe.each(["connect", "grpc"] as const)("buf curl over %s", (protocol) => {
  test.each(["svc.v1.ConfigService/GetConfig", "svc.v1.SecretsService/GetPublicKey", "svc.v1.IdentityService/GenerateMagicLink"])(
    "%s",
    async (rpc) => {
      const call = calls().find((c) => c.rpc === rpc);
      if (!call) throw new Error(rpc);
      const base = protocol === "grpc" ? server.grpcUrl : server.url;
      const result = await bufCurl(protocol, `${base}/${rpc}`, call.bearer, call.body);
      expect({ status: result.status, stderr: result.stderr }).toEqual({ status: 0, stderr: "" });
      call.expect(JSON.parse(result.stdout));
    },
  );

  test("a refused call reports the Connect code", async () => {
    const base = protocol === "grpc" ? server.grpcUrl : server.url;
    const result = await bufCurl(protocol, `${base}/svc.v1.ConfigService/GetConfig`, server.credentials.secret_key, {
      organizationId: server.credentials.organization_id,
    });
    expect(result.status).not.toBe(0);
    expect(result.stdout + result.stderr).toContain("permission_denied");
  });
});

/** Runs `buf curl <args>` against the gRPC port (HTTP/2 cleartext), its schema from server reflection. */
function bufReflect(args: string[]) {
  return new Promise<{ status: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      join(process.cwd(), "node_modules", ".bin", "buf"),
      ["curl", "--protocol", "grpc", "--http2-prior-knowledge", ...args],
      { encoding: "utf8", timeout: 60_000 },
      (error, stdout, stderr) => resolve({ status: error ? 1 : 0, stdout, stderr }),
    );
  });
}

const lines = (text: string) => text.split("\n").filter(Boolean);

describe("gRPC server reflection", () => {
  // Every service the server serves, reflection and health included (docs/api.md "Protocols").
  const served = () => server.app.services.map((entry) => entry.service.typeName).sort();

  test.each(["grpc-v1", "grpc-v1alpha"])(
    "reflection (%s) lists every served service, its own included, without a schema and without a credential",
    async (protocol) => {
      const result = await bufReflect(["--reflect-protocol", protocol, "--list-services", server.grpcUrl]);
      expect({ status: result.status, stderr: result.stderr }).toEqual({ status: 0, stderr: "" });
      expect(served()).toEqual(
        expect.arrayContaining([
          "grpc.health.v1.Health",
          "grpc.reflection.v1.ServerReflection",
          "grpc.reflection.v1alpha.ServerReflection",
          "svc.v1.ConfigService",
          "svc.v1.IdentityService",
          "svc.v1.SecretsService",
        ]),
      );
      expect(lines(result.stdout).sort()).toEqual(served());
    },
  );

  test("every listed service can be described: buf curl lists the methods of each, reflection's own included", async () => {
    const result = await bufReflect(["--list-methods", server.grpcUrl]);
    expect({ status: result.status, stderr: result.stderr }).toEqual({ status: 0, stderr: "" });
    const methods = lines(result.stdout);
    const expected = server.app.services.flatMap((entry) => entry.service.methods.map((m) => `${entry.service.typeName}/${m.name}`));
    expect(methods.sort()).toEqual(expected.sort());
    expect(methods).toEqual(
      expect.arrayContaining([
        "grpc.health.v1.Health/Check",
        "grpc.health.v1.Health/Watch",
        "grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      ]),
    );
  });

  test.each(["grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"])(
    "%s can be called by a client that learnt its schema through reflection",
    async (service) => {
      const result = await bufReflect(["-d", JSON.stringify({ listServices: "" }), `${server.grpcUrl}/${service}/ServerReflectionInfo`]);
      expect({ status: result.status, stderr: result.stderr }).toEqual({ status: 0, stderr: "" });
      const answer = JSON.parse(result.stdout) as { listServicesResponse: { service: { name: string }[] } };
      expect(answer.listServicesResponse.service.map((s) => s.name).sort()).toEqual(served());
    },
  );
});
