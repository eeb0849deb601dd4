// bench/events: what events cost and how fast they arrive (docs/events.md).
//
//   1. The outbox's cost on the write path: password registrations per second with one webhook
//      endpoint (each registration records identity.created and session.created and schedules
//      their deliveries, in its transaction, and the instance delivers them) against the same server
//      with none (the events are recorded all the same), in alternating rounds; the median of the
//      rounds' ratios. Target: with / without >= 0.9.
//   2. Commit -> delivery received, p50 and p99, an idle receiver, SQLite and PostgreSQL: one event
//      at a time, from the event's timestamp (taken in the transaction, just before the commit) to
//      the moment the receiver has the whole request. Baseline of the same run: a bare POST from
//      this process to the same receiver. Targets: p50 <= 20 ms, p99 <= 100 ms.
//   3. Deliveries per second of one instance to a receiver answering at once: 3,000 deliveries made
//      due at one instant (their first attempts answered 503 with an HTTP-date Retry-After), then
//      drained. Baseline of the same run: bare keep-alive POSTs from this process to the receiver,
//      16 at a time (the worker's per-endpoint bound). Target: >= 1,000/s.
//
//   npm run build && node bench/events.mjs [--rounds 5] [--seconds 4] [--samples 300] [--deliveries 3000]
//
// PostgreSQL: BENCH_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/postgres); a scratch
// database is created there and dropped afterwards. Skipped when unreachable.
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { freePort, median, option, percentile, printTable, root } from "./support.mjs";

const bin = join(root, "bin/gatehouse.js");
const rounds = option("rounds", 5);
const seconds = option("seconds", 4);
const samples = option("samples", 300);
const deliveries = option("deliveries", 3000);
const password = "correct horse battery staple";

if (!existsSync(join(root, "dist/src/cli/main.js"))) {
  console.error("build first: npm run build");
  process.exit(1);
}

function gatehouse(env, ...argv) {
  const result = spawnSync(process.execPath, [bin, ...argv], { env: { ...process.env, ...env }, encoding: "utf8" });
  if (result.status !== 0) throw new Error(`gatehouse ${argv.join(" ")} failed: ${result.stderr}`);
  return result.stdout;
}

/** `gatehouse serve` over a store of its own (SQLite, or the PostgreSQL database given), passwords on. */
async function startServer(databaseUrl) {
  const dataDir = mkdtempSync(join(tmpdir(), "gatehouse-bench-"));
  const port = await freePort();
  const env = {
    GATEHOUSE_DATA_DIR: dataDir,
    PORT: String(port),
    GRPC_PORT: String(await freePort()),
    SAMPLE_PORT: String(await freePort()),
    GATEWAY_PORT: "off",
    // The receiver listens on this machine.
    WEBHOOKS_ALLOW_PRIVATE_NETWORKS: "true",
    LOG_LEVEL: "warn",
    ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
  };
  const credentials = JSON.parse(gatehouse(env, "init", "--json"));
  gatehouse(env, "settings", "set", "--org", credentials.organization_id, "password=true", "ip_limit_per_minute=1000000");
  const child = spawn(process.execPath, [bin, "serve"], { env: { ...process.env, ...env }, stdio: ["ignore", "ignore", "inherit"] });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (Date.now() > deadline) throw new Error("the server did not start");
    await new Promise((resolve) => setTimeout(resolve, 100));
    if (
      await fetch(`${url}/readyz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
  }
  const org = credentials.organization_id;
  const api = async (method, path, body) => {
    const response = await fetch(`${url}/organization/${org}/webhooks${path}`, {
      method,
      headers: { authorization: `Bearer ${credentials.api_key}`, ...(body ? { "content-type": "application/json" } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
    return JSON.parse(text);
  };
  return {
    url,
    credentials,
    api,
    async stop() {
      child.kill("SIGTERM");
      await new Promise((resolve) => child.once("exit", resolve));
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A receiver in this process: records when each delivery's body was complete; `answer` decides the status. */
async function startReceiver() {
  const receiver = {
    answer: () => ({ status: 204 }),
    onDelivery: () => {},
    url: "",
  };
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      const at = Date.now();
      const body = Buffer.concat(chunks).toString();
      const { status, headers } = receiver.answer(body);
      res.writeHead(status, headers ?? {}).end();
      if (req.headers["webhook-id"]) receiver.onDelivery(JSON.parse(body), at, status);
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  receiver.url = `http://127.0.0.1:${server.address().port}`;
  receiver.close = () => new Promise((resolve) => server.close(resolve) && server.closeAllConnections());
  return receiver;
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

/** Password registrations per second for `ms`, `concurrency` at a time, each with a new identifier. */
async function registrations(server, ms, concurrency) {
  let done = 0;
  let failed = 0;
  const until = Date.now() + ms;
  const started = Date.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < until) {
        const response = await fetch(`${server.url}/identity/register/password`, {
          method: "POST",
          headers: { authorization: `Bearer ${server.credentials.publishable_key}`, "content-type": "application/json" },
          body: JSON.stringify({ identifier: `bench-${randomBytes(8).toString("hex")}@bench.example`, password }),
        });
        await response.arrayBuffer();
        if (response.ok) done++;
        else failed++;
      }
    }),
  );
  if (failed > 0) console.log(`  ${failed} registrations failed`);
  return done / ((Date.now() - started) / 1000);
}

/** Commit -> receipt of `count` test events sent one at a time; the bare POST round trip of the same receiver. */
async function latencies(server, receiver, endpointId, count) {
  const measured = [];
  for (let i = 0; i < count + 20; i++) {
    const arrived = new Promise((resolve) => {
      receiver.onDelivery = (event, at) => resolve(at - Date.parse(event.timestamp));
    });
    await server.api("POST", `/${endpointId}/test`, {});
    const ms = await arrived;
    if (i >= 20) measured.push(ms); // the first 20 warm up
  }
  const agent = new http.Agent({ keepAlive: true });
  const bare = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    await new Promise((resolve, reject) => {
      const req = http.request(
        `${receiver.url}/bare`,
        { method: "POST", agent, headers: { "content-type": "application/json" } },
        (res) => {
          res.resume();
          res.on("end", resolve);
        },
      );
      req.on("error", reject);
      req.end("{}");
    });
    bare.push(performance.now() - started);
  }
  agent.destroy();
  return { measured, bare };
}

const fmt = (n, digits = 1) => (n === undefined ? "-" : n.toFixed(digits));
console.log(`bench/events: ${availableParallelism()} cores, node ${process.version}; ${rounds} rounds of ${seconds} s of registrations`);
const results = [];

// ---------------------------------------------------------------- 1. the outbox on the write path (SQLite)
{
  const receiver = await startReceiver();
  const server = await startServer(undefined);
  try {
    const concurrency = availableParallelism() * 2;
    await registrations(server, 1_000, concurrency); // warm-up
    const none = [];
    const one = [];
    let endpointId;
    for (let round = 0; round < rounds; round++) {
      if (endpointId) await server.api("DELETE", `/${endpointId}`);
      endpointId = undefined;
      none.push(await registrations(server, seconds * 1000, concurrency));
      endpointId = (await server.api("POST", "", { url: `${receiver.url}/hook` })).endpoint.endpoint_id;
      one.push(await registrations(server, seconds * 1000, concurrency));
    }
    // Each round's two phases run back to back: the median of the rounds' ratios is what drift on a shared machine moves least.
    const ratio = median(one.map((value, i) => value / none[i]));
    results.push({
      figure: "password registrations/s, one webhook endpoint / none (SQLite)",
      value: `${fmt(median(one))} / ${fmt(median(none))}`,
      ratio: fmt(ratio, 2),
      target: ">= 0.9",
      met: ratio >= 0.9 ? "yes" : "NO",
    });
  } finally {
    await server.stop();
    await receiver.close();
  }
}

// ---------------------------------------------------------------- 2. commit -> delivery, SQLite and PostgreSQL
for (const provider of ["SQLite", "PostgreSQL"]) {
  const scratch = provider === "PostgreSQL" ? await scratchPostgres() : undefined;
  if (provider === "PostgreSQL" && !scratch) continue;
  const receiver = await startReceiver();
  const server = await startServer(scratch?.url);
  try {
    const endpointId = (await server.api("POST", "", { url: `${receiver.url}/latency` })).endpoint.endpoint_id;
    const { measured, bare } = await latencies(server, receiver, endpointId, samples);
    const p50 = percentile(measured, 50);
    const p99 = percentile(measured, 99);
    results.push({
      figure: `commit -> delivery received p50 (${provider}; bare POST p50 ${fmt(percentile(bare, 50), 2)} ms)`,
      value: `${fmt(p50)} ms`,
      ratio: fmt(p50 / percentile(bare, 50), 1),
      target: "<= 20 ms",
      met: p50 <= 20 ? "yes" : "NO",
    });
    results.push({
      figure: `commit -> delivery received p99 (${provider}; bare POST p99 ${fmt(percentile(bare, 99), 2)} ms)`,
      value: `${fmt(p99)} ms`,
      ratio: fmt(p99 / percentile(bare, 99), 1),
      target: "<= 100 ms",
      met: p99 <= 100 ? "yes" : "NO",
    });
  } finally {
    await server.stop();
    await receiver.close();
    await scratch?.drop();
  }
}

// ---------------------------------------------------------------- 3. deliveries per second, one instance (SQLite)
{
  const receiver = await startReceiver();
  const server = await startServer(undefined);
  try {
    const endpointId = (await server.api("POST", "", { url: `${receiver.url}/drain` })).endpoint.endpoint_id;
    // Every first attempt is told to come back at one instant (Retry-After as an HTTP date, whole seconds).
    const dueAt = new Date(Math.ceil((Date.now() + 5_000 + deliveries * 8) / 1000) * 1000);
    receiver.answer = () => ({ status: 503, headers: { "retry-after": dueAt.toUTCString() } });
    let refused = 0;
    const received = [];
    receiver.onDelivery = (_event, at, status) => {
      if (status === 503) refused++;
      else received.push(at);
    };
    const seedStarted = Date.now();
    for (let i = 0; i < deliveries; i += 32) {
      await Promise.all(Array.from({ length: Math.min(32, deliveries - i) }, () => server.api("POST", `/${endpointId}/test`, {})));
    }
    const seeded = Date.now();
    while (refused < deliveries && Date.now() < dueAt.getTime()) await new Promise((resolve) => setTimeout(resolve, 20));
    if (Date.now() >= dueAt.getTime()) console.log("  seeding outlasted the due time: the drain overlaps it");
    receiver.answer = () => ({ status: 204 });
    const deadline = dueAt.getTime() + 120_000;
    while (received.length < deliveries && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    const drainMs = Math.max(1, Math.max(...received) - dueAt.getTime());
    const rate = (received.length / drainMs) * 1000;
    // The baseline: bare keep-alive POSTs to the same receiver, 16 at a time.
    const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
    const bareStarted = performance.now();
    let bareDone = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (bareDone < deliveries) {
          bareDone++;
          await new Promise((resolve, reject) => {
            const req = http.request(
              `${receiver.url}/bare`,
              { method: "POST", agent, headers: { "content-type": "application/json" } },
              (res) => {
                res.resume();
                res.on("end", resolve);
              },
            );
            req.on("error", reject);
            req.end("{}");
          });
        }
      }),
    );
    const bareRate = (bareDone / (performance.now() - bareStarted)) * 1000;
    agent.destroy();
    console.log(
      `  seeded ${deliveries} events in ${seeded - seedStarted} ms; ${received.length} delivered in ${drainMs} ms from the instant they fell due`,
    );
    results.push({
      figure: `deliveries/s, one instance, receiver answering at once (SQLite; bare POSTs ${fmt(bareRate, 0)}/s)`,
      value: fmt(rate, 0),
      ratio: fmt(rate / bareRate, 2),
      target: ">= 1000",
      met: rate >= 1000 ? "yes" : "NO",
    });
  } finally {
    await server.stop();
    await receiver.close();
  }
}

printTable("bench/events (ratio: against the baseline of the same run)", results);
