// A flood of unauthenticated sign-ins from one client address, run in a
// process of its own so that the attacker's CPU is not the server's event
// loop. Bounded: at most `total` requests, `concurrency` at a time, and
// nothing new after `maxMs`. Prints `started` once the first wave is out, then
// one JSON line with what it saw.
//
//   node sign-in-flood.mjs '<json options>'
//   options: {url, localAddress, total, concurrency, maxMs, targets: [{path, headers, body: "identifier"|"dashboard"}]}
import { randomBytes } from "node:crypto";
import { Agent, request } from "node:http";

const options = JSON.parse(process.argv[2] ?? "{}");
const base = new URL(options.url);
const agent = new Agent({ keepAlive: true, maxSockets: options.concurrency, localAddress: options.localAddress });
const statuses = {};
const retryAfter = [];
let sent = 0;
let answered = 0;
let failed = 0;
const started = performance.now();

function bodyFor(kind) {
  const who = `flood-${randomBytes(6).toString("hex")}@example.com`;
  return JSON.stringify(
    kind === "dashboard" ? { email: who, password: "not the password at all" } : { identifier: who, password: "not the password at all" },
  );
}

function one() {
  if (sent >= options.total || performance.now() - started > options.maxMs) return null;
  const target = options.targets[sent % options.targets.length];
  sent++;
  const payload = bodyFor(target.body);
  return new Promise((resolve) => {
    const req = request(
      {
        host: base.hostname,
        port: base.port,
        path: target.path,
        method: "POST",
        agent,
        headers: { ...target.headers, "content-type": "application/json", "content-length": Buffer.byteLength(payload) },
      },
      (res) => {
        res.resume();
        res.on("end", () => {
          statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
          if (res.headers["retry-after"] !== undefined) retryAfter.push(Number(res.headers["retry-after"]));
          answered++;
          resolve();
        });
      },
    );
    req.on("error", () => {
      failed++;
      resolve();
    });
    req.end(payload);
  });
}

async function lane() {
  for (;;) {
    const next = one();
    if (next === null) return;
    await next;
  }
}

const lanes = Array.from({ length: options.concurrency }, () => lane());
process.stdout.write("started\n");
await Promise.all(lanes);
agent.destroy();
process.stdout.write(
  `${JSON.stringify({ sent, answered, failed, statuses, maxRetryAfter: Math.max(0, ...retryAfter), ms: Math.round(performance.now() - started) })}\n`,
);
