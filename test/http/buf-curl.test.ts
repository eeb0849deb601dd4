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

describe("gRPC server reflection", () => {
  test("buf curl lists every service without a schema, and without a credential", async () => {
    const result = await new Promise<{ status: number; stdout: string }>((resolve) => {
      execFile(
        join(process.cwd(), "node_modules", ".bin", "buf"),
        ["curl", "--protocol", "grpc", "--http2-prior-knowledge", "--list-services", server.grpcUrl],
        { encoding: "utf8", timeout: 60_000 },
        (error, stdout) => resolve({ status: error ? 1 : 0, stdout }),
      );
    });
    expect(result.status).toBe(0);
    expect(result.stdout.split("\n").filter(Boolean)).toEqual(
      expect.arrayContaining(["grpc.health.v1.Health", "svc.v1.ConfigService", "svc.v1.IdentityService", "svc.v1.SecretsService"]),
    );
  });
});
