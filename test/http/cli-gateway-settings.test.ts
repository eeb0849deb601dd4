import { runCli } from "../support/cli.js";
import { isBuilt } from "../support/config-process.js";

/**
 * `gatehouse gateway` refuses settings it cannot use before it connects or
 * listens: exit 1, and with --json one line {"code", "message"} on stderr
 * naming the setting and what it takes.
 */
if (!isBuilt()) throw new Error("dist/ is not built (node scripts/build.mjs)");

const key = `gw_${"A".repeat(43)}`;
// Nothing listens there: a gateway that got past its settings would keep retrying, not exit.
const base = { GATEHOUSE_URL: "http://127.0.0.1:9", GATEWAY_PORT: "0", GATEHOUSE_DATA_DIR: "/nonexistent-gatehouse-dir" };

function refused(env: Record<string, string>): { code: string; message: string } {
  const result = runCli(["gateway", "--json"], { ...base, ...env });
  expect(result.status).toBe(1);
  expect(result.stdout).toBe("");
  return JSON.parse(result.stderr.trim()) as { code: string; message: string };
}

test("without a gateway key", () => {
  const error = refused({ GATEHOUSE_GATEWAY_KEY: "" });
  expect(error.code).toBe("missing_configuration");
  expect(error.message).toContain("GATEHOUSE_GATEWAY_KEY");
});

test.each(["abc", "70000", "-1", "80.5"])("GATEWAY_PORT=%s", (value) => {
  const error = refused({ GATEHOUSE_GATEWAY_KEY: key, GATEWAY_PORT: value });
  expect(error).toEqual({ code: "invalid_configuration", message: "GATEWAY_PORT must be a port number from 0 to 65535" });
});

test.each(["5", "99", "600001", "1e9", "fast", "1000.5"])("GATEWAY_UPSTREAM_TIMEOUT_MS=%s", (value) => {
  const error = refused({ GATEHOUSE_GATEWAY_KEY: key, GATEWAY_UPSTREAM_TIMEOUT_MS: value });
  expect(error).toEqual({
    code: "invalid_configuration",
    message: "GATEWAY_UPSTREAM_TIMEOUT_MS must be a whole number of milliseconds from 100 to 600000",
  });
});
