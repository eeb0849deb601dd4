// The gateway's data plane against other proxies of the same small GET, all
// figures from one run. Every server (the upstream and the proxy under test)
// is pinned to core 0, the load generator (autocannon, 50 connections) to
// core 1. Scenarios take turns: each round runs every one once, and a ratio
// is taken between the runs of one round; the table gives medians over the
// rounds, so a noisy neighbour moves one round, not the figure.
//
//   node scripts/build.mjs && node bench/gateway.mjs [--seconds 5] [--rounds 3] [--connections 50] [--changes 100] [--no-propagation]
//     [--no-protocols | --only protocols]
//
// Targets: gateway / bare node:http proxy >= 0.9; gateway / @fastify/http-proxy
// >= 1.0; plugins (session-auth + rate-limit + request-headers) / no plugins
// >= 0.7; 10,000 routes / 10 routes >= 0.9; RSS with 10,000 routes <= 150 MB;
// a PUT's answer to the first request routed by the new revision, two gateways
// on two control planes over PostgreSQL, 100 changes: p50 <= 10 ms, p99 <= 50 ms.
// Reported: gateway / direct to the upstream, gateway / nginx (one worker,
// proxy_pass; installed with apt-get when missing, else skipped), p99 added
// over the bare proxy.
// Upstreams and cluster limits (docs/gateway.md): a route over 3 targets,
// round-robin with active checks / a route with one URL >= 0.95;
// consistent-hash on a header / round-robin >= 0.95; a rate-limit of scope
// cluster (a local redis-server) / scope instance >= 0.75, and the p99 the
// Redis check adds; requests admitted over the limit by 3 gateways sharing
// one Redis, 10 rounds of 300 concurrent requests against a limit of 100: 0.
// TLS, HTTP/2 and gRPC (h2load from Debian's nghttp2-client, installed when missing; about 2 minutes; alone
// with --only protocols): HTTPS (TLS 1.3, HTTP/1.1 kept alive, 100 connections) through the gateway / nginx
// (one worker) terminating TLS 1.3 with the same ECDSA certificate and suite (h2load offers only
// TLS_AES_128_GCM_SHA256) and proxying to the same upstream >= 0.5;
// gRPC unary through the gateway (h2c) / direct to a bare node:http2 gRPC upstream, 10 connections of 10
// streams >= 0.5. Reported: h2 through the gateway, 100 streams over 10 connections / the same requests over
// HTTP/1.1 on 100 connections (as many in flight), and on 10 connections (as many connections).
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SignJWT, exportJWK, generateKeyPair } from "jose";
import { ensureDebianPackage } from "../scripts/debian-package.mjs";
import { everyCore, freePort, hasTaskset, load, median, percentile, pinToCore, printTable, root, spawnNode } from "./support.mjs";

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i === -1 ? fallback : args[i + 1];
};
const seconds = Number(flag("seconds", "5"));
const rounds = Number(flag("rounds", "3"));
const connections = Number(flag("connections", "50"));
const changes = Number(flag("changes", "100"));
const withPropagation = !args.includes("--no-propagation");
// --only protocols: only the TLS, HTTP/2 and gRPC section; --no-protocols: all but it.
const only = flag("only", undefined);
if (only !== undefined && only !== "protocols") {
  console.error(`--only takes "protocols", not ${JSON.stringify(only)}`);
  process.exit(2);
}
const withProtocols = only === "protocols" || !args.includes("--no-protocols");

if (!existsSync(join(root, "dist", "src", "gateway", "gateway.js"))) {
  console.error("dist/ has no gateway: run `node scripts/build.mjs` first");
  process.exit(1);
}

let work = mkdtempSync(join(tmpdir(), "gatehouse-bench-gateway-"));
const stopping = [];
/** The h2load now running, if any: ended first when the run stops (on an error or a signal). */
let loadGenerator;
/** Set by SIGINT, SIGTERM or SIGHUP: the run stops, and what fails because its servers went is not an error. */
let interrupted = false;
const notInterrupted = () => {
  if (interrupted) throw new Error("interrupted");
};
let stopped = Promise.resolve();
/** Stops every server started so far and removes the run's files; a call made while one runs waits for it and then its own. */
const stopAll = () => {
  stopped = stopped.then(async () => {
    loadGenerator?.kill("SIGKILL");
    for (const stop of stopping.splice(0).reverse()) await stop().catch(() => {});
    rmSync(work, { recursive: true, force: true });
  });
  return stopped;
};

// --- servers ----------------------------------------------------------------

const upstreamScript = `
const body = Buffer.from('{"plant":"monstera","ok":true}');
const server = require("node:http").createServer((req, res) => {
  req.resume();
  res.writeHead(200, { "content-type": "application/json", "content-length": body.length });
  res.end(body);
});
// Idle connections outlive the proxies' own keep-alive (nginx keeps upstream connections 60 s): no
// proxy ever sends a request on a connection the upstream is closing at that moment.
server.keepAliveTimeout = 75_000;
server.listen(Number(process.env.PORT), "127.0.0.1", () => console.log("upstream ready"));
`;

// The cheapest correct proxy: node:http piping request and answer through a keep-alive agent, no routing.
const bareProxyScript = `
const http = require("node:http");
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
const upstreamPort = Number(process.env.UPSTREAM_PORT);
http.createServer((req, res) => {
  const up = http.request({ host: "127.0.0.1", port: upstreamPort, method: req.method, path: req.url, headers: req.headers, agent }, (answer) => {
    res.writeHead(answer.statusCode, answer.headers);
    answer.pipe(res);
  });
  up.on("error", () => { res.writeHead(502); res.end(); });
  req.pipe(up);
}).listen(Number(process.env.PORT), "127.0.0.1", () => console.log("bare ready"));
`;

const fastifyScript = `
import Fastify from "fastify";
import proxy from "@fastify/http-proxy";
const app = Fastify({ logger: false });
await app.register(proxy, { upstream: "http://127.0.0.1:" + process.env.UPSTREAM_PORT });
await app.listen({ port: Number(process.env.PORT), host: "127.0.0.1" });
console.log("fastify ready");
`;

// A real gateway process: the state comes from a YAML document read by the platform's own reader.
const gatewayScript = `
import { readFileSync } from "node:fs";
import { createGateway } from "./dist/src/gateway/gateway.js";
import { readConfigDocument } from "./dist/src/domain/config/read-config-document.js";
import { createLoggers } from "./dist/src/server/logger.js";
const spec = JSON.parse(readFileSync(process.env.STATE_FILE, "utf8"));
const loggers = createLoggers("info");
const gateway = createGateway({
  host: "127.0.0.1", port: Number(process.env.PORT), adminPort: 0, logger: loggers.app,
  ...(process.env.TLS_PORT ? { tlsPort: Number(process.env.TLS_PORT) } : {}),
  ...(process.env.REDIS_URL ? { redis: { url: process.env.REDIS_URL, timeoutMs: 50 } } : {}),
});
gateway.apply({
  organizationId: "bench", issuer: spec.issuer, audience: "bench", revision: 1,
  document: readConfigDocument(spec.yaml).document,
  jwks: spec.jwks, revokedSessions: new Map(), consumers: new Map(), secrets: new Map(Object.entries(spec.secrets)),
});
await gateway.listen();
console.log("gateway ready");
process.on("SIGTERM", () => gateway.close().then(() => { loggers.flush(); process.exit(0); }));
`;

async function start(name, script, env, { module = false, core = 0 } = {}) {
  notInterrupted();
  const port = await freePort();
  const server = await spawnNode([...(module ? ["--input-type=module"] : []), "-e", script], {
    env: { PORT: String(port), ...env },
    core,
    ready: /ready/,
  });
  stopping.push(server.stop);
  return { name, port, pid: server.child.pid, url: `http://127.0.0.1:${port}` };
}

function routesYaml(count, upstreamUrl, plugins) {
  let yaml = "version: 1\n";
  if (plugins) {
    yaml += `plugins:
  - name: session
    type: session-auth
    config: {forward_identity_header: x-identity-id}
  - name: rl
    type: rate-limit
    config: {requests: 1000000000, window_seconds: 60}
  - name: headers
    type: request-headers
    config:
      set: {x-env: production, authorization: "Bearer \${secret:production/UPSTREAM_TOKEN}"}
      remove: [x-debug]
`;
  }
  yaml += "routes:\n";
  for (let i = 0; i < count; i++) {
    // A mix of exact and prefix routes over a few upstream paths, as a real table would have.
    const path = i % 2 === 0 ? `/r/${i}` : `/r/${i}/*`;
    yaml += `  - name: route-${i}\n    path: ${path}\n    upstream: ${upstreamUrl}\n`;
    if (plugins) yaml += "    plugins: [session, rl, headers]\n";
  }
  return yaml;
}

async function startGateway(name, spec, env = {}, core = 0) {
  const file = join(work, `${name.replace(/\W+/g, "-")}.json`);
  writeFileSync(file, JSON.stringify(spec));
  return start(name, gatewayScript, { STATE_FILE: file, ...env }, { module: true, core });
}

/**
 * A redis-server of the run's own, pinned to `core` (BENCH_REDIS_CORE, default 0, with the servers: Redis's
 * own CPU then counts against the gateway's; 1 stands for Redis on another machine), or undefined when it
 * is not installed.
 */
async function startRedis(core = "0") {
  notInterrupted();
  if (spawnSync("sh", ["-c", "command -v redis-server"]).status !== 0) {
    process.stderr.write("redis-server is not installed (node scripts/ensure-redis.mjs): the cluster rows are skipped\n");
    return undefined;
  }
  const port = await freePort();
  const { spawn } = await import("node:child_process");
  const argv = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", work];
  const child = hasTaskset
    ? spawn("taskset", ["-c", core, "redis-server", ...argv], { stdio: "ignore" })
    : spawn("redis-server", argv, { stdio: "ignore" });
  stopping.push(
    () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGKILL");
      }),
  );
  const { connect } = await import("node:net");
  for (let i = 0; i < 100; i++) {
    const pong = await new Promise((resolve) => {
      const socket = connect(port, "127.0.0.1");
      socket.once("error", () => resolve(false));
      socket.once("connect", () => socket.write("PING\r\n"));
      socket.once("data", (data) => {
        socket.destroy();
        resolve(data.toString().startsWith("+PONG"));
      });
    });
    if (pong) return { url: `redis://127.0.0.1:${port}/0` };
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return undefined;
}

function upstreamsYaml(targets, balancer) {
  return `version: 1
upstreams:
  - name: pool
    balancer: ${balancer}
${balancer === "consistent-hash" ? "    hash_on: header:x-user\n" : ""}    targets:
${targets.map((t) => `      - {url: ${t.url}}`).join("\n")}
    health_check:
      active: {path: /healthz, interval_seconds: 1, timeout_ms: 500}
routes:
  - name: pooled
    path: /r/4
    upstream: pool
`;
}

function limitedYaml(upstreamUrl, scope, requests = 1_000_000_000) {
  return `version: 1
plugins:
  - name: limit
    type: rate-limit
    config: {requests: ${requests}, window_seconds: 60, scope: ${scope}}
routes:
  - name: limited
    path: /r/*
    upstream: ${upstreamUrl}
    plugins: [limit]
`;
}

/** Rounds of `count` concurrent GETs spread over the gateways, each round from a fresh client address: the admissions over `limit`. */
async function overAdmission(gateways, limit, count, roundsOf) {
  const { request } = await import("node:http");
  const hit = (url, address) =>
    new Promise((resolve) => {
      const { port } = new URL(url);
      const req = request({ host: "127.0.0.1", port, path: "/r/1", localAddress: address, agent: false }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode));
      });
      req.on("error", () => resolve(0));
      req.end();
    });
  let over = 0;
  const admitted = [];
  for (let round = 0; round < roundsOf; round++) {
    const address = `127.0.${10 + round}.${1 + Math.floor(Math.random() * 250)}`;
    const statuses = await Promise.all(Array.from({ length: count }, (_, i) => hit(gateways[i % gateways.length].url, address)));
    const passed = statuses.filter((s) => s === 200).length;
    admitted.push(passed);
    over += Math.max(0, passed - limit);
  }
  return { over, admitted };
}

/**
 * Whether `path`'s program (nginx, h2load) can run here: found on the PATH, or installed from Debian's
 * `packageName` (as root, one installer at a time: scripts/debian-package.mjs); a message when not.
 */
function ensureProgram(path, packageName) {
  const name = path.split("/").at(-1);
  const has = () => spawnSync("sh", ["-c", `command -v ${name}`]).status === 0;
  if (has()) return true;
  try {
    ensureDebianPackage(path, packageName);
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  }
  return has();
}

/**
 * nginx with one worker and proxy_pass to the upstream, or undefined (with a message) when it cannot run here.
 * With `tls` (PEM files `cert` and `key` for `name`) it terminates TLS 1.3 and keeps a client's connection for
 * as many requests as the gateway does (no keepalive_requests limit of 1,000, which would add a handshake per
 * 1,000 requests to nginx's side only).
 */
async function startNginx(upstreamPort, tls) {
  notInterrupted();
  if (!ensureProgram("/usr/sbin/nginx", "nginx-light")) {
    process.stderr.write("nginx is not installed and cannot be installed here (apt-get as root): the nginx rows are skipped\n");
    return undefined;
  }
  const port = await freePort();
  const prefix = join(work, tls ? "nginx-tls" : "nginx");
  spawnSync("mkdir", ["-p", join(prefix, "logs"), join(prefix, "temp")]);
  const conf = join(prefix, "nginx.conf");
  writeFileSync(
    conf,
    `worker_processes 1;
daemon off;
pid ${join(prefix, "nginx.pid")};
error_log ${join(prefix, "logs", "error.log")} warn;
events { worker_connections 1024; }
http {
  access_log ${join(prefix, "logs", "access.log")} combined buffer=64k;
  client_body_temp_path ${join(prefix, "temp")};
  proxy_temp_path ${join(prefix, "temp")};
  upstream app { server 127.0.0.1:${upstreamPort}; keepalive 64; }
  server {
    listen 127.0.0.1:${port}${tls ? " ssl" : ""};
${
  tls
    ? `    server_name ${tls.name};
    ssl_certificate ${tls.cert};
    ssl_certificate_key ${tls.key};
    ssl_protocols TLSv1.3;
    keepalive_requests 1000000000;
    keepalive_timeout 75s;
`
    : ""
}    location / {
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
${tls ? "      proxy_set_header X-Forwarded-Proto $scheme;\n" : ""}    }
  }
}
`,
  );
  const { spawn } = await import("node:child_process");
  const command = spawnSync("sh", ["-c", "command -v taskset"]).status === 0 ? "taskset" : "nginx";
  const argv = command === "taskset" ? ["-c", "0", "nginx", "-p", prefix, "-c", conf] : ["-p", prefix, "-c", conf];
  const child = spawn(command, argv, { stdio: "ignore" });
  stopping.push(
    () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGQUIT");
        setTimeout(() => child.kill("SIGKILL"), 3000).unref();
      }),
  );
  for (let i = 0; i < 100; i++) {
    try {
      if (tls) {
        if ((await httpsStatus(port, "/", tls.name)) === 200) return { name: "nginx (1 worker, TLS, proxy_pass)", port, pid: child.pid };
      } else {
        const response = await fetch(`http://127.0.0.1:${port}/`);
        if (response.ok) return { name: "nginx (1 worker, proxy_pass)", port, pid: child.pid, url: `http://127.0.0.1:${port}` };
      }
    } catch {
      // not up yet
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  process.stderr.write("nginx did not start: the nginx row is skipped\n");
  return undefined;
}

function rssMegabytes(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]);
    return kb / 1024;
  } catch {
    return Number.NaN;
  }
}

/** bench/gateway-propagation.mjs in a process of its own, on every core; its figures. */
function measurePropagation(count) {
  const node = [process.execPath, join(root, "bench", "gateway-propagation.mjs"), "--changes", String(count), "--json"];
  const [command, ...args] = hasTaskset ? ["taskset", "-c", everyCore(), ...node] : node;
  const result = spawnSync(command, args, { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  if (result.status !== 0) throw new Error(`bench/gateway-propagation.mjs exited with ${result.status}`);
  return JSON.parse(result.stdout.trim().split("\n").at(-1));
}

// --- the plain-HTTP run ------------------------------------------------------

/** The small GET through every proxy and gateway configuration, the cluster limit and propagation: their figures. */
async function measureHttp() {
  const upstream = await start("direct to the upstream", upstreamScript, {});
  const upstreamEnv = { UPSTREAM_PORT: String(upstream.port) };
  const bare = await start("bare node:http proxy", bareProxyScript, upstreamEnv);
  const fastify = await start("@fastify/http-proxy", fastifyScript, upstreamEnv, { module: true });
  const nginx = await startNginx(upstream.port);

  // A real ES256 session token and its JWKS, as the control plane issues them.
  const { publicKey, privateKey } = await generateKeyPair("ES256");
  const jwk = { ...(await exportJWK(publicKey)), kid: "bench-key", alg: "ES256", use: "sig" };
  const issuer = "http://127.0.0.1:8080";
  // The gateway accepts only the low-s form of an ECDSA signature (one token, one encoding, as the
  // platform signs them); jose signs either form, so sign until the signature is low-s.
  const { isHighS } = await import("../dist/src/domain/identity/session-token.js");
  const lowS = (jwt) => !isHighS(Buffer.from(jwt.split(".")[2], "base64url"));
  let token;
  do {
    token = await new SignJWT({ sid: "bench-session" })
      .setProtectedHeader({ alg: "ES256", kid: "bench-key", typ: "JWT" })
      .setIssuer(issuer)
      .setAudience("bench")
      .setSubject("identity-1")
      .setIssuedAt()
      .setExpirationTime("2h")
      .sign(privateKey);
  } while (!lowS(token));
  const base = { issuer, jwks: { keys: [jwk] }, secrets: { "production/UPSTREAM_TOKEN": "upstream-token" } };
  const gateway = await startGateway("gateway (10 routes)", { ...base, yaml: routesYaml(10, upstream.url, false) });
  const plugins = await startGateway("gateway, session-auth + rate-limit + request-headers", {
    ...base,
    yaml: routesYaml(10, upstream.url, true),
  });
  const large = await startGateway("gateway (10,000 routes)", { ...base, yaml: routesYaml(10_000, upstream.url, false) });
  // Three targets of the one upstream process, told apart by their path prefix: the figure is the
  // gateway's cost of balancing and checking health, not the cost of three processes on one core
  // (three upstream processes beside the gateway on core 0 cost a quarter of the throughput in
  // context switches alone). The health-check path answers like any other.
  const poolTargets = [1, 2, 3].map((i) => ({ url: `${upstream.url}/target-${i}` }));
  const pooled = await startGateway("gateway, upstream of 3 targets, round-robin, active checks", {
    ...base,
    yaml: upstreamsYaml(poolTargets, "round-robin"),
  });
  const hashed = await startGateway("gateway, upstream of 3 targets, consistent-hash on a header", {
    ...base,
    yaml: upstreamsYaml(poolTargets, "consistent-hash"),
  });
  const redis = await startRedis(process.env.BENCH_REDIS_CORE ?? "0");
  const instanceLimited = await startGateway("gateway, rate-limit scope instance", {
    ...base,
    yaml: limitedYaml(upstream.url, "instance"),
  });
  const clusterLimited = redis
    ? await startGateway(
        "gateway, rate-limit scope cluster (local Redis)",
        { ...base, yaml: limitedYaml(upstream.url, "cluster") },
        { REDIS_URL: redis.url },
      )
    : undefined;
  process.stderr.write(`servers up; ${rounds} round(s) of ${seconds} s runs, ${connections} connections\n`);

  // The same small GET through each: one exact route of the table (route-4 is exact).
  const scenarios = [
    { key: "direct", server: upstream, path: "/r/4" },
    { key: "bare", server: bare, path: "/r/4" },
    { key: "gateway", server: gateway, path: "/r/4" },
    { key: "fastify", server: fastify, path: "/r/4" },
    ...(nginx ? [{ key: "nginx", server: nginx, path: "/r/4" }] : []),
    { key: "plugins", server: plugins, path: "/r/4", headers: { authorization: `Bearer ${token}` } },
    { key: "large", server: large, path: "/r/5000" },
    // The same request for both balancers (an extra header alone costs a few percent).
    { key: "pooled", server: pooled, path: "/r/4", headers: { "x-user": "user-42" } },
    { key: "hashed", server: hashed, path: "/r/4", headers: { "x-user": "user-42" } },
    { key: "instance", server: instanceLimited, path: "/r/4" },
    ...(clusterLimited ? [{ key: "cluster", server: clusterLimited, path: "/r/4" }] : []),
  ];
  // Each path answers 200 before the runs start (a misconfigured scenario would measure errors).
  for (const scenario of scenarios) {
    const response = await fetch(scenario.server.url + scenario.path, { headers: scenario.headers ?? {} });
    if (response.status !== 200) throw new Error(`${scenario.server.name}: ${response.status} ${await response.text()}`);
  }

  pinToCore(1);
  const runs = Object.fromEntries(scenarios.map((s) => [s.key, []]));
  let largeRss = 0;
  let smallRss = 0;
  for (let round = 0; round < rounds; round++) {
    for (const scenario of scenarios) {
      const result = await load({
        url: scenario.server.url + scenario.path,
        connections,
        duration: seconds,
        headers: scenario.headers ?? {},
        warmup: 1,
      });
      // A reference proxy may drop a request at the end of a run (nginx, seen once in a while); the gateway may not.
      const tolerated = ["nginx", "fastify", "bare"].includes(scenario.key) ? Math.floor(result.ok / 100_000) + 1 : 0;
      if (result.failures > tolerated) throw new Error(`${scenario.server.name}: ${result.failures} failed requests`);
      runs[scenario.key].push(result);
      if (scenario.key === "large") largeRss = Math.max(largeRss, rssMegabytes(large.pid));
      if (scenario.key === "gateway") smallRss = Math.max(smallRss, rssMegabytes(gateway.pid));
    }
  }

  const of = (key, field) => median(runs[key].map((run) => run[field]));
  const ratio = (a, b) => median(runs[a].map((run, i) => run.rps / runs[b][i].rps));
  const rows = scenarios.map((s) => ({
    scenario: s.server.name,
    "req/s": Math.round(of(s.key, "rps")),
    "p50 ms": of(s.key, "p50"),
    "p99 ms": of(s.key, "p99"),
  }));
  printTable(
    `Small GET, ${connections} connections, servers on core 0, medians of ${rounds} round(s) of ${seconds} s (bench/gateway.mjs)`,
    rows,
  );

  const figures = [
    ["gateway / bare node:http proxy", ratio("gateway", "bare"), 0.9],
    ["gateway / direct to the upstream", ratio("gateway", "direct"), undefined],
    ["gateway / @fastify/http-proxy", ratio("gateway", "fastify"), 1.0],
    ...(nginx ? [["gateway / nginx (1 worker)", ratio("gateway", "nginx"), undefined]] : []),
    ["session-auth + rate-limit + request-headers / no plugins", ratio("plugins", "gateway"), 0.7],
    ["10,000 routes / 10 routes", ratio("large", "gateway"), 0.9],
    ["3 targets, round-robin, active checks / one URL", ratio("pooled", "gateway"), 0.95],
    ["consistent-hash on a header / round-robin", ratio("hashed", "pooled"), 0.95],
    ...(clusterLimited ? [["rate-limit scope cluster (local Redis) / scope instance", ratio("cluster", "instance"), 0.75]] : []),
  ].map(([figure, value, target]) => ({
    figure,
    value: value.toFixed(2),
    target: target === undefined ? "-" : `>= ${target.toFixed(2)}`,
    verdict: verdict(value, target),
  }));
  figures.push({
    figure: "RSS with 10,000 routes (MB)",
    value: largeRss.toFixed(0),
    target: "<= 150",
    verdict: verdict(largeRss, 150, false),
  });
  figures.push({ figure: "RSS with 10 routes (MB), for comparison", value: smallRss.toFixed(0), target: "-", verdict: "reported" });
  const addedP99 = median(runs.gateway.map((run, i) => run.p99 - runs.bare[i].p99));
  figures.push({ figure: "p99 added over the bare proxy (ms)", value: addedP99.toFixed(2), target: "-", verdict: "reported" });
  if (clusterLimited) {
    const redisP99 = median(runs.cluster.map((run, i) => run.p99 - runs.instance[i].p99));
    figures.push({ figure: "p99 added by the Redis check (ms)", value: redisP99.toFixed(2), target: "-", verdict: "reported" });
  }
  // Three gateways sharing one Redis, a limit of 100: 10 rounds of 300 concurrent requests, each round a
  // fresh client. They stand for three machines: the proxies above are stopped, and the gateways, their
  // Redis and upstream run on every core (three gateways and Redis on one core answer a 300-request burst
  // late enough for the 50 ms Redis time-out to fire, and each gateway then counts for itself, by design).
  if (redis) {
    await stopAll();
    work = mkdtempSync(join(tmpdir(), "gatehouse-bench-gateway-"));
    const cores = everyCore();
    const target = await start("upstream", upstreamScript, {}, { core: cores });
    const shared = await startRedis(cores);
    const trio = [];
    for (let i = 0; i < 3; i++)
      trio.push(
        await startGateway(
          `cluster gateway ${i + 1}`,
          { ...base, yaml: limitedYaml(target.url, "cluster", 100) },
          { REDIS_URL: shared.url },
          cores,
        ),
      );
    // A round that is not counted: connections to Redis made, the script loaded, the code paths compiled.
    await overAdmission(trio, 100, 300, 1);
    const { over, admitted } = await overAdmission(trio, 100, 300, 10);
    figures.push({
      figure: `requests admitted over the limit, 3 gateways, 10 rounds (admitted: ${admitted.join(", ")})`,
      value: String(over),
      target: "0",
      verdict: over === 0 ? "met" : "MISSED",
    });
  }
  if (withPropagation) {
    // The proxies are stopped first: propagation is timed on a machine with nothing else to do, by a
    // client of its own (bench/gateway-propagation.mjs in a fresh process, it and its servers on every
    // core: they stand for separate machines). This process is the load generator, pinned to core 1 with
    // the heap of the runs above. Run from here, the script used to read "every core" from
    // availableParallelism(), which is 1 in a pinned process, and put all its servers on core 0: that
    // doubled the figure (p50 8 to 13 ms against 4 to 6 ms for the script run alone).
    await stopAll();
    try {
      const propagation = measurePropagation(changes);
      printTable(
        `PUT answer -> first request routed by the new revision (two gateways, two control planes, PostgreSQL, ${changes} changes)`,
        propagation.rows,
      );
      figures.push(
        {
          figure: "propagation p50, PUT answer to upstream (ms)",
          value: propagation.p50.toFixed(1),
          target: "<= 10",
          verdict: verdict(propagation.p50, 10, false),
        },
        {
          figure: "propagation p99, PUT answer to upstream (ms)",
          value: propagation.p99.toFixed(1),
          target: "<= 50",
          verdict: verdict(propagation.p99, 50, false),
        },
        {
          figure: "propagation p50, answer back at the client (ms)",
          value: propagation.backP50.toFixed(1),
          target: "-",
          verdict: "reported",
        },
        {
          figure: "propagation p99, answer back at the client (ms)",
          value: propagation.backP99.toFixed(1),
          target: "-",
          verdict: "reported",
        },
      );
    } catch (error) {
      process.stderr.write(`propagation not measured: ${error instanceof Error ? error.message : String(error)}\n`);
    }
  }
  return figures;
}

// --- TLS, HTTP/2 and gRPC ---------------------------------------------------

const verdict = (value, target, higherIsBetter = true) =>
  target === undefined ? "reported" : (higherIsBetter ? value >= target : value <= target) ? "met" : "MISSED";

/** The name the benchmark's certificate is for; h2load sends it as SNI and :authority (--connect-to dials 127.0.0.1). */
const tlsName = "bench.test";
const tls13Cipher = "TLS_AES_128_GCM_SHA256";

// A bare node:http2 server (h2c) answering every call with one gRPC message and grpc-status 0 (like bench/baseline.mjs's).
const grpcUpstreamScript = `
const message = Buffer.concat([Buffer.from([0, 0, 0, 0, 10, 0x0a, 0x08]), Buffer.from("monstera")]);
const server = require("node:http2").createServer();
server.on("stream", (stream) => {
  stream.on("error", () => {});
  stream.resume();
  stream.on("end", () => {
    stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
    stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
    stream.end(message);
  });
});
server.listen(Number(process.env.PORT), "127.0.0.1", () => console.log("grpc upstream ready"));
`;
/** The unary call's request: one length-prefixed message (field 1, "rose"). */
const grpcRequest = Buffer.concat([Buffer.from([0, 0, 0, 0, 6, 0x0a, 0x04]), Buffer.from("rose")]);
const grpcMethod = "/bench.v1.Plants/Get";
const grpcHeaders = { "content-type": "application/grpc", te: "trailers" };

/** The status of one HTTPS GET to 127.0.0.1:`port` with SNI `servername` (the certificate is self-signed: not verified). */
async function httpsStatus(port, path, servername) {
  const { request } = await import("node:https");
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, servername, headers: { host: servername }, rejectUnauthorized: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode));
    });
    req.on("error", reject);
    req.end();
  });
}

/** One gRPC unary call with node:http2 (h2c): the answer's grpc-status and message, to check a path before it is timed. */
async function grpcCall(url) {
  const { connect } = await import("node:http2");
  const session = connect(url);
  try {
    return await new Promise((resolve, reject) => {
      const stream = session.request({ ":method": "POST", ":path": grpcMethod, ...grpcHeaders });
      const chunks = [];
      let status;
      stream.on("response", (headers) => {
        status = headers["grpc-status"];
      });
      stream.on("trailers", (trailers) => {
        status = trailers["grpc-status"];
      });
      stream.on("data", (chunk) => chunks.push(chunk));
      stream.on("end", () => resolve({ status, body: Buffer.concat(chunks) }));
      stream.on("error", reject);
      session.on("error", reject);
      stream.end(grpcRequest);
    });
  } finally {
    session.destroy();
  }
}

/**
 * One h2load run, pinned to core 1: `seconds` after a second of warm-up (or exactly `requests` requests, for a
 * check), over `connections` connections with up to `streams` streams each (HTTP/2; `h1`: HTTP/1.1, one request
 * at a time per connection, kept alive). Returns req/s, p50 and p99 of the answered requests (from h2load's
 * per-request log), the answers other than 2xx and the protocol, TLS version and cipher it negotiated.
 */
async function h2load({ url, connectTo, h1 = false, connections, streams = 1, body, headers = {}, seconds: runFor, requests }) {
  const { spawn } = await import("node:child_process");
  const log = join(work, "h2load.log");
  const argv = requests ? ["-n", String(requests)] : ["-D", String(runFor), "--warm-up-time=1"];
  argv.push("-t", "1", "-c", String(connections), "-m", String(streams), `--log-file=${log}`);
  if (h1) argv.push("--h1");
  // One TLS 1.3 suite for every server (h2load offers four; nginx and node:tls would each pick its own).
  if (connectTo) argv.push(`--connect-to=${connectTo}`, `--tls13-ciphers=${tls13Cipher}`);
  if (body) argv.push("-d", body);
  for (const [name, value] of Object.entries(headers)) argv.push("-H", `${name}: ${value}`);
  argv.push(url);
  const [command, ...rest] = hasTaskset ? ["taskset", "-c", "1", "h2load", ...argv] : ["h2load", ...argv];
  notInterrupted();
  const child = spawn(command, rest, { stdio: ["ignore", "pipe", "pipe"] });
  loadGenerator = child;
  let out = "";
  child.stdout.on("data", (chunk) => {
    out += chunk;
  });
  child.stderr.on("data", (chunk) => {
    out += chunk;
  });
  const code = await new Promise((resolve) => child.once("close", resolve));
  loadGenerator = undefined;
  const counts = /requests: (\d+) total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(out);
  const statuses = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(out);
  if (code !== 0 || !counts || !statuses) throw new Error(`h2load ${argv.join(" ")} exited with ${code}:\n${out}`);
  // Requests cut at the end of the warm-up or of the run are logged with status 0: not counted as answered.
  const times = [];
  for (const line of readFileSync(log, "utf8").split("\n")) {
    const [, status, micros] = line.split("\t");
    if (status?.startsWith("2")) times.push(Number(micros) / 1000);
  }
  rmSync(log, { force: true });
  return {
    rps: Number(/finished in [\d.]+m?s, ([\d.]+) req\/s/.exec(out)?.[1] ?? 0),
    p50: percentile(times, 50),
    p99: percentile(times, 99),
    ok: Number(statuses[1]),
    failures: Number(counts[3]) + Number(counts[4]) + Number(counts[5]) + Number(statuses[2]) + Number(statuses[3]) + Number(statuses[4]),
    protocol: /Application protocol: (\S+)/.exec(out)?.[1] ?? "?",
    tls: /TLS Protocol: (\S+)/.exec(out)?.[1],
    cipher: /Cipher: (\S+)/.exec(out)?.[1],
    group: /Server Temp Key: (\S+)/.exec(out)?.[1],
  };
}

/** A self-signed ECDSA P-256 certificate for `name` made by openssl in the run's directory: the files and PEMs. */
function makeCertificate(name) {
  const cert = join(work, "tls-cert.pem");
  const key = join(work, "tls-key.pem");
  const argv = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "30"];
  argv.push("-keyout", key, "-out", cert, "-subj", `/CN=${name}`, "-addext", `subjectAltName=DNS:${name}`);
  const made = spawnSync("openssl", argv, { encoding: "utf8" });
  if (made.status !== 0) throw new Error(`openssl req failed: ${made.stderr}`);
  return { name, cert, key, certPem: readFileSync(cert, "utf8"), keyPem: readFileSync(key, "utf8") };
}

/**
 * HTTPS and h2 through the gateway's TLS listener, and gRPC unary through its plain port (h2c), each against a
 * baseline of the same run: nginx terminating TLS 1.3 the same way, HTTP/1.1 carrying the same requests, the gRPC
 * upstream called directly. Servers on core 0, h2load on core 1; scenarios take turns in rounds and the ratios are
 * medians of per-round ratios. Its figures, or none (with a message) when h2load cannot run here.
 */
async function measureProtocols() {
  if (!ensureProgram("/usr/bin/h2load", "nghttp2-client")) {
    process.stderr.write(
      "h2load is not installed and cannot be installed here (apt-get as root): the TLS, HTTP/2 and gRPC rows are skipped\n",
    );
    return [];
  }
  const certificate = makeCertificate(tlsName);
  const upstream = await start("upstream", upstreamScript, {});
  const grpcUpstream = await start("gRPC upstream", grpcUpstreamScript, {});
  const tlsPort = await freePort();
  const yaml = `version: 1
domains:
  - name: ${tlsName}
    tls:
      certificate: \${secret:production/BENCH_CERT}
      private_key: \${secret:production/BENCH_KEY}
routes:
  - name: plants
    path: /r/*
    upstream: ${upstream.url}
  - name: plants-grpc
    path: /bench.v1.Plants/*
    upstream: ${grpcUpstream.url}
`;
  const gateway = await startGateway(
    "gateway, TLS",
    {
      issuer: "http://127.0.0.1:8080",
      jwks: { keys: [] },
      secrets: { "production/BENCH_CERT": certificate.certPem, "production/BENCH_KEY": certificate.keyPem },
      yaml,
    },
    { TLS_PORT: String(tlsPort) },
  );
  const nginx = await startNginx(upstream.port, certificate);
  const grpcBody = join(work, "grpc-request.bin");
  writeFileSync(grpcBody, grpcRequest);

  const https = (port) => ({ url: `https://${tlsName}/r/4`, connectTo: `127.0.0.1:${port}` });
  const grpc = (server) => ({ url: `${server.url}${grpcMethod}`, body: grpcBody, headers: grpcHeaders });
  const scenarios = [
    { key: "https", name: "gateway, HTTPS: HTTP/1.1, 100 connections", ...https(tlsPort), h1: true, connections: 100, alpn: "http/1.1" },
    ...(nginx
      ? [
          {
            key: "nginx",
            name: "nginx (1 worker), HTTPS: HTTP/1.1, 100 connections",
            ...https(nginx.port),
            h1: true,
            connections: 100,
            alpn: "http/1.1",
          },
        ]
      : []),
    { key: "h2", name: "gateway, h2: 10 connections x 10 streams", ...https(tlsPort), connections: 10, streams: 10, alpn: "h2" },
    { key: "h1-10", name: "gateway, HTTPS: HTTP/1.1, 10 connections", ...https(tlsPort), h1: true, connections: 10, alpn: "http/1.1" },
    {
      key: "grpc-direct",
      name: "gRPC unary direct to the upstream (h2c), 10 x 10 streams",
      ...grpc(grpcUpstream),
      connections: 10,
      streams: 10,
      alpn: "h2c",
    },
    {
      key: "grpc",
      name: "gRPC unary through the gateway (h2c), 10 x 10 streams",
      ...grpc(gateway),
      connections: 10,
      streams: 10,
      alpn: "h2c",
    },
  ];

  // Every path answers before it is timed: 2xx on the protocol meant, TLS 1.3 over TLS, grpc-status 0 with the message.
  for (const server of [grpcUpstream, gateway]) {
    const answer = await grpcCall(server.url);
    if (answer.status !== "0" || answer.body.length !== 15)
      throw new Error(`${server.name}: gRPC call answered grpc-status ${answer.status}`);
  }
  for (const scenario of scenarios) {
    const check = await h2load({ ...scenario, connections: Math.min(scenario.connections, 10), requests: 200 });
    const tlsOk = !scenario.connectTo || (check.tls === "TLSv1.3" && check.cipher === tls13Cipher);
    if (check.ok !== 200 || check.failures > 0 || check.protocol !== scenario.alpn || !tlsOk) {
      throw new Error(
        `${scenario.name}: ${check.ok} of 200 answered 2xx over ${check.protocol} (${[check.tls ?? "no TLS", check.cipher].filter(Boolean).join(", ")})`,
      );
    }
  }

  pinToCore(1);
  process.stderr.write(`TLS, HTTP/2 and gRPC: ${rounds} round(s) of ${seconds} s runs\n`);
  const runs = Object.fromEntries(scenarios.map((s) => [s.key, []]));
  for (let round = 0; round < rounds; round++) {
    for (const scenario of scenarios) {
      const result = await h2load({ ...scenario, seconds });
      if (result.failures > 0) throw new Error(`${scenario.name}: ${result.failures} failed requests`);
      runs[scenario.key].push(result);
    }
  }

  const of = (key, field) => median(runs[key].map((run) => run[field]));
  const ratio = (a, b) => median(runs[a].map((run, i) => run.rps / runs[b][i].rps));
  const negotiated = (run) => [run.protocol, run.tls, run.cipher, run.group].filter(Boolean).join(", ");
  printTable(
    `TLS, HTTP/2 and gRPC (h2load), servers on core 0, medians of ${rounds} round(s) of ${seconds} s (bench/gateway.mjs)`,
    scenarios.map((s) => ({
      scenario: s.name,
      "req/s": Math.round(of(s.key, "rps")),
      "p50 ms": of(s.key, "p50").toFixed(2),
      "p99 ms": of(s.key, "p99").toFixed(2),
      negotiated: negotiated(runs[s.key][0]),
    })),
  );
  if (nginx && negotiated(runs.https[0]) !== negotiated(runs.nginx[0])) {
    process.stderr.write("the gateway and nginx negotiated different TLS: the HTTPS ratio compares unlike handshakes\n");
  }
  return [
    ...(nginx ? [["HTTPS (TLS 1.3, keep-alive), gateway / nginx (1 worker)", ratio("https", "nginx"), 0.5]] : []),
    ["h2, 100 streams over 10 connections / HTTP/1.1, 100 connections", ratio("h2", "https"), undefined],
    ["h2, 100 streams over 10 connections / HTTP/1.1, 10 connections", ratio("h2", "h1-10"), undefined],
    ["gRPC unary, through the gateway / direct to the upstream", ratio("grpc", "grpc-direct"), 0.5],
  ].map(([figure, value, target]) => ({
    figure,
    value: value.toFixed(2),
    target: target === undefined ? "-" : `>= ${target.toFixed(2)}`,
    verdict: verdict(value, target),
  }));
}

// --- the run ----------------------------------------------------------------

// Ctrl-C or a kill ends every server this run started and removes its files before the process exits: the
// run's own code then fails (its servers are gone, no new one starts) and ends through `finally`; a run still
// waiting 10 s later is ended here.
for (const [signal, number] of [
  ["SIGINT", 2],
  ["SIGTERM", 15],
  ["SIGHUP", 1],
]) {
  process.once(signal, () => {
    interrupted = true;
    process.exitCode = 128 + number;
    stopAll().then(() => setTimeout(() => stopAll().finally(() => process.exit()), 10_000).unref());
  });
}

try {
  const figures = only === "protocols" ? [] : await measureHttp();
  if (withProtocols) {
    // On a machine with nothing else of this run's: the servers above are stopped first.
    await stopAll();
    work = mkdtempSync(join(tmpdir(), "gatehouse-bench-gateway-"));
    figures.push(...(await measureProtocols()));
  }
  if (figures.length > 0) printTable("Ratios (medians of per-round ratios)", figures);
} catch (error) {
  if (!interrupted) throw error;
} finally {
  await stopAll();
}
