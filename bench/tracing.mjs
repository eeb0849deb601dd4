// What tracing costs the gateway (docs/gateway.md, "Tracing"), all figures from one run. The same
// gateway process (the built dist/, one route, no plugins) in four builds: without a tracer (the build
// before tracing: nothing propagated), with the OpenTelemetry variables absent (W3C Trace Context only,
// what every gateway does by default), and exporting every span over OTLP/HTTP to a local receiver in
// http/protobuf and in http/json. The upstream and the gateway under test are pinned to core 0; the
// load generator (autocannon) and the OTLP receiver to core 1 (the receiver stands for a collector on
// another machine). Every request carries a caller's traceparent. Scenarios take turns: each round
// runs every one once, a ratio is taken between the runs of one round, and the table gives medians
// over the rounds.
//
//   node scripts/build.mjs && node bench/tracing.mjs [--seconds 5] [--rounds 5] [--connections 50]
//
// Targets: exporting (http/protobuf) / variables absent >= 0.85; variables absent / no tracer >= 0.98.
// Reported: exporting in http/json, and 1 trace in 10 (OTEL_TRACES_SAMPLER), over variables absent; the
// same ratios from the CPU the gateway process spent per request (/proc: what a busy neighbour on a
// shared machine moves least); the p99 exporting adds; and the share of the spans made that reached
// the receiver (the SDK's batch processor drops spans when its queue is full: a figure that hides
// dropped spans would flatter the exporting builds).
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import autocannon from "autocannon";
import { freePort, median, pinToCore, printTable, root, spawnNode } from "./support.mjs";

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i === -1 ? fallback : args[i + 1];
};
const seconds = Number(flag("seconds", "5"));
const rounds = Number(flag("rounds", "5"));
const connections = Number(flag("connections", "50"));

if (!existsSync(join(root, "dist", "src", "tracing", "create-tracing.js"))) {
  console.error("dist/ has no tracing: run `node scripts/build.mjs` first");
  process.exit(1);
}

const work = mkdtempSync(join(tmpdir(), "gatehouse-bench-tracing-"));
const stopping = [];
const stopAll = async () => {
  for (const stop of stopping.splice(0).reverse()) await stop().catch(() => {});
  rmSync(work, { recursive: true, force: true });
};

const upstreamScript = `
const body = Buffer.from('{"plant":"monstera","ok":true}');
const server = require("node:http").createServer((req, res) => {
  req.resume();
  res.writeHead(200, { "content-type": "application/json", "content-length": body.length });
  res.end(body);
});
server.keepAliveTimeout = 75_000;
server.listen(Number(process.env.PORT), "127.0.0.1", () => console.log("upstream ready"));
`;

// An OTLP/HTTP receiver that answers at once and counts the spans of each export: for protobuf it walks
// only the framing (ExportTraceServiceRequest.resource_spans = 1, ResourceSpans.scope_spans = 2,
// ScopeSpans.spans = 2), for JSON it counts "spanId" keys. GET answers the running totals by path.
const receiverScript = `
const spans = {};
function varint(buf, at) {
  let value = 0, shift = 0, byte;
  do { byte = buf[at.i++]; value += (byte & 0x7f) * 2 ** shift; shift += 7; } while (byte & 0x80);
  return value;
}
function each(buf, start, end, field, fn) {
  const at = { i: start };
  while (at.i < end) {
    const tag = varint(buf, at);
    const wire = tag & 7;
    if (wire === 2) { const len = varint(buf, at); if (tag >>> 3 === field) fn(at.i, at.i + len); at.i += len; }
    else if (wire === 0) varint(buf, at);
    else if (wire === 1) at.i += 8;
    else if (wire === 5) at.i += 4;
    else return;
  }
}
require("node:http").createServer((req, res) => {
  if (req.method === "GET") { res.end(JSON.stringify(spans)); return; }
  spans[req.url] ??= 0;
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks);
    if ((req.headers["content-type"] || "").startsWith("application/json")) {
      spans[req.url] += body.toString().split('"spanId"').length - 1;
      res.writeHead(200, { "content-type": "application/json" }); res.end("{}");
    } else {
      each(body, 0, body.length, 1, (a, b) => each(body, a, b, 2, (c, d) => each(body, c, d, 2, () => spans[req.url]++)));
      res.writeHead(200, { "content-type": "application/x-protobuf" }); res.end();
    }
  });
}).listen(Number(process.env.PORT), "127.0.0.1", () => console.log("receiver ready"));
`;

// The gateway under test. TRACER=none: no tracer (createGateway's default); absent: createTracing
// without settings, as when the OpenTelemetry variables are absent; otlp: the settings read from the
// OTEL_* variables, as gatehouse gateway reads them.
const gatewayScript = `
import { createGateway } from "./dist/src/gateway/gateway.js";
import { readConfigDocument } from "./dist/src/domain/config/read-config-document.js";
import { createLoggers } from "./dist/src/server/logger.js";
import { createTracing } from "./dist/src/tracing/create-tracing.js";
import { readTracingSettings } from "./dist/src/tracing/tracing-settings.js";
const mode = process.env.TRACER;
const problems = [];
const tracing = mode === "none" ? undefined : await createTracing(mode === "otlp" ? readTracingSettings(process.env, problems) : undefined, "bench-gateway");
if (problems.length > 0 || (mode === "otlp") !== (tracing?.exporting ?? false)) throw new Error("tracing is not as asked: " + JSON.stringify(problems));
const loggers = createLoggers("info");
const gateway = createGateway({
  host: "127.0.0.1", port: Number(process.env.PORT), adminPort: 0, logger: loggers.app,
  ...(tracing ? { tracer: tracing.gateway } : {}),
});
gateway.apply({
  organizationId: "bench", issuer: "http://127.0.0.1/bench", audience: "bench", revision: 1,
  document: readConfigDocument("version: 1\\nroutes:\\n  - name: plants\\n    path: /plants\\n    upstream: " + process.env.UPSTREAM_URL + "\\n").document,
  jwks: { keys: [] }, revokedSessions: new Map(), consumers: new Map(), secrets: new Map(),
});
await gateway.listen();
console.log("gateway ready");
process.on("SIGTERM", () => gateway.close().then(() => tracing?.shutdown()).then(() => { loggers.flush(); process.exit(0); }));
`;

async function start(name, script, env, { module = false, core = 0 } = {}) {
  const port = await freePort();
  const server = await spawnNode([...(module ? ["--input-type=module"] : []), "-e", script], {
    env: { PORT: String(port), ...env },
    core,
    ready: /ready/,
  });
  stopping.push(server.stop);
  return { name, port, pid: server.child.pid, url: `http://127.0.0.1:${port}` };
}

/**
 * CPU seconds a process has used (user + system, all its threads; /proc/<pid>/stat fields 14 and 15, in
 * clock ticks of 1/100 s), or NaN where there is no /proc. Divided by the requests served, it is what a
 * request costs the gateway whatever else the machine runs: a figure of its own beside req/s, which a
 * busy neighbour on a shared machine moves.
 */
function cpuSeconds(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

/** Requests answered in a run of `duration` seconds, and its throughput and latency. */
async function run(url, duration) {
  const result = await autocannon({
    url,
    connections,
    duration,
    headers: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" },
  });
  const failures = result.non2xx + result.errors + result.timeouts;
  if (failures > 0) throw new Error(`${url}: ${failures} failed requests`);
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, ok: result["2xx"] };
}

/** Spans the receiver counted, by the path they were sent to. */
const spansReceived = async (receiver) => await (await fetch(`${receiver.url}/count`)).json();

try {
  const upstream = await start("upstream", upstreamScript, {}, { core: 0 });
  const receiver = await start("OTLP receiver", receiverScript, {}, { core: 1 });
  // Each exporting build sends to a path of its own, so the spans it made and those received can be compared.
  const otlp = (protocol, path, extra = {}) => ({
    TRACER: "otlp",
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/${path}/v1/traces`,
    OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
    OTEL_SERVICE_NAME: `bench-${path}`,
    ...extra,
  });
  const gateway = (name, env) => start(name, gatewayScript, { UPSTREAM_URL: upstream.url, ...env }, { module: true, core: 0 });
  const scenarios = [
    { key: "none", server: await gateway("no tracer (nothing propagated)", { TRACER: "none" }) },
    { key: "absent", server: await gateway("OpenTelemetry variables absent (W3C Trace Context only)", { TRACER: "absent" }) },
    { key: "protobuf", server: await gateway("exporting, OTLP http/protobuf", otlp("http/protobuf", "protobuf")) },
    { key: "json", server: await gateway("exporting, OTLP http/json", otlp("http/json", "json")) },
    {
      key: "sampled",
      server: await gateway(
        "exporting 1 trace in 10, OTLP http/protobuf (OTEL_TRACES_SAMPLER=traceidratio, OTEL_TRACES_SAMPLER_ARG=0.1)",
        otlp("http/protobuf", "sampled", { OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.1" }),
      ),
    },
  ];
  for (const { server } of scenarios) {
    const response = await fetch(`${server.url}/plants`);
    if (response.status !== 200) throw new Error(`${server.name}: ${response.status} ${await response.text()}`);
  }
  process.stderr.write(`servers up; ${rounds} round(s) of ${seconds} s runs, ${connections} connections\n`);

  pinToCore(1);
  const runs = Object.fromEntries(scenarios.map((s) => [s.key, []]));
  /** Requests each exporting build answered (the check before the runs and the warm-ups included): 2 spans each. */
  const answered = { protobuf: 1, json: 1 };
  for (let round = 0; round < rounds; round++) {
    for (const { key, server } of scenarios) {
      const warmup = await run(`${server.url}/plants`, 1);
      const cpuBefore = cpuSeconds(server.pid);
      const result = await run(`${server.url}/plants`, seconds);
      result.cpu = ((cpuSeconds(server.pid) - cpuBefore) * 1e6) / result.ok;
      runs[key].push(result);
      // autocannon counts the answers that arrive within the run; the requests in flight when it ends
      // (one per connection) are answered too, and traced.
      if (key in answered) answered[key] += warmup.ok + result.ok + 2 * connections;
    }
  }
  // The last batches leave within the batch delay (5 s by default).
  await new Promise((resolve) => setTimeout(resolve, 6_000));
  const received = await spansReceived(receiver);

  const of = (key, field) => median(runs[key].map((r) => r[field]));
  const ratio = (a, b) => median(runs[a].map((r, i) => r.rps / runs[b][i].rps));
  /** The same ratio from the CPU a request costs (b's over a's: higher is better, as with req/s). */
  const cpuRatio = (a, b) => median(runs[a].map((r, i) => runs[b][i].cpu / r.cpu));
  printTable(
    `GET through one route with a caller's traceparent, ${connections} connections, gateway on core 0, medians of ${rounds} round(s) of ${seconds} s (bench/tracing.mjs)`,
    scenarios.map(({ key, server }) => ({
      scenario: server.name,
      "req/s": Math.round(of(key, "rps")),
      "p50 ms": of(key, "p50"),
      "p99 ms": of(key, "p99"),
      "CPU µs/request": of(key, "cpu").toFixed(1),
    })),
  );
  const verdict = (value, target) => (target === undefined ? "reported" : value >= target ? "met" : "MISSED");
  const made = 2 * answered.protobuf;
  const madeJson = 2 * answered.json;
  const receivedProtobuf = received["/protobuf/v1/traces"] ?? 0;
  const receivedJson = received["/json/v1/traces"] ?? 0;
  printTable(
    "Ratios (medians of per-round ratios)",
    [
      ["exporting (http/protobuf) / variables absent", ratio("protobuf", "absent"), 0.85],
      ["exporting (http/json) / variables absent", ratio("json", "absent"), undefined],
      ["variables absent / no tracer", ratio("absent", "none"), 0.98],
      ["by CPU per request: exporting (http/protobuf) / variables absent", cpuRatio("protobuf", "absent"), undefined],
      ["by CPU per request: exporting (http/json) / variables absent", cpuRatio("json", "absent"), undefined],
      ["by CPU per request: variables absent / no tracer", cpuRatio("absent", "none"), undefined],
      ["exporting 1 trace in 10 (http/protobuf) / variables absent", ratio("sampled", "absent"), undefined],
      [`spans received / spans made, http/protobuf (${receivedProtobuf} of ${made})`, receivedProtobuf / made, undefined],
      [`spans received / spans made, http/json (${receivedJson} of ${madeJson})`, receivedJson / madeJson, undefined],
      ["p99 added by exporting, http/protobuf (ms)", median(runs.protobuf.map((r, i) => r.p99 - runs.absent[i].p99)), undefined],
    ].map(([figure, value, target]) => ({
      figure,
      value: value.toFixed(2),
      target: target === undefined ? "-" : `>= ${target.toFixed(2)}`,
      verdict: verdict(value, target),
    })),
  );
} finally {
  await stopAll();
}
