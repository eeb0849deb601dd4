import { spawnSync } from "node:child_process";
// @ts-expect-error: a plain ES module of the project's scripts, without types.
import { promtoolPath } from "../../scripts/ensure-promtool.mjs";
import { callDoor, closeGrpcClients, type Door } from "../support/doors.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * docs/api.md, "Protocols: one implementation, several front doors": GET
 * /metrics is Prometheus text that
 * `promtool check metrics` accepts without findings, with every RPC of every
 * door counted in gatehouse_rpc_requests_total / gatehouse_rpc_duration_seconds.
 */
let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  closeGrpcClients();
  await server.close();
});

test("after calls on every door, successes and errors, /metrics passes promtool check metrics", async () => {
  const doors: Door[] = ["connect_json", "connect_binary", "grpc_web", "grpc", "rest"];
  for (const [i, door] of doors.entries()) {
    const org = server.credentials.organization_id;
    for (const bearer of [server.credentials.api_key, undefined]) {
      await callDoor(server, door, {
        procedure: "/svc.v1.ConfigService/GetConfig",
        json: { organizationId: org },
        binary: new Uint8Array([0x0a, org.length, ...Buffer.from(org)]),
        rest: { method: "GET", path: `/organization/${org}/config` },
        requestId: `promtool-${i}-${bearer ? "ok" : "refused"}`,
        ...(bearer ? { bearer } : {}),
      });
    }
  }
  await (await server.call("/no/such/path")).arrayBuffer();
  const response = await server.call("/metrics");
  expect(response.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  const text = await response.text();
  for (const protocol of ["connect", "grpc", "grpc_web", "rest"]) {
    expect(text).toContain(
      `gatehouse_rpc_requests_total{service="svc.v1.ConfigService",method="GetConfig",protocol="${protocol}",code="ok"}`,
    );
    expect(text).toContain(
      `gatehouse_rpc_requests_total{service="svc.v1.ConfigService",method="GetConfig",protocol="${protocol}",code="unauthenticated"}`,
    );
  }
  const promtool = promtoolPath() as string | undefined;
  if (!promtool) throw new Error("promtool is missing: npm test fetches it (node scripts/ensure-promtool.mjs)");
  const checked = spawnSync(promtool, ["check", "metrics"], { input: text, encoding: "utf8" });
  expect({ status: checked.status, findings: `${checked.stdout}${checked.stderr}`.trim() }).toEqual({ status: 0, findings: "" });
});
