// Baseline: what the one request pipeline costs on each door.
//
// - The cheapest real unary RPC (grpc.health.v1.Health/Check) over Connect JSON,
//   Connect binary and the REST door (GET /healthz), and an authenticated read
//   (ConfigService/GetConfig of a small document with an API key) over REST and
//   Connect JSON, against raw node:http answering the same bytes (autocannon).
// - gRPC on the h2c port against a bare node:http2 server answering the same
//   gRPC frames (h2load, from Debian's nghttp2-client: installed when missing).
//
// Servers are pinned to core 0, the load generator to core 1. The paths take
// turns: each round runs every path once, the raw server first, and a path's
// ratio is taken against the raw run of its own round; the table gives medians
// over the rounds, so a noisy neighbour slowing the machine for a few seconds
// moves one round, not the figure.
//
//   node bench/baseline.mjs [--duration 4] [--rounds 3] [--connections 1,50] [--no-grpc]
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, load, median, pinToCore, printTable, root, spawnNode, startGatehouse } from "./support.mjs";

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i === -1 ? fallback : args[i + 1];
};
const duration = Number(flag("duration", "4"));
const rounds = Number(flag("rounds", "3"));
const connectionLevels = flag("connections", "1,50").split(",").map(Number);
const withGrpc = !args.includes("--no-grpc");

// The bytes Health/Check answers in JSON; the raw server answers them to anything.
const rawScript = `
const body = Buffer.from('{"status":"SERVING"}');
require("node:http").createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    res.writeHead(200, { "content-type": "application/json", "content-length": body.length });
    res.end(body);
  });
}).listen(Number(process.env.PORT), "127.0.0.1", () => console.log("raw ready"));
`;

// The same frames the gRPC door answers Health/Check with: headers, one message (status SERVING), trailers.
const rawGrpcScript = `
const message = Buffer.from([0, 0, 0, 0, 2, 0x08, 0x01]);
const server = require("node:http2").createServer();
server.on("stream", (stream) => {
  stream.on("error", () => {});
  stream.resume();
  stream.on("end", () => {
    stream.respond({ ":status": 200, "content-type": "application/grpc+proto" }, { waitForTrailers: true });
    stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
    stream.end(message);
  });
});
server.listen(Number(process.env.PORT), "127.0.0.1", () => console.log("raw h2 ready"));
`;

const rawPort = await freePort();
const rawGrpcPort = await freePort();
const raw = await spawnNode(["-e", rawScript], { env: { PORT: String(rawPort) }, core: 0, ready: /raw ready/ });
const rawGrpc = await spawnNode(["-e", rawGrpcScript], { env: { PORT: String(rawGrpcPort) }, core: 0, ready: /raw h2 ready/ });
const gatehouse = await startGatehouse({ core: 0, env: { GATEWAY_PORT: "off" } });
process.stderr.write(`servers up (raw pid ${raw.child.pid}, gatehouse pid ${gatehouse.pid}); ${duration} s per run\n`);
const org = gatehouse.credentials.organization_id;
const apiKey = gatehouse.credentials.api_key;
{
  // A small configuration document to read back.
  const put = await fetch(`${gatehouse.url}/organization/${org}/config`, {
    method: "PUT",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/yaml" },
    body: "version: 1\ndomains:\n  - name: api.example.com\nroutes:\n  - name: plants\n    path: /plants\n    upstream: http://127.0.0.1:8081\n",
  });
  if (put.status !== 200) throw new Error(`PUT config: ${put.status} ${await put.text()}`);
}

const check = "/grpc.health.v1.Health/Check";
const scenarios = [
  {
    name: "raw node:http",
    url: `http://127.0.0.1:${rawPort}/`,
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}",
  },
  {
    name: "Connect JSON (lean path)",
    url: gatehouse.url + check,
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}",
  },
  {
    name: "Connect binary (lean path)",
    url: gatehouse.url + check,
    method: "POST",
    headers: { "content-type": "application/proto" },
    body: "",
  },
  {
    name: "Connect JSON with Connect-Timeout-Ms",
    url: gatehouse.url + check,
    method: "POST",
    headers: { "content-type": "application/json", "connect-timeout-ms": "10000" },
    body: "{}",
  },
  { name: "REST GET /healthz", url: `${gatehouse.url}/healthz`, method: "GET", headers: {} },
  {
    name: "REST GET config (API key)",
    url: `${gatehouse.url}/organization/${org}/config`,
    method: "GET",
    headers: { authorization: `Bearer ${apiKey}` },
  },
  {
    name: "Connect JSON GetConfig (API key)",
    url: `${gatehouse.url}/svc.v1.ConfigService/GetConfig`,
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ organizationId: org }),
  },
];

/** h2load (nghttp2-client), installed from Debian's packages when missing. */
function ensureH2load() {
  if (spawnSync("sh", ["-c", "command -v h2load"]).status === 0) return true;
  const installed = spawnSync("apt-get", ["install", "-y", "-q", "nghttp2-client"], {
    stdio: "ignore",
    env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
  });
  return installed.status === 0 && spawnSync("sh", ["-c", "command -v h2load"]).status === 0;
}

const grpcBody = join(mkdtempSync(join(tmpdir(), "gatehouse-h2load-")), "check.bin");
writeFileSync(grpcBody, Buffer.from([0, 0, 0, 0, 0]));

/** One h2load run of gRPC Health/Check: req/s and whether every request answered 2xx. */
function h2load(url, connections) {
  const taskset = spawnSync("sh", ["-c", "command -v taskset"]).status === 0;
  const argv = ["-D", String(duration), "--warm-up-time=1", "-c", String(connections), "-m", "1", "-d", grpcBody];
  argv.push("-H", "content-type: application/grpc", "-H", "te: trailers", url);
  const result = spawnSync(taskset ? "taskset" : "h2load", taskset ? ["-c", "1", "h2load", ...argv] : argv, { encoding: "utf8" });
  const rps = Number(/finished in [\d.]+m?s, ([\d.]+) req\/s/.exec(result.stdout)?.[1] ?? 0);
  const failed = Number(
    /requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, (\d+) errored/.exec(result.stdout)?.[2] ?? 1,
  );
  const non2xx = Number(
    /status codes: \d+ 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/
      .exec(result.stdout)
      ?.slice(1)
      .reduce((a, b) => a + Number(b), 0) ?? 0,
  );
  const mean = /time for request:\s+\S+\s+\S+\s+(\S+)/.exec(result.stdout)?.[1] ?? "";
  return { rps, failures: failed + non2xx, mean, output: result.stdout };
}

pinToCore(1);
const rows = [];
try {
  for (const connections of connectionLevels) {
    const runs = scenarios.map(() => []);
    for (let round = 0; round < rounds; round++) {
      let raw;
      for (const [i, scenario] of scenarios.entries()) {
        const result = await load({ ...scenario, connections, duration });
        if (result.failures > 0) throw new Error(`${scenario.name}: ${result.failures} failed requests`);
        raw ??= result.rps;
        runs[i].push({ ...result, ratio: result.rps / raw });
      }
    }
    scenarios.forEach((scenario, i) => {
      const of = (key) => median(runs[i].map((run) => run[key]));
      rows.push({
        connections,
        path: scenario.name,
        "req/s": Math.round(of("rps")),
        "p50 ms": of("p50"),
        "p99 ms": of("p99"),
        "vs raw": of("ratio").toFixed(2),
        "vs raw, each round": runs[i].map((run) => run.ratio.toFixed(2)).join(" "),
      });
    });
  }
  if (withGrpc && ensureH2load()) {
    for (const connections of connectionLevels) {
      const runs = { raw: [], gatehouse: [] };
      for (let round = 0; round < rounds; round++) {
        const bare = h2load(`http://127.0.0.1:${rawGrpcPort}${check}`, connections);
        const door = h2load(`${gatehouse.grpcUrl}${check}`, connections);
        for (const [name, run] of [
          ["bare", bare],
          ["door", door],
        ]) {
          if (run.rps === 0 || run.failures > 0) throw new Error(`gRPC ${name}: ${run.failures} failed\n${run.output}`);
        }
        runs.raw.push({ ...bare, ratio: 1 });
        runs.gatehouse.push({ ...door, ratio: door.rps / bare.rps });
      }
      for (const [path, list] of [
        ["bare node:http2 (gRPC frames)", runs.raw],
        ["gRPC door (h2c port)", runs.gatehouse],
      ]) {
        rows.push({
          connections,
          path,
          "req/s": Math.round(median(list.map((r) => r.rps))),
          "p50 ms": "-",
          "p99 ms": `mean ${list.map((r) => r.mean).join(" ")}`,
          "vs raw": median(list.map((r) => r.ratio)).toFixed(2),
          "vs raw, each round": list.map((r) => r.ratio.toFixed(2)).join(" "),
        });
      }
    }
  } else if (withGrpc) {
    process.stderr.write("h2load is not installed and could not be installed: the gRPC rows are left out\n");
  }
} finally {
  await gatehouse.stop();
  await raw.stop();
  await rawGrpc.stop();
}
printTable(
  `Request pipeline baseline (server on one core, medians of ${rounds} rounds of ${duration} s runs, ${join("bench", "baseline.mjs")})`,
  rows,
);
void root;
