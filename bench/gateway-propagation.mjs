// Propagation: from a configuration PUT's answer to the first request each
// gateway routes by the new revision. Two control planes (`gatehouse serve`)
// share one PostgreSQL database; one gateway (`gatehouse gateway`) follows
// each; the PUT goes to the first control plane, so the second gateway learns
// of it through the database's LISTEN/NOTIFY and the second control plane.
// Every change sets a request header to a new value, which the echo upstream
// sends back with the moment it received the request; each gateway is polled,
// one request after another, until it answers it. Two figures per change: until
// the upstream received the first request routed by the new revision (the
// target's figure; every process runs on this machine, so they share one
// clock), and until that request's answer was back at the client (one more
// trip through the gateway).
//
//   node scripts/build.mjs && node bench/gateway-propagation.mjs [--changes 100] [--database postgresql://...] [--pin] [--json]
//
// There is no load generator to keep apart here: the four processes stand for
// four machines, so they may use every core of this one (taskset 0-N, also
// when the caller pinned itself, as bench/gateway.mjs does). --pin puts them
// all on core 0, the worst case of one small host.
//
// Target (issue "The gateway"): p50 <= 10 ms, p99 <= 50 ms.
import { execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { request } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { everyCore, freePort, median, percentile, printTable, root, spawnNode } from "./support.mjs";

const upstreamScript = `
require("node:http").createServer((req, res) => {
  req.resume();
  const at = performance.timeOrigin + performance.now();
  const body = JSON.stringify({ change: req.headers["x-change"] ?? null, at });
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}).listen(Number(process.env.PORT), "127.0.0.1", () => console.log("upstream ready"));
`;

/** One GET through a gateway over a kept-alive connection: the change value the upstream saw, and when (epoch ms). */
function probe(agent, url) {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/probe`, { agent }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => {
        text += chunk;
      });
      res.on("end", () => {
        try {
          const answer = JSON.parse(text);
          resolve({ change: answer.change ?? null, at: answer.at });
        } catch {
          resolve({ change: null, at: 0 });
        }
      });
    });
    req.on("error", reject);
    req.end();
  });
}

/**
 * Measures propagation; returns rows for a table, or throws when PostgreSQL is
 * not reachable at `databaseAdminUrl` (a database of its own is created and dropped).
 */
export async function measurePropagation({
  changes = 100,
  databaseAdminUrl = "postgresql://postgres@127.0.0.1:5432/postgres",
  pin = false,
} = {}) {
  const core = pin ? 0 : everyCore();
  const { default: pg } = await import("pg");
  const admin = new pg.Client({ connectionString: databaseAdminUrl });
  await admin.connect();
  const name = `gatehouse_bench_${randomBytes(4).toString("hex")}`;
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(databaseAdminUrl);
  url.pathname = `/${name}`;
  const databaseUrl = url.toString();
  const work = mkdtempSync(join(tmpdir(), "gatehouse-bench-propagation-"));
  const stops = [];
  const { Agent } = await import("node:http");
  try {
    const masterKey = randomBytes(32).toString("base64");
    const gatehouse = join(root, "bin", "gatehouse.js");
    const controlPlane = async (label) => {
      const [port, grpcPort, samplePort] = await Promise.all([freePort(), freePort(), freePort()]);
      const server = await spawnNode([gatehouse, "serve"], {
        env: {
          PORT: String(port),
          GRPC_PORT: String(grpcPort),
          SAMPLE_PORT: String(samplePort),
          DATABASE_URL: databaseUrl,
          GATEHOUSE_DATA_DIR: join(work, label),
          GATEHOUSE_MASTER_KEY: masterKey,
          GATEWAY_PORT: "off",
          LOG_LEVEL: "warn",
        },
        core,
        ready: /plant API\s+\S+\n/,
      });
      stops.push(server.stop);
      return { url: `http://127.0.0.1:${port}`, output: server.output() };
    };
    const first = await controlPlane("cp1");
    const second = await controlPlane("cp2");
    const field = (label) => new RegExp(`${label}\\s+(\\S+)`).exec(first.output)?.[1] ?? "";
    const org = field("organization_id");
    const apiKey = field("api_key \\(admin\\)");
    const env = {
      ...process.env,
      DATABASE_URL: databaseUrl,
      GATEHOUSE_DATA_DIR: join(work, "cli"),
      GATEHOUSE_MASTER_KEY: masterKey,
      LOG_LEVEL: "warn",
    };
    const keyOf = (gatewayName) =>
      JSON.parse(
        execFileSync(process.execPath, [gatehouse, "keys", "create", "--org", org, "--kind", "gateway", "--name", gatewayName, "--json"], {
          env,
        }),
      ).gateway_key;

    const upstreamPort = await freePort();
    const upstream = await spawnNode(["-e", upstreamScript], { env: { PORT: String(upstreamPort) }, core, ready: /upstream ready/ });
    stops.push(upstream.stop);

    const documentFor = (change) => `version: 1
plugins:
  - name: mark
    type: request-headers
    config: {set: {x-change: "${change}"}}
routes:
  - name: probe
    path: /probe
    upstream: http://127.0.0.1:${upstreamPort}
    plugins: [mark]
`;
    const put = async (change) => {
      const response = await fetch(`${first.url}/organization/${org}/config?strict=true`, {
        method: "PUT",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/yaml" },
        body: documentFor(change),
      });
      if (response.status !== 200) throw new Error(`PUT: ${response.status} ${await response.text()}`);
    };
    await put("c0");

    const gateway = async (label, controlPlaneUrl) => {
      const [port, adminPort] = await Promise.all([freePort(), freePort()]);
      const server = await spawnNode([gatehouse, "gateway"], {
        env: {
          GATEWAY_PORT: String(port),
          GATEWAY_TLS_PORT: "off",
          GATEWAY_ADMIN_PORT: String(adminPort),
          GATEHOUSE_URL: controlPlaneUrl,
          GATEHOUSE_GATEWAY_KEY: keyOf(label.split(" ")[0]),
          GATEWAY_CACHE: join(work, `${label}.json`),
          GATEWAY_ID: label.split(" ")[0],
          LOG_LEVEL: "warn",
        },
        core,
        ready: /Gatehouse gateway\s+\S+/,
      });
      stops.push(server.stop);
      return { label, url: `http://127.0.0.1:${port}`, agent: new Agent({ keepAlive: true, maxSockets: 1 }), output: server.output };
    };
    const gateways = [await gateway("gateway-a (control plane 1)", first.url), await gateway("gateway-b (control plane 2)", second.url)];
    for (const g of gateways) {
      const deadline = Date.now() + 20_000;
      while ((await probe(g.agent, g.url).catch(() => null))?.change !== "c0") {
        if (Date.now() > deadline) {
          const answer = await fetch(`${g.url}/probe`).then(
            async (r) => `${r.status} ${await r.text()}`,
            (e) => String(e),
          );
          throw new Error(`${g.label} never served the first configuration: ${answer}\n${g.output()}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }

    const samples = new Map(gateways.map((g) => [g.label, { routed: [], back: [] }]));
    for (let i = 1; i <= changes; i++) {
      const change = `c${i}`;
      await put(change);
      const answered = performance.now();
      const answeredAt = performance.timeOrigin + answered;
      await Promise.all(
        gateways.map(async (g) => {
          const deadline = answered + 5_000;
          for (;;) {
            const seen = await probe(g.agent, g.url);
            if (seen.change === change) {
              samples.get(g.label).routed.push(seen.at - answeredAt);
              break;
            }
            if (performance.now() > deadline) throw new Error(`${g.label}: change ${change} not routed within 5 s`);
          }
          samples.get(g.label).back.push(performance.now() - answered);
        }),
      );
    }
    const row = (label, { routed, back }) => ({
      gateway: label,
      changes: routed.length,
      "routed p50 ms": median(routed).toFixed(1),
      "routed p99 ms": percentile(routed, 99).toFixed(1),
      "routed max ms": Math.max(...routed).toFixed(1),
      "answer back p50 ms": median(back).toFixed(1),
      "answer back p99 ms": percentile(back, 99).toFixed(1),
    });
    const all = { routed: [], back: [] };
    const rows = [];
    for (const [label, values] of samples) {
      all.routed.push(...values.routed);
      all.back.push(...values.back);
      rows.push(row(label, values));
    }
    rows.push(row("both", all));
    for (const g of gateways) g.agent.destroy();
    return { rows, p50: median(all.routed), p99: percentile(all.routed, 99), backP50: median(all.back), backP99: percentile(all.back, 99) };
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    rmSync(work, { recursive: true, force: true });
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
    await admin.end();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const flag = (name, fallback) => {
    const i = args.indexOf(`--${name}`);
    return i === -1 ? fallback : args[i + 1];
  };
  if (spawnSync("pg_isready", ["-h", "127.0.0.1", "-p", "5432", "-q"]).status !== 0) {
    console.error("PostgreSQL is not answering on 127.0.0.1:5432: start it (see the README) or pass --database");
  }
  const result = await measurePropagation({
    changes: Number(flag("changes", "100")),
    databaseAdminUrl: flag("database", "postgresql://postgres@127.0.0.1:5432/postgres"),
    pin: args.includes("--pin"),
  });
  // --json: the figures on one line, for bench/gateway.mjs (which runs this in a process of its own).
  if (args.includes("--json")) console.log(JSON.stringify(result));
  else printTable("PUT answer -> first request routed by the new revision (two gateways, two control planes, PostgreSQL)", result.rows);
}
