import { createHash } from "node:crypto";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { startTestGateway, stateFromYaml, type TestGateway } from "../support/gateway.js";

/**
 * docs/gateway.md, "The data plane: how the gateway enforces it": bodies stream both ways, unbuffered.
 * A 32 MiB upload and a 32 MiB download go through the gateway while this
 * process's memory is sampled: the gateway holds a few chunks at a time,
 * never the body.
 */
const size = 32 * 1024 * 1024;
const chunk = Buffer.alloc(64 * 1024, 7);
let upstream: Server;
let gw: TestGateway;

/** Memory is sampled each time this much more of a body has gone through. */
const sampleEvery = 2 * 1024 * 1024;

/** The body, generated as it is read: the test never holds it either. `progress` hears of every sampleEvery bytes. */
function generated(progress?: () => void): Readable {
  let sent = 0;
  return new Readable({
    read() {
      if (sent >= size) this.push(null);
      else {
        if (sent > 0 && sent % sampleEvery === 0) progress?.();
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
  // The upload's upstream answers once it has read the whole body: on a busy machine that may take
  // longer than the default 30 s the gateway waits for an upstream's headers (its 504 rule is
  // tested elsewhere), so this gateway waits as long as the test may.
  gw = await startTestGateway(
    { upstreamTimeoutMs: 300_000 },
    stateFromYaml(`version: 1\nroutes:\n  - name: files\n    path: /files/*\n    upstream: ${url}\n`),
  );
});
afterAll(async () => {
  await gw.close();
  upstream.closeAllConnections();
  await new Promise<void>((resolve) => upstream.close(() => resolve()));
});

// Garbage (chunks already passed on) is collected before each sample, so a sample is what is still held.
setFlagsFromString("--expose-gc");
const collectGarbage = runInNewContext("gc") as () => void;

/**
 * Memory this process holds in JavaScript objects and buffers (what a buffered
 * body would swell). V8 frees the memory of collected ArrayBuffers on
 * background threads after a collection, later the busier the machine: a
 * second collection waits for that, so buffers already let go are not counted.
 */
const held = () => {
  collectGarbage();
  collectGarbage();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
};

/**
 * Runs work that calls `sample` as the body goes through (at points of its
 * progress, not of the clock, so a slow machine takes as many samples as a
 * fast one); growth is the peak over the baseline.
 */
async function measured<T>(work: (sample: () => void) => Promise<T>): Promise<{ result: T; growth: number; samples: number }> {
  const baseline = held();
  let peak = baseline;
  let samples = 0;
  const result = await work(() => {
    peak = Math.max(peak, held());
    samples++;
  });
  return { result, growth: peak - baseline, samples };
}

/** Generous: a 32 MiB transfer takes about a second on an idle machine, many more on a loaded one. */
const transferTimeoutMs = 180_000;

test(
  "a 32 MiB upload streams to the upstream intact with memory far below its size",
  async () => {
    const expected = createHash("sha256");
    for (let sent = 0; sent < size; sent += chunk.length) expected.update(chunk);
    const target = new URL(gw.url);
    const { result, growth, samples } = await measured(
      (sample) =>
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
          generated(sample).pipe(req);
        }),
    );
    expect(result).toEqual({ bytes: size, sha256: expected.digest("hex") });
    expect(samples).toBeGreaterThanOrEqual(size / sampleEvery - 1);
    expect(growth).toBeLessThan(size / 4);
  },
  transferTimeoutMs,
);

test(
  "a 32 MiB download streams to a slow reader without the gateway buffering it",
  async () => {
    const target = new URL(gw.url);
    const { result, growth, samples } = await measured(
      (sample) =>
        new Promise<number>((resolve, reject) => {
          const req = request({ host: target.hostname, port: target.port, path: "/files/download", agent: false }, (res) => {
            let bytes = 0;
            res.on("data", (d: Buffer) => {
              bytes += d.length;
              if (bytes % sampleEvery < d.length) sample();
              // A reader slower than the upstream: the gateway must hold the upstream back, not queue what it
              // sends. The end of a pause, when a queue would be longest, is sampled too.
              if (bytes % (4 * 1024 * 1024) < d.length) {
                res.pause();
                setTimeout(() => {
                  sample();
                  res.resume();
                }, 20);
              }
            });
            res.on("end", () => resolve(bytes));
          });
          req.on("error", reject);
          req.end();
        }),
    );
    expect(result).toBe(size);
    expect(samples).toBeGreaterThanOrEqual(size / sampleEvery - 1);
    expect(growth).toBeLessThan(size / 4);
  },
  transferTimeoutMs,
);
