// The sample plant API under load: POST /plants (session verification, lossless
// JSON parse, schema validation, one insert) against the cheapest platform RPC
// (grpc.health.v1.Health/Check, lean Connect JSON path) and ValidateSession (the
// same session check as an RPC), all on one `gatehouse serve` pinned to core 0;
// the load generator runs on core 1. Every POST carries a fresh id.
//
//   node bench/plants.mjs [--duration 5] [--connections 1,50]
//   DATABASE_URL=postgresql://... node bench/plants.mjs      (PostgreSQL instead of SQLite)
import autocannon from "autocannon";
import { printTable, startGatehouse } from "./support.mjs";

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i === -1 ? fallback : args[i + 1];
};
const duration = Number(flag("duration", "5"));
const connectionLevels = flag("connections", "1,50").split(",").map(Number);

const gatehouse = await startGatehouse({ core: 0, env: process.env.DATABASE_URL ? { DATABASE_URL: process.env.DATABASE_URL } : {} });
process.stderr.write(`gatehouse pid ${gatehouse.pid} (${process.env.DATABASE_URL ? "PostgreSQL" : "SQLite"}); ${duration} s per run\n`);

async function rpc(method, body, key) {
  const response = await fetch(`${gatehouse.url}/svc.v1.IdentityService/${method}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${method}: ${response.status} ${await response.text()}`);
  return response.json();
}

const sk = gatehouse.credentials.secret_key;
const { token: link } = await rpc("GenerateMagicLink", { identifier: "bench@example.com" }, sk);
const { session } = await rpc("VerifyMagicLink", { token: link }, sk);

// Ids above 2^53 so every request exercises the exact int64 path.
let nextId = 2n ** 53n;
const plantRequest = {
  method: "POST",
  path: "/plants",
  headers: { "content-type": "application/json", authorization: `Bearer ${session.token}` },
  setupRequest(req) {
    return { ...req, body: `{"name": "Monstera deliciosa", "tag": "aroid", "id": ${nextId++}}` };
  },
};

const scenarios = [
  {
    name: "Health/Check (no-op RPC)",
    options: {
      url: `${gatehouse.url}/grpc.health.v1.Health/Check`,
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    },
  },
  {
    name: "ValidateSession RPC",
    options: {
      url: `${gatehouse.url}/svc.v1.IdentityService/ValidateSession`,
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${sk}` },
      body: JSON.stringify({ token: session.token }),
    },
  },
  { name: "GET /openapi.json", options: { url: `${gatehouse.sampleUrl}/openapi.json` } },
  { name: "POST /plants (creates)", options: { url: gatehouse.sampleUrl, requests: [plantRequest] } },
  {
    // Session checked, body parsed and validated, nothing written: the cost without the insert.
    name: "POST /plants (400, id 0)",
    status: 400,
    options: {
      url: `${gatehouse.sampleUrl}/plants`,
      method: "POST",
      headers: plantRequest.headers,
      body: `{"name": "Monstera deliciosa", "tag": "aroid", "id": 0}`,
    },
  },
];

async function run({ options, status = 200 }, connections) {
  await autocannon({ ...options, connections, duration: 1 });
  const result = await autocannon({ ...options, connections, duration });
  const unexpected = status === 200 ? result.non2xx : result.requests.total - result[`${String(status)[0]}xx`];
  const failures = unexpected + result.errors + result.timeouts;
  if (failures > 0) throw new Error(`${failures} failed requests`);
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99 };
}

const rows = [];
try {
  for (const connections of connectionLevels) {
    const results = [];
    for (const scenario of scenarios) results.push({ scenario, result: await run(scenario, connections) });
    const baseline = results[0].result.rps;
    for (const { scenario, result } of results) {
      rows.push({
        connections,
        path: scenario.name,
        "req/s": Math.round(result.rps),
        "p50 ms": result.p50,
        "p99 ms": result.p99,
        "vs no-op RPC": (result.rps / baseline).toFixed(2),
      });
    }
  }
} finally {
  await gatehouse.stop();
}
printTable(`Sample plant API (server on one core, ${duration} s runs, bench/plants.mjs)`, rows);
