// `npm test`: typecheck, lint and format check, build what the spawned-server tests run, make sure the
// browser the browser tests drive is installed, then jest.
// TEST_DATABASE_URL=postgresql://... runs the same suite against PostgreSQL.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const bin = (name) => join(root, "node_modules", ".bin", name);

function step(label, command, args, env = {}) {
  const started = Date.now();
  process.stdout.write(`\n== ${label}\n`);
  const result = spawnSync(command, args, { cwd: root, stdio: "inherit", env: { ...process.env, ...env } });
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  if (result.status !== 0) {
    process.stdout.write(`== ${label} failed after ${seconds} s\n`);
    process.exit(result.status ?? 1);
  }
  process.stdout.write(`== ${label} ok (${seconds} s)\n`);
}

const database = process.env.TEST_DATABASE_URL?.startsWith("postgres") ? "PostgreSQL" : "SQLite";
step("typecheck", bin("tsc"), ["--noEmit", "-p", "tsconfig.json"]);
step("lint and format", bin("biome"), ["check", "."]);
step("build", process.execPath, [join(root, "scripts/build.mjs")]);
// The browser tests drive Debian's chromium: installed here, once, before jest's workers start.
step("chromium", process.execPath, [join(root, "scripts/ensure-chromium.mjs")]);
// The cluster rate-limit tests start their own redis-server (Debian's package).
step("redis-server", process.execPath, [join(root, "scripts/ensure-redis.mjs")]);
// The HTTP/2 smuggling and gRPC tests drive Debian's python3-h2 and python3-grpcio.
step("HTTP/2 and gRPC clients", process.execPath, [join(root, "scripts/ensure-protocol-clients.mjs")]);
// The /metrics tests check the exposition with promtool (Debian's prometheus package, unpacked once).
step("promtool", process.execPath, [join(root, "scripts/ensure-promtool.mjs")]);

const out = mkdtempSync(join(tmpdir(), "gatehouse-jest-"));
const results = join(out, "results.json");
const jestArgs = ["--json", `--outputFile=${results}`, ...process.argv.slice(2)];
const started = Date.now();
process.stdout.write(`\n== jest on ${database}\n`);
const run = spawnSync(bin("jest"), jestArgs, {
  cwd: root,
  stdio: "inherit",
  env: { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --experimental-vm-modules`.trim() },
});
let summary = "";
try {
  const report = JSON.parse(readFileSync(results, "utf8"));
  summary = `${report.numPassedTests} passed, ${report.numFailedTests} failed, ${report.numPendingTests} skipped`;
} catch {
  summary = "jest wrote no report";
}
rmSync(out, { recursive: true, force: true });
process.stdout.write(`\n== jest on ${database}: ${((Date.now() - started) / 1000).toFixed(1)} s\n${database}: ${summary}\n`);
process.exit(run.status ?? 1);
