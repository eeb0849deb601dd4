import { createHash } from "node:crypto";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { startTestGateway, stateFromYaml, type TestGateway } from "../support/gateway.js";

/**
 * CONTRACT.md "Gateway (data plane)": bodies stream both ways, unbuffered.
 * A 32 MiB upload and a 32 MiB download go through the gateway while this
 * process's memory is sampled: the gateway holds a few chunks at a time,
 * never the body.
 */
const size = 32 * 1024 * 1024;
const chunk = Buffer.alloc(64 * 1024, 7);
let upstream: Server;
let gw: TestGateway;

/** The body, generated as it is read: the test never holds it either. */
function generated(): Readable {
  let sent = 0;
  return new Readable({
    read() {
      if (sent >= size) this.push(null);
      else {
        sent += chunk.length;
        this.push(chunk);
      }
    },
  });
}

beforeAll(async () => {
  // Reads uploads as a stream (counting and hashing) and answers downloads from the same generator.
  upstream = createServer((req, res) => {
    if (req.method === "GET") {
      res.writeHead(200, { "content-length": String(size) });
      generated().pipe(res);
      return;
    }
    const hash = createHash("sha256");
    let bytes = 0;
    req.on("data", (data: Buffer) => {
      bytes += data.length;
      hash.update(data);
    });
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ bytes, sha256: hash.digest("hex") }));
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  gw = await startTestGateway({}, stateFromYaml(`version: 1\nroutes:\n  - name: files\n    path: /files/*\n    upstream: ${url}\n`));
});
afterAll(async () => {
  await gw.close();
  upstream.closeAllConnections();
  await new Promise<void>((resolve) => upstream.close(() => resolve()));
});

// Garbage (chunks already passed on) is collected before each sample, so a sample is what is still held.
setFlagsFromString("--expose-gc");
const collectGarbage = runInNewContext("gc") as () => void;

/** Memory this process holds in JavaScript objects and buffers (what a buffered body would swell). */
const held = () => {
  collectGarbage();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
};

async function measured<T>(work: () => Promise<T>): Promise<{ result: T; growth: number }> {
  const baseline = held();
  let peak = baseline;
  const sampler = setInterval(() => {
    peak = Math.max(peak, held());
  }, 25);
  try {
    const result = await work();
    return { result, growth: peak - baseline };
  } finally {
    clearInterval(sampler);
  }
}

test("a 32 MiB upload streams to the upstream intact with memory far below its size", async () => {
  const expected = createHash("sha256");
  for (let sent = 0; sent < size; sent += chunk.length) expected.update(chunk);
  const target = new URL(gw.url);
  const { result, growth } = await measured(
    () =>
      new Promise<{ bytes: number; sha256: string }>((resolve, reject) => {
        const req = request(
          {
            host: target.hostname,
            port: target.port,
            method: "POST",
            path: "/files/upload",
            headers: { "content-length": String(size) },
            agent: false,
          },
          (res) => {
            const parts: Buffer[] = [];
            res.on("data", (d: Buffer) => parts.push(d));
            res.on("end", () => resolve(JSON.parse(Buffer.concat(parts).toString()) as { bytes: number; sha256: string }));
          },
        );
        req.on("error", reject);
        generated().pipe(req);
      }),
  );
  expect(result).toEqual({ bytes: size, sha256: expected.digest("hex") });
  expect(growth).toBeLessThan(size / 4);
});

test("a 32 MiB download streams to a slow reader without the gateway buffering it", async () => {
  const target = new URL(gw.url);
  const { result, growth } = await measured(
    () =>
      new Promise<number>((resolve, reject) => {
        const req = request({ host: target.hostname, port: target.port, path: "/files/download", agent: false }, (res) => {
          let bytes = 0;
          res.on("data", (d: Buffer) => {
            bytes += d.length;
            // A reader slower than the upstream: the gateway must hold the upstream back, not queue what it sends.
            if (bytes % (4 * 1024 * 1024) < d.length) {
              res.pause();
              setTimeout(() => res.resume(), 20);
            }
          });
          res.on("end", () => resolve(bytes));
        });
        req.on("error", reject);
        req.end();
      }),
  );
  expect(result).toBe(size);
  expect(growth).toBeLessThan(size / 4);
});
