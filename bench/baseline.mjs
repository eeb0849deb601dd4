// Baseline: the cheapest real unary RPC (grpc.health.v1.Health/Check) over the
// lean Connect JSON and binary paths, the stock connect-node handler and the REST
// shim, against raw node:http answering the same bytes. Servers are pinned to
// core 0, the load generator to core 1. The paths take turns: each round runs
// every path once, raw node:http first, and a path's ratio is taken against the
// raw run of its own round; the table gives medians over the rounds, so a noisy
// neighbour slowing the machine for a few seconds moves one round, not the figure.
//
//   node bench/baseline.mjs [--duration 4] [--rounds 3] [--connections 1,50]
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

const rawPort = await freePort();
const raw = await spawnNode(["-e", rawScript], { env: { PORT: String(rawPort) }, core: 0, ready: /raw ready/ });
const gatehouse = await startGatehouse({ core: 0 });
process.stderr.write(`servers up (raw pid ${raw.child.pid}, gatehouse pid ${gatehouse.pid}); ${duration} s per run\n`);

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
    // A Connect-Timeout-Ms header makes the request take the stock connect-node handler.
    name: "Connect JSON (stock handler)",
    url: gatehouse.url + check,
    method: "POST",
    headers: { "content-type": "application/json", "connect-timeout-ms": "10000" },
    body: "{}",
  },
  { name: "REST shim GET /healthz", url: `${gatehouse.url}/healthz`, method: "GET", headers: {} },
];

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
} finally {
  await gatehouse.stop();
  await raw.stop();
}
printTable(
  `Health/Check baseline (server on one core, medians of ${rounds} rounds of ${duration} s runs, ${join("bench", "baseline.mjs")})`,
  rows,
);
void root;
