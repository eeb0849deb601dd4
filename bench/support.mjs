// Shared pieces of the benchmarks: free ports, spawning a real Gatehouse server
// (optionally pinned to one core), autocannon runs and table printing.
import { spawn, spawnSync } from "node:child_process";
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { availableParallelism, cpus, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";

export const root = join(dirname(fileURLToPath(import.meta.url)), "..");

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

export const hasTaskset = spawnSync("sh", ["-c", "command -v taskset"]).status === 0;

/**
 * Pins this process (the load generator) and its threads to one core, so that
 * it never takes turns with a server pinned to another core. Without taskset,
 * or on a single core, it stays where the scheduler puts it.
 */
export function pinToCore(core) {
  if (!hasTaskset || availableParallelism() <= core) return;
  spawnSync("taskset", ["-a", "-p", "-c", String(core), String(process.pid)], { stdio: "ignore" });
}

/**
 * Every online core, as a taskset list ("0-1"). Not availableParallelism(): that
 * counts the cores this process may run on, which is one once pinToCore has run,
 * and a server meant to spread over the machine would be confined to core 0.
 */
export function everyCore() {
  return `0-${cpus().length - 1}`;
}

/**
 * Spawns node with args, pinned to `core` when taskset exists; resolves when `ready`
 * matches its output. The output goes to a file, not to a pipe into this process:
 * this process is the load generator, and draining a server's request log would
 * take its CPU and understate every figure.
 */
export function spawnNode(args, { env = {}, core, ready }) {
  const command = hasTaskset && core !== undefined ? "taskset" : process.execPath;
  const argv = hasTaskset && core !== undefined ? ["-c", String(core), process.execPath, ...args] : args;
  const logDir = mkdtempSync(join(tmpdir(), "gatehouse-bench-log-"));
  const logFile = join(logDir, "output.log");
  const fd = openSync(logFile, "w");
  const child = spawn(command, argv, { cwd: root, env: { ...process.env, ...env }, stdio: ["ignore", fd, fd] });
  closeSync(fd);
  // Only what was written before readiness is kept for output(); the rest is left in the file.
  let out = "";
  const read = () => {
    try {
      out = readFileSync(logFile, "utf8");
    } catch {
      // not there yet
    }
    return out;
  };
  const cleanup = () => rmSync(logDir, { recursive: true, force: true });
  return new Promise((resolve, reject) => {
    const poll = setInterval(() => {
      const match = ready.exec(read());
      if (match) {
        clearInterval(poll);
        clearTimeout(timer);
        child.removeAllListeners("exit");
        resolve({ child, match, output: () => out, stop: () => stopChild(child).then(cleanup) });
      }
    }, 20);
    const timer = setTimeout(() => {
      clearInterval(poll);
      reject(new Error(`server did not start:\n${read()}`));
    }, 30_000);
    child.once("exit", (code) => {
      clearInterval(poll);
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${read()}`));
      cleanup();
    });
  });
}

function stopChild(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.removeAllListeners("exit");
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
    setTimeout(() => child.kill("SIGKILL"), 5000).unref();
  });
}

/**
 * Starts `gatehouse serve` on a fresh data directory (SQLite unless DATABASE_URL
 * is given) and returns its addresses and first credentials.
 */
export async function startGatehouse({ env = {}, core } = {}) {
  if (!existsSync(join(root, "dist", "src", "cli", "main.js"))) {
    throw new Error("dist/ is missing: run `npm install` (or `npm run build`) first");
  }
  const dataDir = mkdtempSync(join(tmpdir(), "gatehouse-bench-"));
  const [port, grpcPort, samplePort] = await Promise.all([freePort(), freePort(), freePort()]);
  const server = await spawnNode([join(root, "bin", "gatehouse.js"), "serve"], {
    env: {
      PORT: String(port),
      GRPC_PORT: String(grpcPort),
      SAMPLE_PORT: String(samplePort),
      GATEHOUSE_DATA_DIR: dataDir,
      LOG_LEVEL: "info",
      ...env,
    },
    core,
    ready: /plant API\s+(\S+)\n/,
  });
  const text = server.output();
  const field = (name) => new RegExp(`${name}\\s+(\\S+)`).exec(text)?.[1];
  return {
    url: `http://127.0.0.1:${port}`,
    grpcUrl: `http://127.0.0.1:${grpcPort}`,
    sampleUrl: `http://127.0.0.1:${samplePort}`,
    credentials: {
      organization_id: field("organization_id"),
      api_key: field("api_key \\(admin\\)"),
      publishable_key: field("publishable_key"),
      secret_key: field("secret_key"),
    },
    pid: server.child.pid,
    async stop() {
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** One autocannon run; returns req/s (mean) and latency percentiles in ms. */
export async function load({ url, connections, duration = 5, method = "GET", headers = {}, body, warmup = 1 }) {
  if (warmup > 0) await autocannon({ url, connections, duration: warmup, method, headers, body });
  const result = await autocannon({ url, connections, duration, method, headers, body });
  const ok = result["2xx"];
  const failures = result.non2xx + result.errors + result.timeouts;
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    ok,
    failures,
  };
}

/** A numeric command-line option, `--name <number>`, or `fallback` when it is absent. */
export function option(name, fallback) {
  const args = process.argv.slice(2);
  const i = args.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(args[i + 1]);
}

export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** Prints rows (objects with the same keys) as an aligned table. */
export function printTable(title, rows) {
  const keys = Object.keys(rows[0] ?? {});
  const cells = rows.map((row) => keys.map((k) => String(row[k])));
  const widths = keys.map((k, i) => Math.max(k.length, ...cells.map((c) => c[i].length)));
  const line = (values) => values.map((v, i) => v.padEnd(widths[i])).join("  ");
  console.log(`\n${title}\n${line(keys)}\n${line(widths.map((w) => "-".repeat(w)))}`);
  for (const c of cells) console.log(line(c));
}
