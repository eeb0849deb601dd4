#!/usr/bin/env node
// Benchmark of the gateway configuration (issue "Gateway configuration").
//
//   node bench/config.mjs                       SQLite, and PostgreSQL when reachable
//   BENCH_PG_URL=postgresql://postgres@127.0.0.1:5432/postgres node bench/config.mjs
//   BENCH_ONLY=sqlite|postgresql                one database only
//   BENCH_SECONDS=5                             duration of each req/s measurement
//
// Runs the built server (`npm run build` first) as separate processes, one
// fresh database each, and prints figures and ratios:
//   - import (strict PUT) of 10,000 routes with their domains, plugins and
//     rules; export (GET) of the same; peak RSS of the server (VmHWM)
//   - GET of a 100-route configuration, requests/s, as a ratio of the no-op
//     RPC (Connect JSON grpc.health.v1.Health/Check) measured in the same run,
//     with the server's CPU per request (steadier than req/s on a busy machine)
//     and the ratio that CPU alone would give
//   - PostgreSQL: delay from a PUT response on instance A to the WatchConfig
//     message on instance B, p50 and p99 over 200 changes
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";
import pg from "pg";
import { median, percentile } from "./support.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const pgAdminUrl = process.env.BENCH_PG_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres";
const only = process.env.BENCH_ONLY;

if (!existsSync(join(root, "dist/src/cli/main.js"))) {
  console.error("build first: npm run build");
  process.exit(1);
}

/** The document of the benchmark: `routes` routes over 100 domains, plugins and rules. */
function documentOf(routes, variant = 0) {
  const n = Math.min(routes, 100);
  const lines = ["version: 1", "domains:"];
  for (let i = 0; i < n; i++) lines.push(`  - name: api${i}.example.com`);
  lines.push("plugins:");
  for (let i = 0; i < n; i++)
    lines.push(`  - name: rl-${i}`, "    type: rate-limit", `    config: {requests: ${100 + i}, window_seconds: 60}`);
  lines.push("rules:");
  for (let i = 0; i < n; i++)
    lines.push(`  - name: block-${i}`, `    match: {header: user-agent, regex: "bot-${i}", ignore_case: true}`, "    action: deny");
  lines.push("routes:");
  for (let i = 0; i < routes; i++) {
    lines.push(
      `  - name: route-${i}`,
      `    domains: [api${i % n}.example.com]`,
      `    path: /plants/${i}/*`,
      "    methods: [GET, POST]",
      `    upstream: http://127.0.0.1:${8000 + variant}`,
      `    plugins: [rl-${i % n}]`,
      `    rules: [block-${i % n}]`,
    );
  }
  return `${lines.join("\n")}\n`;
}

async function startServer(env) {
  const child = spawn(process.execPath, [join(root, "bin/gatehouse.js"), "serve"], {
    cwd: root,
    env: { ...process.env, PORT: "0", GRPC_PORT: "0", SAMPLE_PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  const url = await new Promise((resolve, reject) => {
    child.stdout.on("data", (chunk) => {
      out += chunk;
      const match = /Gatehouse platform API\s+(http:\/\/\S+)/.exec(out);
      if (match) resolve(match[1]);
    });
    child.once("exit", (code) => reject(new Error(`server exited with ${code}`)));
  });
  const organizationId = /organization_id\s+(\S+)/.exec(out)?.[1];
  const apiKey = /api_key \(admin\)\s+(gk_\S+)/.exec(out)?.[1];
  return {
    url,
    child,
    organizationId,
    apiKey,
    /** Peak resident set size of the server process so far, in MB. */
    peakRssMb: () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))?.[1] ?? 0) / 1024,
    rssMb: () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))?.[1] ?? 0) / 1024,
    async stop() {
      child.kill("SIGTERM");
      await new Promise((resolve) => child.once("exit", resolve));
    },
  };
}

async function timed(fn) {
  const started = performance.now();
  const result = await fn();
  return { ms: performance.now() - started, result };
}

function put(server, body, { strict = true, organizationId = server.organizationId, apiKey = server.apiKey } = {}) {
  return fetch(`${server.url}/organization/${organizationId}/config${strict ? "?strict=true" : ""}`, {
    method: "PUT",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/yaml" },
    body,
  });
}

async function putOk(server, body, options) {
  const response = await put(server, body, options);
  const text = await response.text();
  if (response.status !== 200) throw new Error(`PUT ${response.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text);
}

async function getOk(server) {
  const response = await fetch(`${server.url}/organization/${server.organizationId}/config`, {
    headers: { authorization: `Bearer ${server.apiKey}` },
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`GET ${response.status}`);
  return text;
}

/** CPU seconds the server process has used so far (all threads), or null where /proc does not tell. */
function cpuSeconds(server) {
  try {
    const fields = readFileSync(`/proc/${server.child.pid}/stat`, "utf8").split(") ")[1].split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return null;
  }
}

/**
 * req/s of one autocannon run, and the server's CPU per request in
 * microseconds: unlike req/s, the latter hardly depends on what else the
 * machine is running.
 */
function requestsPerSecond(server, { expectStatus = 200, ...options }) {
  const before = cpuSeconds(server);
  return new Promise((resolve, reject) => {
    autocannon({ connections: 50, pipelining: 1, duration: seconds, ...options }, (error, result) => {
      const unexpected = expectStatus === 200 ? result?.non2xx > 0 : result?.non2xx !== result?.requests.total;
      const after = cpuSeconds(server);
      if (error) reject(error);
      else if (unexpected || result.errors > 0) reject(new Error(`${options.url}: ${result.non2xx} non-2xx, ${result.errors} errors`));
      else
        resolve({
          rps: result.requests.average,
          cpuUs: before === null || after === null ? null : ((after - before) * 1e6) / result.requests.total,
        });
    });
  });
}

const cpuOf = (run) => (run.cpuUs === null ? "" : `, ${run.cpuUs.toFixed(0)} us CPU/req`);

const fmt = (ms) => `${(ms / 1000).toFixed(2)} s`;

async function importExport(label, env) {
  const server = await startServer(env);
  try {
    const startRss = server.rssMb();
    const big = [1, 2, 3].map((v) => documentOf(10_000, v));
    const imports = [];
    for (const body of big) {
      const { ms, result } = await timed(() => putOk(server, body));
      if (result.created.length + result.updated.length === 0) throw new Error("import changed nothing");
      imports.push(ms);
    }
    const peak = server.peakRssMb();
    const exports = [];
    let bytes = 0;
    for (let i = 0; i < 5; i++) {
      const { ms, result } = await timed(() => getOk(server));
      bytes = result.length;
      exports.push(ms);
    }
    console.log(`\n${label}`);
    console.log(`  import 10,000 routes (${(Buffer.byteLength(big[0]) / 1024 / 1024).toFixed(1)} MiB, 10,300 resources, strict PUT):`);
    console.log(
      `    first (cold server) ${fmt(imports[0])}; then ${imports.slice(1).map(fmt).join(", ")}   target <= 3 s   ratio to target ${(Math.max(...imports) / 3000).toFixed(2)}`,
    );
    console.log(
      `  export 10,000 routes (${(bytes / 1024 / 1024).toFixed(1)} MiB): median ${fmt(median(exports))}, max ${fmt(Math.max(...exports))}   target <= 0.5 s   ratio ${(Math.max(...exports) / 500).toFixed(2)}`,
    );
    console.log(`  server RSS: ${startRss.toFixed(0)} MB after start, peak ${peak.toFixed(0)} MB during the imports   target <= 300 MB`);

    // GET of a 100-route configuration against the no-op RPC, same server, same run.
    await putOk(server, documentOf(100));
    const noop = await requestsPerSecond(server, {
      url: `${server.url}/grpc.health.v1.Health/Check`,
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    const get = await requestsPerSecond(server, {
      url: `${server.url}/organization/${server.organizationId}/config`,
      headers: { authorization: `Bearer ${server.apiKey}` },
    });
    // Where the time goes: an RPC that authenticates the API key (as GET does) and is then refused without any work of its own.
    const authOnly = await requestsPerSecond(server, {
      url: `${server.url}/svc.v1.ConfigService/GetConfigRevision`,
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${server.apiKey}` },
      body: JSON.stringify({ organizationId: server.organizationId, revision: 0 }),
      expectStatus: 400,
    });
    console.log(
      `  GET of a 100-route configuration: ${get.rps.toFixed(0)} req/s${cpuOf(get)}; no-op RPC (Health/Check): ${noop.rps.toFixed(0)} req/s${cpuOf(noop)}; ratio ${(get.rps / noop.rps).toFixed(2)}   target >= 0.5`,
    );
    console.log(
      `    authentication alone (an authenticated RPC refused right after): ${authOnly.rps.toFixed(0)} req/s${cpuOf(authOnly)}, ratio to the no-op ${(authOnly.rps / noop.rps).toFixed(2)}; GET / authentication alone ${(get.rps / authOnly.rps).toFixed(2)}`,
    );
    if (get.cpuUs !== null && noop.cpuUs !== null) {
      // Where the server alone sets the pace (a core of its own), req/s go inversely with CPU per request.
      console.log(`    CPU-bound projection: GET ${(noop.cpuUs / get.cpuUs).toFixed(2)} x the no-op`);
    }
  } finally {
    await server.stop();
  }
}

async function propagation(env) {
  const a = await startServer(env);
  const b = await startServer({ ...env, GATEHOUSE_DATA_DIR: env.GATEHOUSE_DATA_DIR });
  const { createClient } = await import("@connectrpc/connect");
  const { createConnectTransport } = await import("@connectrpc/connect-node");
  const { ConfigService } = await import(join(root, "dist/gen/svc/v1/config_pb.js"));
  const controller = new AbortController();
  try {
    const client = createClient(ConfigService, createConnectTransport({ baseUrl: b.url, httpVersion: "1.1" }));
    const stream = client.watchConfig(
      { organizationId: a.organizationId },
      { headers: { authorization: `Bearer ${a.apiKey}` }, signal: controller.signal },
    );
    const arrivals = new Map();
    const waiting = new Map();
    const reader = (async () => {
      for await (const message of stream) {
        arrivals.set(message.revision, performance.now());
        waiting.get(message.revision)?.();
      }
    })().catch(() => {});
    await putOk(a, documentOf(10), { strict: true });
    const delays = [];
    const sinceRequest = [];
    for (let i = 0; i < 200; i++) {
      const body = `version: 1\nroutes:\n  - name: route-0\n    path: /p/${i}\n    upstream: http://127.0.0.1:8081\n`;
      const sent = performance.now();
      const plan = await putOk(a, body, { strict: false });
      const answered = performance.now();
      const arrived =
        arrivals.get(plan.revision) ??
        (await new Promise((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`revision ${plan.revision} did not arrive`)), 10_000);
          waiting.set(plan.revision, () => {
            clearTimeout(timer);
            resolve(arrivals.get(plan.revision));
          });
        }));
      delays.push(arrived - answered);
      sinceRequest.push(arrived - sent);
    }
    controller.abort();
    await reader;
    const early = delays.filter((d) => d < 0).length;
    console.log("\nPostgreSQL, propagation from a PUT on instance A to a WatchConfig subscriber on instance B (200 changes):");
    console.log(
      `  after the PUT response: p50 ${median(delays).toFixed(1)} ms, p99 ${percentile(delays, 99).toFixed(1)} ms, max ${Math.max(...delays).toFixed(1)} ms (negative: the message came before the response; ${early} of 200)   target p99 <= 50 ms`,
    );
    console.log(
      `  after the PUT request was sent: p50 ${median(sinceRequest).toFixed(1)} ms, p99 ${percentile(sinceRequest, 99).toFixed(1)} ms`,
    );
  } finally {
    controller.abort();
    await Promise.all([a.stop(), b.stop()]);
  }
}

async function postgresDatabase() {
  const admin = new pg.Client({ connectionString: pgAdminUrl });
  try {
    await admin.connect();
  } catch {
    return undefined;
  }
  const name = `gatehouse_bench_${randomBytes(4).toString("hex")}`;
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(pgAdminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: pgAdminUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

console.log(`gatehouse config benchmark (node ${process.version}, ${new Date().toISOString()})`);
if (only !== "postgresql") {
  const dir = mkdtempSync(join(tmpdir(), "gatehouse-bench-"));
  try {
    await importExport("SQLite", { DATABASE_URL: `file:${join(dir, "gatehouse.db")}`, GATEHOUSE_DATA_DIR: dir });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
if (only !== "sqlite") {
  const database = await postgresDatabase();
  if (!database) {
    console.log(`\nPostgreSQL: not reachable at ${pgAdminUrl} (set BENCH_PG_URL); skipped`);
  } else {
    const dir = mkdtempSync(join(tmpdir(), "gatehouse-bench-"));
    try {
      await importExport("PostgreSQL", { DATABASE_URL: database.url, GATEHOUSE_DATA_DIR: dir });
      await database.drop();
      const second = await postgresDatabase();
      const dir2 = mkdtempSync(join(tmpdir(), "gatehouse-bench-"));
      try {
        await propagation({ DATABASE_URL: second.url, GATEHOUSE_DATA_DIR: dir2 });
      } finally {
        await second.drop();
        rmSync(dir2, { recursive: true, force: true });
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
}
