import { createServer, request, Agent, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  echoOf,
  send,
  startEchoUpstream,
  startTestGateway,
  stateFromYaml,
  type EchoUpstream,
  type TestGateway,
} from "../support/gateway.js";

/**
 * docs/gateway.md, "The data plane: how the gateway enforces it", changes: each request is handled
 * wholly by one revision (never half old, half new), and requests in flight
 * finish. The follower's states are swapped in under load.
 */
let a: EchoUpstream;
let b: EchoUpstream;
let slow: Server;
let slowUrl: string;
let gw: TestGateway;

/** Revision n routes /x to a (odd) or b (even) and tags the upstream request with its revision. */
const revisionYaml = (n: number) => `version: 1
plugins:
  - name: tag
    type: request-headers
    config: {set: {x-revision: "${n}"}}
routes:
  - name: x
    path: /x
    upstream: ${n % 2 === 1 ? a.url : b.url}
    plugins: [tag]
${n === 1 ? `  - name: slow\n    path: /slow\n    upstream: ${slowUrl}\n    plugins: [tag]\n` : ""}`;

beforeAll(async () => {
  [a, b] = await Promise.all([startEchoUpstream("a"), startEchoUpstream("b")]);
  slow = createServer((req, res) => {
    setTimeout(() => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ revision: req.headers["x-revision"] }));
    }, 400);
  });
  await new Promise<void>((resolve) => slow.listen(0, "127.0.0.1", resolve));
  slowUrl = `http://127.0.0.1:${(slow.address() as AddressInfo).port}`;
  gw = await startTestGateway({}, stateFromYaml(revisionYaml(1), { revision: 1 }));
});
afterAll(async () => {
  await gw.close();
  slow.closeAllConnections();
  await new Promise<void>((resolve) => slow.close(() => resolve()));
  await Promise.all([a.close(), b.close()]);
});

test("20 swaps under load: no request fails, and each is served wholly by one revision", async () => {
  const agent = new Agent({ keepAlive: true, maxSockets: 16 });
  const target = new URL(gw.url);
  let done = false;
  let failures = 0;
  let mixed = 0;
  let served = 0;
  const revisionsSeen = new Set<string>();
  const one = () =>
    new Promise<void>((resolve) => {
      const req = request({ host: target.hostname, port: target.port, path: "/x", agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          if (res.statusCode !== 200) failures++;
          else {
            const echo = JSON.parse(Buffer.concat(chunks).toString()) as { upstream: string; headers: Record<string, string> };
            const revision = Number(echo.headers["x-revision"]);
            revisionsSeen.add(String(revision));
            // Odd revisions route to a, even ones to b: a request half old, half new would cross them.
            if ((revision % 2 === 1) !== (echo.upstream === "a")) mixed++;
            served++;
          }
          resolve();
        });
      });
      req.on("error", () => {
        failures++;
        resolve();
      });
      req.end();
    });
  const workers = Array.from({ length: 8 }, async () => {
    while (!done) await one();
  });
  // Each swap comes once a few requests were answered since the last one, so every revision serves under load.
  const answeredSince = async (count: number) => {
    const from = served + failures;
    while (served + failures < from + count) await new Promise((resolve) => setTimeout(resolve, 2));
  };
  for (let n = 2; n <= 21; n++) {
    await answeredSince(5);
    gw.gateway.apply(stateFromYaml(revisionYaml(n), { revision: n }));
  }
  await answeredSince(5);
  done = true;
  await Promise.all(workers);
  agent.destroy();
  expect(failures).toBe(0);
  expect(mixed).toBe(0);
  expect(served).toBeGreaterThanOrEqual(100);
  expect(revisionsSeen.size).toBeGreaterThanOrEqual(15);
  expect(gw.gateway.revision).toBe(21);
});

test("a request in flight finishes on the revision it started with, even when the next one removes its route", async () => {
  gw.gateway.apply(stateFromYaml(revisionYaml(1), { revision: 31 }));
  const inFlight = send(gw.url, { path: "/slow" });
  await new Promise((resolve) => setTimeout(resolve, 100));
  gw.gateway.apply(stateFromYaml(revisionYaml(2), { revision: 32 }));
  expect((await send(gw.url, { path: "/slow" })).status).toBe(404);
  const answer = await inFlight;
  expect(answer.status).toBe(200);
  expect(answer.json).toEqual({ revision: "1" });
  // The removed upstream's connections are let go once nothing uses them; the rest keeps working.
  expect(echoOf(await send(gw.url, { path: "/x" })).upstream).toBe("b");
});

test("closing drains: requests in flight finish, new connections are refused", async () => {
  const gw2 = await startTestGateway({}, stateFromYaml(revisionYaml(1), { revision: 1 }));
  const inFlight = send(gw2.url, { path: "/slow" });
  await new Promise((resolve) => setTimeout(resolve, 100));
  const closed = gw2.close();
  await new Promise((resolve) => setTimeout(resolve, 20));
  await expect(send(gw2.url, { path: "/x" })).rejects.toThrow();
  expect((await inFlight).status).toBe(200);
  await closed;
});
