// bench/identity: password login throughput against bare argon2id verification
// (same parameters, same run), /healthz p99 while logins saturate the server,
// and magic-link generate + verify pairs per second on SQLite and PostgreSQL.
//
// Fairness: the bare verifications use the server's own parameters and as many
// in flight as the server's hashing threads hold at once (both read from the
// build: threads x jobs each), on libuv's
// pool at normal priority; the server hashes on threads of lower priority, so
// whatever else runs on the machine takes from the server first (the comparison
// is conservative). The load generator shares the cores with the server, so its
// CPU per login is printed. The /healthz probe runs on its own thread over a
// keep-alive connection: neither the load generator's callbacks nor fetch's own
// overhead count as server latency.
//
//   npm run build && node bench/identity.mjs [--seconds 10] [--connections 8] [--logins-only] [--profile DIR]
//
// --logins-only skips the magic-link phases; --profile DIR runs the server under
// `node --cpu-prof` and writes its CPU profile to DIR when it stops.
//
// PostgreSQL: BENCH_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/postgres);
// a scratch database is created there and dropped afterwards. Skipped when unreachable.
import { hash, verify } from "@node-rs/argon2";
import autocannon from "autocannon";
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import pg from "pg";
import { freePort, option, percentile } from "./support.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const bin = join(root, "bin/gatehouse.js");
const args = process.argv.slice(2);
const seconds = option("seconds", 10);
const loginsOnly = args.includes("--logins-only");
const profileDir = args.includes("--profile") ? args[args.indexOf("--profile") + 1] : undefined;
const connections = option("connections", 8);
const password = "correct horse battery staple";

if (!existsSync(join(root, "dist/src/cli/main.js"))) {
  console.error("build first: npm run build");
  process.exit(1);
}
// The parameters (OWASP: 19 MiB, 2 iterations, 1 lane) and the number of hashes
// at once that the server uses, from the same build.
const hasher = await import(pathToFileURL(join(root, "dist/src/domain/identity/password-hasher.js")).href);
const argon2id = { algorithm: 2, ...hasher.owaspArgon2id };
const hashingConcurrency = hasher.defaultHashingConcurrency();
// Each hashing thread holds its next job while computing one (hashingDepth), so the
// bare verifications keep as many in flight: fewer would leave the cores idle
// between one verification and the next and flatter the ratio.
const { hashingDepth } = await import(pathToFileURL(join(root, "dist/src/domain/identity/hashing-threads.js")).href);
const bareInFlight = hashingConcurrency * hashingDepth;

function gatehouse(env, ...argv) {
  const result = spawnSync(process.execPath, [bin, ...argv], { env: { ...process.env, ...env }, encoding: "utf8" });
  if (result.status !== 0) throw new Error(`gatehouse ${argv.join(" ")} failed: ${result.stderr}`);
  return result.stdout;
}

/** Starts `gatehouse serve` over its own data store. */
async function startServer(databaseUrl) {
  const dataDir = mkdtempSync(join(tmpdir(), "gatehouse-bench-"));
  const port = await freePort();
  const env = {
    GATEHOUSE_DATA_DIR: dataDir,
    PORT: String(port),
    GRPC_PORT: String(await freePort()),
    SAMPLE_PORT: String(await freePort()),
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
  };
  const credentials = JSON.parse(gatehouse(env, "init", "--json"));
  gatehouse(
    env,
    "settings",
    "set",
    "--org",
    credentials.organization_id,
    "password=true",
    "ip_limit_per_minute=1000000",
    "magic_link_limit_per_hour=100000",
  );
  // Request logs (one JSON line per request, as in production) go to /dev/null:
  // the server pays for producing them, not for a disk this machine shares.
  const nodeArgs = profileDir ? ["--cpu-prof", "--cpu-prof-dir", profileDir] : [];
  const child = spawn(process.execPath, [...nodeArgs, bin, "serve"], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (Date.now() > deadline) throw new Error("the server did not start");
    await new Promise((resolve) => setTimeout(resolve, 100));
    const ready = await fetch(`${url}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
  }
  return {
    url,
    credentials,
    /** CPU time (ms) the server process has used so far: all threads, and its main (event-loop) thread. */
    cpuMs() {
      const ticks = (path) => {
        const fields = readFileSync(path, "utf8").split(") ")[1].split(" ");
        return (Number(fields[11]) + Number(fields[12])) * (1000 / 100);
      };
      return { total: ticks(`/proc/${child.pid}/stat`), main: ticks(`/proc/${child.pid}/task/${child.pid}/stat`) };
    },
    async stop() {
      child.kill("SIGTERM");
      await new Promise((resolve) => child.once("exit", resolve));
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function post(url, path, body, bearer) {
  const response = await fetch(url + path, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${bearer}` },
    body: JSON.stringify(body),
  });
  const json = await response.json();
  if (response.status !== 200) throw new Error(`${path}: ${response.status} ${JSON.stringify(json)}`);
  return json;
}

/** Bare argon2id verifications for a while, enough in flight to keep every core busy. */
async function bareVerifyRate(durationMs) {
  const stored = await hash(password, argon2id);
  let done = 0;
  const until = Date.now() + durationMs;
  const started = Date.now();
  const cpu = process.cpuUsage();
  const worker = async () => {
    while (Date.now() < until) {
      await verify(stored, password);
      done++;
    }
  };
  // As many in flight as the server's hashing threads hold at once.
  await Promise.all(Array.from({ length: bareInFlight }, worker));
  const used = process.cpuUsage(cpu);
  return { done, seconds: (Date.now() - started) / 1000, cpuMs: (used.user + used.system) / 1000 };
}

/** Password logins with autocannon, each connection signing in its own identity. */
function loginLoad(server, identifiers, durationSeconds) {
  let next = 0;
  return autocannon({
    url: `${server.url}/identity/login/password`,
    method: "POST",
    connections,
    duration: durationSeconds,
    headers: { "content-type": "application/json", authorization: `Bearer ${server.credentials.publishable_key}` },
    setupClient(client) {
      client.setBody(JSON.stringify({ identifier: identifiers[next++ % identifiers.length], password }));
    },
  });
}

/**
 * /healthz latencies, one request at a time every 20 ms, on a thread of its own
 * (its timings do not wait for the load generator's callbacks) over one
 * keep-alive connection. start() begins a series; stop() resolves to it.
 */
function createHealthProbe(url) {
  const worker = new Worker(
    `const http = require("node:http");
    const { parentPort, workerData } = require("node:worker_threads");
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    let running = false;
    parentPort.on("message", async (message) => {
      if (message === "stop") return void (running = false);
      running = true;
      const latencies = [];
      while (running) {
        const started = process.hrtime.bigint();
        await new Promise((resolve, reject) =>
          http.get(workerData.url + "/healthz", { agent }, (res) => res.resume().on("end", resolve)).on("error", reject));
        latencies.push(Number(process.hrtime.bigint() - started) / 1e6);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      parentPort.postMessage(latencies);
    });`,
    { eval: true, workerData: { url } },
  );
  return {
    start: () => worker.postMessage("start"),
    stop: () => {
      const series = new Promise((resolve, reject) => {
        worker.once("message", resolve);
        worker.once("error", reject);
      });
      worker.postMessage("stop");
      return series;
    },
    close: () => worker.terminate(),
  };
}

/** Magic-link generate + verify pairs per second, `concurrency` pairs in flight. */
async function magicLinkRate(server, durationMs, concurrency = 8) {
  const sk = server.credentials.secret_key;
  let pairs = 0;
  const until = Date.now() + durationMs;
  const started = Date.now();
  const worker = async (w) => {
    for (let i = 0; Date.now() < until; i++) {
      const identifier = `ml-${w}-${i % 50}@bench.example`;
      const { token } = await post(server.url, "/svc.v1.IdentityService/GenerateMagicLink", { identifier }, sk);
      await post(server.url, "/svc.v1.IdentityService/VerifyMagicLink", { token }, sk);
      pairs++;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  return pairs / ((Date.now() - started) / 1000);
}

async function scratchPostgres() {
  const base = process.env.BENCH_POSTGRES_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres";
  const name = `gatehouse_bench_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: base });
  try {
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
  } catch (error) {
    console.log(`PostgreSQL not reachable (${error.message}): skipped`);
    return undefined;
  } finally {
    await admin.end().catch(() => {});
  }
  const url = new URL(base);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const client = new pg.Client({ connectionString: base });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}

const fmt = (n, digits = 1) => n.toFixed(digits);
console.log(
  `bench/identity: ${availableParallelism()} cores, node ${process.version}, ${seconds} s per load phase, ${connections} connections, ` +
    `${hashingConcurrency} hashes at once (${bareInFlight} in flight for the bare verifications)`,
);

// ---------------------------------------------------------------- SQLite: logins, health, magic links
const sqlite = await startServer(undefined);
const probe = createHealthProbe(sqlite.url);
try {
  const identifiers = Array.from({ length: connections * 2 }, (_, i) => `bench${i}@bench.example`);
  for (const identifier of identifiers) {
    await post(sqlite.url, "/identity/register/password", { identifier, password }, sqlite.credentials.publishable_key);
  }
  await loginLoad(sqlite, identifiers, 2); // warm-up

  // Bare verification and logins alternate in short phases, so both see the
  // same machine (other work on it shifts both alike).
  const rounds = 4;
  let bareDone = 0;
  let bareSeconds = 0;
  let bareCpu = 0;
  let loginCpu = 0;
  let loginMainCpu = 0;
  let loginsOk = 0;
  let loginsOther = 0;
  let loginSeconds = 0;
  let generatorCpu = 0;
  const health = [];
  const loginLatencies = [];
  for (let round = 0; round < rounds; round++) {
    const bareRound = await bareVerifyRate((seconds * 1000) / rounds);
    bareDone += bareRound.done;
    bareSeconds += bareRound.seconds;
    bareCpu += bareRound.cpuMs;
    const cpuBefore = sqlite.cpuMs();
    const ownCpu = process.cpuUsage();
    probe.start();
    const load = await loginLoad(sqlite, identifiers, seconds / rounds);
    health.push(...(await probe.stop()));
    const own = process.cpuUsage(ownCpu);
    const cpuAfter = sqlite.cpuMs();
    loginCpu += cpuAfter.total - cpuBefore.total;
    loginMainCpu += cpuAfter.main - cpuBefore.main;
    // This process: the load generator and the probe.
    generatorCpu += (own.user + own.system) / 1000;
    loginsOk += load["2xx"];
    loginsOther += load.non2xx;
    // autocannon reports its duration in seconds.
    loginSeconds += load.duration;
    loginLatencies.push(load.latency.p99);
  }
  const bare = bareDone / bareSeconds;
  const loginRate = loginsOk / loginSeconds;
  const ratio = loginRate / bare;
  const p99 = percentile(health, 99);

  console.log("");
  console.log(`bare argon2id verify (m=${argon2id.memoryCost}, t=${argon2id.timeCost}, p=${argon2id.parallelism}): ${fmt(bare)} /s`);
  console.log(
    `password login over HTTP (SQLite):        ${fmt(loginRate)} /s  (${loginsOk} ok, ${loginsOther} other, p99 per phase ${loginLatencies.join("/")} ms)`,
  );
  console.log(`  ratio login / bare verify:              ${fmt(ratio, 3)}  (target >= 0.85: ${ratio >= 0.85 ? "met" : "MISSED"})`);
  // CPU time per operation does not depend on what else the machine runs.
  const cpuPerVerify = bareCpu / bareDone;
  const cpuPerLogin = loginCpu / loginsOk;
  console.log(
    `  CPU per bare verify ${fmt(cpuPerVerify, 2)} ms, server CPU per login ${fmt(cpuPerLogin, 2)} ms ` +
      `(event-loop thread ${fmt(loginMainCpu / loginsOk, 2)} ms): CPU ratio ${fmt(cpuPerVerify / cpuPerLogin, 3)}`,
  );
  console.log(`  load generator and probe (this process): ${fmt(generatorCpu / loginsOk, 2)} ms CPU per login, on the same cores`);
  console.log(
    `/healthz while logins saturate:           p50 ${fmt(percentile(health, 50), 2)} ms, p99 ${fmt(p99, 2)} ms over ${health.length} probes  (target p99 <= 20 ms: ${p99 <= 20 ? "met" : "MISSED"})`,
  );

  if (!loginsOnly) {
    const sqliteMagic = await magicLinkRate(sqlite, seconds * 1000);
    console.log(`magic link generate + verify (SQLite):    ${fmt(sqliteMagic)} pairs/s`);
  }
} finally {
  await probe.close();
  await sqlite.stop();
}

// ---------------------------------------------------------------- PostgreSQL: magic links
const database = loginsOnly ? undefined : await scratchPostgres();
if (database) {
  const server = await startServer(database.url);
  try {
    await magicLinkRate(server, 2000); // warm-up
    const rate = await magicLinkRate(server, seconds * 1000);
    console.log(`magic link generate + verify (PostgreSQL): ${fmt(rate)} pairs/s`);
  } finally {
    await server.stop();
    await database.drop();
  }
}
