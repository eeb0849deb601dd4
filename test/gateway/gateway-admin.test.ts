import { spawnSync } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
// @ts-expect-error: a plain ES module of the project's scripts, without types.
import { promtoolPath } from "../../scripts/ensure-promtool.mjs";
import {
  echoOf,
  send,
  startEchoUpstream,
  startTestGateway,
  stateFromYaml,
  type EchoUpstream,
  type TestGateway,
} from "../support/gateway.js";
import { freePort } from "../support/free-port.js";
import { createGateway } from "../../src/gateway/gateway.js";
import { createLoggers } from "../../src/server/logger.js";

/**
 * docs/gateway.md, "The data plane: how the gateway enforces it", the admin port: /healthz, /readyz
 * and /metrics in Prometheus text that `promtool check metrics` accepts:
 * per route requests by status class, latency, upstream errors and
 * rate-limited requests; the revision and the seconds since the last change.
 */
let upstream: EchoUpstream;
let gw: TestGateway;
let now = Date.parse("2026-11-22T10:00:00Z");

const yaml = `version: 1
plugins:
  - name: rl
    type: rate-limit
    config: {requests: 1, window_seconds: 60}
routes:
  - name: echo
    path: /echo/*
    upstream: @UPSTREAM@
  - name: limited
    path: /limited
    upstream: @UPSTREAM@
    plugins: [rl]
  - name: refused
    path: /refused
    upstream: http://127.0.0.1:1
`;

beforeAll(async () => {
  upstream = await startEchoUpstream();
  gw = await startTestGateway({ clock: () => now }, stateFromYaml(yaml.replaceAll("@UPSTREAM@", upstream.url), { revision: 7 }));
});
afterAll(async () => {
  await gw.close();
  await upstream.close();
});

async function scrape(): Promise<string> {
  const response = await fetch(`${gw.adminUrl}/metrics`);
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toContain("text/plain");
  return response.text();
}

/** The value of one sample line, by its exact name and labels. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

test("/healthz and /readyz answer 200 once a state is loaded; other paths and methods are refused", async () => {
  expect((await fetch(`${gw.adminUrl}/healthz`)).status).toBe(200);
  const ready = await fetch(`${gw.adminUrl}/readyz`);
  expect(ready.status).toBe(200);
  expect(await ready.json()).toEqual({ status: "SERVING" });
  expect((await fetch(`${gw.adminUrl}/elsewhere`)).status).toBe(404);
  expect((await fetch(`${gw.adminUrl}/metrics`, { method: "POST" })).status).toBe(405);
  // The admin paths are not on the proxy port.
  expect((await send(gw.url, { path: "/healthz" })).status).toBe(404);
});

test("requests, latency, upstream errors and rate-limited requests are counted per route", async () => {
  echoOf(await send(gw.url, { path: "/echo/a" }));
  await send(gw.url, { path: "/echo/b", headers: { "x-echo-status": "503" } });
  await send(gw.url, { path: "/limited" });
  expect((await send(gw.url, { path: "/limited" })).status).toBe(429);
  expect((await send(gw.url, { path: "/refused" })).status).toBe(502);
  await send(gw.url, { path: "/no-route" });
  const text = await scrape();
  expect(sample(text, 'gatehouse_gateway_requests_total{route="echo",status_class="2xx"}')).toBe(1);
  expect(sample(text, 'gatehouse_gateway_requests_total{route="echo",status_class="5xx"}')).toBe(1);
  expect(sample(text, 'gatehouse_gateway_requests_total{route="limited",status_class="4xx"}')).toBe(1);
  expect(sample(text, 'gatehouse_gateway_rate_limited_requests_total{route="limited"}')).toBe(1);
  expect(sample(text, 'gatehouse_gateway_upstream_errors_total{route="refused",kind="refused"}')).toBe(1);
  expect(sample(text, 'gatehouse_gateway_requests_total{route="_unmatched",status_class="4xx"}')).toBeGreaterThanOrEqual(1);
  expect(sample(text, 'gatehouse_gateway_request_duration_seconds_count{route="echo"}')).toBe(2);
  expect(sample(text, 'gatehouse_gateway_request_duration_seconds_bucket{route="echo",le="+Inf"}')).toBe(2);
  expect(sample(text, "gatehouse_gateway_config_revision")).toBe(7);
  expect(sample(text, "gatehouse_gateway_config_loaded")).toBe(1);
});

test("the seconds since the last change follow the gateway's clock and restart at a new revision", async () => {
  now += 90_000;
  expect(sample(await scrape(), "gatehouse_gateway_config_age_seconds")).toBe(90);
  gw.gateway.apply(stateFromYaml(yaml.replaceAll("@UPSTREAM@", upstream.url), { revision: 8 }));
  const text = await scrape();
  expect(sample(text, "gatehouse_gateway_config_age_seconds")).toBe(0);
  expect(sample(text, "gatehouse_gateway_config_revision")).toBe(8);
});

test("the exposition follows the Prometheus naming rules, and promtool check metrics accepts it", async () => {
  const text = await scrape();
  const families = new Map<string, string>();
  for (const line of text.split("\n")) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) families.set(type[1]!, type[2]!);
  }
  const helped = new Set([...text.matchAll(/^# HELP (\S+) /gm)].map((m) => m[1]));
  for (const [name, type] of families) {
    expect(helped.has(name)).toBe(true);
    if (type === "counter") expect(name).toMatch(/_total$/);
    else expect(name).not.toMatch(/_total$/);
  }
  for (const name of [
    "gatehouse_gateway_requests_total",
    "gatehouse_gateway_request_duration_seconds",
    "gatehouse_gateway_upstream_errors_total",
    "gatehouse_gateway_rate_limited_requests_total",
    "gatehouse_gateway_config_revision",
    "gatehouse_gateway_config_age_seconds",
  ]) {
    expect(families.has(name)).toBe(true);
  }
  const promtoolBinary = promtoolPath() as string | undefined;
  if (!promtoolBinary) throw new Error("promtool is missing: npm test fetches it (node scripts/ensure-promtool.mjs)");
  const promtool = spawnSync(promtoolBinary, ["check", "metrics"], { input: text, encoding: "utf8" });
  expect(`${promtool.stdout}${promtool.stderr}`.trim()).toBe("");
  expect(promtool.status).toBe(0);
});

test("a gateway whose admin port is taken does not listen at all: its proxy port is let go, so a failed start can exit", async () => {
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
  const adminPort = (taken.address() as AddressInfo).port;
  const port = await freePort();
  const gateway = createGateway({ host: "127.0.0.1", port, adminPort, logger: createLoggers("silent").app });
  try {
    await expect(gateway.listen()).rejects.toMatchObject({ code: "EADDRINUSE" });
    // Free again: nothing of the failed start holds it (before the fix, the proxy stayed bound and the process alive).
    const again = createServer();
    await new Promise<void>((resolve, reject) => {
      again.once("error", reject);
      again.listen(port, "127.0.0.1", resolve);
    });
    await new Promise<void>((resolve) => again.close(() => resolve()));
  } finally {
    await gateway.close();
    await new Promise<void>((resolve) => taken.close(() => resolve()));
  }
});
