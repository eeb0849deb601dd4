import { readGatewayEnvironment, type SettingProblem, tlsPortFor } from "../../src/gateway/gateway-settings.js";
import { defaultEdgeLimits } from "../../src/gateway/proxy/edge-limits.js";

/**
 * The gateway's limits and settings as an operator writes them in the
 * environment (docs/gateway.md, "Limits"; docs/configuration.md): each
 * variable is read into its limit, a value out of its bounds is a problem
 * naming the variable and what to write (the default stands), and nothing
 * set means the documented defaults.
 */
function read(env: Record<string, string>) {
  const problems: SettingProblem[] = [];
  const settings = readGatewayEnvironment(env, problems);
  return { settings, problems };
}

test("nothing set: the documented defaults, no Redis, TLS on its default port", () => {
  const { settings, problems } = read({});
  expect(problems).toEqual([]);
  expect(settings.limits).toEqual(defaultEdgeLimits);
  expect(defaultEdgeLimits).toMatchObject({
    maxConnections: 10_000,
    maxConnectionsPerClient: 256,
    maxTunnels: 5_000,
    maxHeaderBytes: 16 * 1024,
    headerTimeoutMs: 10_000,
    requestTimeoutMs: 300_000,
    sendTimeoutMs: 60_000,
    tunnelIdleTimeoutMs: 300_000,
  });
  expect(settings.redis).toBeUndefined();
  expect(tlsPortFor(settings.tlsPort, 8000)).toBe(8443);
  expect(tlsPortFor(settings.tlsPort, 0)).toBe(0);
});

test.each([
  ["GATEWAY_MAX_CONNECTIONS", "maxConnections", "20"],
  ["GATEWAY_MAX_CONNECTIONS_PER_CLIENT", "maxConnectionsPerClient", "4"],
  ["GATEWAY_MAX_TUNNELS", "maxTunnels", "0"],
  ["GATEWAY_MAX_HEADER_BYTES", "maxHeaderBytes", "4096"],
  ["GATEWAY_HEADER_TIMEOUT_MS", "headerTimeoutMs", "2000"],
  ["GATEWAY_REQUEST_TIMEOUT_MS", "requestTimeoutMs", "20000"],
  ["GATEWAY_SEND_TIMEOUT_MS", "sendTimeoutMs", "1500"],
  ["GATEWAY_TUNNEL_IDLE_TIMEOUT_MS", "tunnelIdleTimeoutMs", "30000"],
] as const)("%s sets %s", (name, field, value) => {
  const { settings, problems } = read({ [name]: ` ${value} ` });
  expect(problems).toEqual([]);
  expect(settings.limits[field]).toBe(Number(value));
});

test.each([
  ["GATEWAY_MAX_CONNECTIONS", "0"],
  ["GATEWAY_MAX_CONNECTIONS_PER_CLIENT", "-1"],
  ["GATEWAY_MAX_HEADER_BYTES", "512"],
  ["GATEWAY_MAX_HEADER_BYTES", "2097152"],
  ["GATEWAY_HEADER_TIMEOUT_MS", "10s"],
  ["GATEWAY_SEND_TIMEOUT_MS", "1e5"],
  ["GATEWAY_TUNNEL_IDLE_TIMEOUT_MS", "999"],
  ["GATEWAY_REDIS_TIMEOUT_MS", "0"],
])("%s=%s is refused, naming the variable and its bounds; the default stands", (name, value) => {
  const { settings, problems } = read({ [name]: value });
  expect(problems).toEqual([{ field: name, description: expect.stringMatching(/^must be a whole number from \d+ to \d+, got /) }]);
  expect(settings.limits).toEqual(defaultEdgeLimits);
});

test("a request timeout shorter than the header timeout is refused (a request includes its head)", () => {
  const { problems } = read({ GATEWAY_HEADER_TIMEOUT_MS: "5000", GATEWAY_REQUEST_TIMEOUT_MS: "1000" });
  expect(problems).toEqual([{ field: "GATEWAY_REQUEST_TIMEOUT_MS", description: expect.stringContaining("GATEWAY_HEADER_TIMEOUT_MS") }]);
});

test("Redis: a redis:// or rediss:// URL with an optional database number, and its timeout", () => {
  expect(read({ GATEWAY_REDIS_URL: "redis://127.0.0.1:6379/0" }).settings.redis).toEqual({
    url: "redis://127.0.0.1:6379/0",
    timeoutMs: 50,
  });
  expect(read({ GATEWAY_REDIS_URL: "rediss://cache.internal:6380", GATEWAY_REDIS_TIMEOUT_MS: "200" }).settings.redis).toEqual({
    url: "rediss://cache.internal:6380",
    timeoutMs: 200,
  });
  for (const url of ["http://127.0.0.1:6379", "redis://127.0.0.1:6379/db", "not a url"]) {
    const { settings, problems } = read({ GATEWAY_REDIS_URL: url });
    expect({ url, redis: settings.redis, fields: problems.map((p) => p.field) }).toEqual({
      url,
      redis: undefined,
      fields: ["GATEWAY_REDIS_URL"],
    });
  }
});

test("GATEWAY_TLS_PORT: a port, off, or a clear problem", () => {
  expect(tlsPortFor(read({ GATEWAY_TLS_PORT: "9443" }).settings.tlsPort, 8000)).toBe(9443);
  expect(tlsPortFor(read({ GATEWAY_TLS_PORT: "OFF" }).settings.tlsPort, 8000)).toBeUndefined();
  for (const value of ["65536", "https", "-1"]) {
    expect(read({ GATEWAY_TLS_PORT: value }).problems).toEqual([
      { field: "GATEWAY_TLS_PORT", description: expect.stringContaining('or "off"') },
    ]);
  }
});

test("TRUSTED_PROXIES that does not parse is a problem naming the variable", () => {
  expect(read({ TRUSTED_PROXIES: "not-an-address/99" }).problems.map((p) => p.field)).toEqual(["TRUSTED_PROXIES"]);
});
