import { Writable } from "node:stream";
import { createLoggers } from "../../src/server/logger.js";
import { startGateway, type RunningGateway } from "../../src/gateway/start-gateway.js";
import { gatewayAdmin } from "../support/gateway-control.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * A gateway's /metrics says whether it follows a control plane right now
 * (gatehouse_gateway_control_plane_connected), beside the configuration it
 * serves: losing the control plane turns the first to 0 and keeps the second.
 */
let server: TestServer | undefined;
let gateway: RunningGateway | undefined;

afterAll(async () => {
  await gateway?.close();
  await server?.close();
});

const gauge = (text: string, name: string) => {
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
};

async function until(condition: () => Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

test("connected is 1 while the gateway follows the control plane and 0 once it is gone; the revision served stays", async () => {
  server = await startTestServer();
  const organizationId = server.credentials.organization_id;
  const admin = gatewayAdmin(server);
  const { gatewayKey } = await admin.credentials.createGatewayKey({ organizationId, name: "metrics" });
  await admin.close();
  const silent = new Writable({ write: (_chunk, _encoding, done) => done() });
  gateway = await startGateway(
    { host: "127.0.0.1", port: 0, urls: [server.url], gatewayKey, gatewayId: "metrics-test", cacheFile: undefined },
    createLoggers("warn", silent).app,
  );
  const metrics = async () => (await fetch(`${gateway?.addresses.adminUrl}/metrics`)).text();

  await until(async () => gauge(await metrics(), "gatehouse_gateway_control_plane_connected") === 1, "connected 1");
  const following = await metrics();
  expect(gauge(following, "gatehouse_gateway_config_loaded")).toBe(1);
  const revision = gauge(following, "gatehouse_gateway_config_revision");
  expect(revision).toEqual(expect.any(Number));

  await server.close();
  server = undefined;
  await until(async () => gauge(await metrics(), "gatehouse_gateway_control_plane_connected") === 0, "connected 0");
  const alone = await metrics();
  expect(gauge(alone, "gatehouse_gateway_config_loaded")).toBe(1);
  expect(gauge(alone, "gatehouse_gateway_config_revision")).toBe(revision);
}, 120_000);
