import { readFileSync } from "node:fs";
import { connect as connectHttp2 } from "node:http2";
import { connect, type Socket } from "node:net";
import { isBuilt, spawnServer, type ServerProcess } from "../support/config-process.js";
import { createTestDatabase, type TestDatabase } from "../support/database.js";

/**
 * Transport limits, against a server in a process of its own (so its memory
 * is measured alone): slow HTTP/1.1 clients are cut off, and a flood of
 * half-open HTTP/2 streams that never send a whole message neither piles up
 * memory nor stays open.
 */
let db: TestDatabase;
let server: ServerProcess;

const limits = {
  HTTP_HEADERS_TIMEOUT_MS: "1000",
  HTTP_REQUEST_TIMEOUT_MS: "2000",
  GRPC_FIRST_MESSAGE_TIMEOUT_MS: "2000",
  GRPC_MAX_PENDING_STREAMS: "16",
  GRPC_MAX_CONCURRENT_STREAMS: "100",
};

beforeAll(async () => {
  if (!isBuilt()) throw new Error("dist/ is not built (npm test builds it)");
  db = await createTestDatabase();
  server = await spawnServer({ DATABASE_URL: db.url, GATEHOUSE_DATA_DIR: db.dataDir, ...limits });
}, 60_000);
afterAll(async () => {
  await server?.stop();
  await db?.drop();
});

const addressOf = (url: string) => {
  const { hostname, port } = new URL(url);
  return { host: hostname, port: Number(port) };
};

/** Resolves with how long the server kept the connection open, and what it sent. */
function whenClosed(socket: Socket): Promise<{ ms: number; received: string }> {
  const started = performance.now();
  let received = "";
  socket.on("data", (chunk: Buffer) => {
    received += chunk.toString("latin1");
  });
  return new Promise((resolve) => socket.once("close", () => resolve({ ms: performance.now() - started, received })));
}

function rssOf(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
}

describe("HTTP/1.1 on the platform port", () => {
  test("a client that sends its headers one byte at a time (slowloris) is disconnected after the headers timeout", async () => {
    const socket = connect(addressOf(server.url));
    const closed = whenClosed(socket);
    socket.write("GET /healthz HTTP/1.1\r\nHost: x\r\n");
    const drip = setInterval(() => {
      if (!socket.destroyed) socket.write("X");
    }, 200);
    const { ms, received } = await closed;
    clearInterval(drip);
    expect(ms).toBeLessThan(5_000);
    expect(received).toMatch(/^HTTP\/1\.1 408/);
  });

  test("a client that never finishes its body is disconnected after the request timeout", async () => {
    const socket = connect(addressOf(server.url));
    const closed = whenClosed(socket);
    socket.write("POST /identity/login/password HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{");
    const drip = setInterval(() => {
      if (!socket.destroyed) socket.write(" ");
    }, 200);
    const { ms } = await closed;
    clearInterval(drip);
    expect(ms).toBeLessThan(6_000);
  });
});

describe("calls cut off mid-body end", () => {
  test("a call whose body never finishes ends as the client's failure (invalid_argument), never as an internal error", async () => {
    const metric = async (code: string) => {
      const text = await (await fetch(`${server.url}/metrics`)).text();
      const series = `gatehouse_rpc_requests_total{service="svc.v1.IdentityService",method="LoginPassword",protocol="rest",code="${code}"} `;
      return Number(
        text
          .split("\n")
          .find((l) => l.startsWith(series))
          ?.slice(series.length) ?? 0,
      );
    };
    const before = await metric("invalid_argument");
    const slow = Array.from({ length: 6 }, () => {
      const socket = connect(addressOf(server.url));
      socket.on("error", () => {});
      socket.write("POST /identity/login/password HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{");
      return whenClosed(socket);
    });
    await Promise.all(slow);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await metric("invalid_argument")) - before).toBe(6);
    expect(await metric("internal")).toBe(0);
  });
});

/** HTTP/2 frames written by hand (RFC 9113 4.1), to behave as no well-mannered client library would. */
function frame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(9);
  header.writeUIntBE(payload.length, 0, 3);
  header[3] = type;
  header[4] = flags;
  header.writeUInt32BE(streamId, 5);
  return Buffer.concat([header, payload]);
}

/** An HPACK block of literal fields without indexing and without Huffman coding (RFC 7541 6.2.2). */
function hpack(fields: [string, string][]): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of fields) {
    parts.push(Buffer.from([0x00, name.length]), Buffer.from(name), Buffer.from([value.length]), Buffer.from(value));
  }
  return Buffer.concat(parts);
}

describe("HTTP/2 on the gRPC port", () => {
  test("20,000 half-open streams are refused or closed, and memory stays bounded", async () => {
    const before = rssOf(server.child.pid as number);
    const headers = hpack([
      [":method", "POST"],
      [":scheme", "http"],
      [":path", "/svc.v1.ConfigService/WatchConfig"],
      [":authority", "gatehouse"],
      ["content-type", "application/grpc"],
      ["te", "trailers"],
    ]);
    // A message prefix announcing 100 bytes, never followed by them.
    const prefix = Buffer.from([0, 0, 0, 0, 100]);
    const connections = 4;
    const perConnection = 5_000;
    const sockets: Socket[] = [];
    const resets: number[] = [];
    const ended: boolean[] = [];
    for (let c = 0; c < connections; c++) {
      const socket = connect(addressOf(server.grpcUrl));
      sockets.push(socket);
      let counted = 0;
      resets.push(0);
      ended.push(false);
      let pending = Buffer.alloc(0);
      socket.on("data", (chunk: Buffer) => {
        // Count RST_STREAM frames (type 3) the server sends back.
        pending = Buffer.concat([pending, chunk]);
        while (pending.length >= 9) {
          const length = pending.readUIntBE(0, 3);
          if (pending.length < 9 + length) break;
          if (pending[3] === 3) counted++;
          // GOAWAY: the server ends the connection (a client that ignores SETTINGS_MAX_CONCURRENT_STREAMS).
          if (pending[3] === 7) ended[c] = true;
          pending = pending.subarray(9 + length);
        }
        resets[c] = counted;
      });
      socket.on("error", () => {});
      socket.on("close", () => {
        ended[c] = true;
      });
      socket.write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
      socket.write(frame(4, 0, 0, Buffer.alloc(0)));
      const batch: Buffer[] = [];
      for (let i = 0; i < perConnection; i++) {
        const id = 1 + 2 * i;
        batch.push(frame(1, 0x4, id, headers), frame(0, 0, id, prefix));
        if (batch.length >= 200) socket.write(Buffer.concat(batch.splice(0)));
      }
      socket.write(Buffer.concat(batch));
    }
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const during = rssOf(server.child.pid as number);
    // Every stream ends refused (RST_STREAM REFUSED_STREAM) or, among the few the server held, closed at the
    // first-message timeout; wait until the server has answered them all (it works through 20,000 streams).
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && resets.some((count, c) => count < perConnection && !ended[c])) {
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const after = rssOf(server.child.pid as number);

    const mib = (bytes: number) => Math.round(bytes / 1024 / 102.4) / 10;
    console.log(
      `half-open streams: RSS ${mib(before)} MiB before, ${mib(during)} MiB during, ${mib(after)} MiB after; ` +
        `RST_STREAM per connection ${resets.join(", ")} of ${perConnection}; connection ended by the server: ${ended.join(", ")}`,
    );
    // The finding: 20,000 such streams took resident memory from about 420 to 1,280 MiB, and nothing was closed.
    expect(during - before).toBeLessThan(100 * 1024 * 1024);
    // Each connection had nearly all its streams refused (a connection may hold 16 waiting for their
    // first message), or was ended by the server for opening more than it was allowed.
    for (const [c, count] of resets.entries()) expect(count === perConnection || ended[c]).toBe(true);

    for (const socket of sockets) socket.destroy();
    // The server still answers a well-mannered client.
    const session = connectHttp2(server.grpcUrl);
    const status = await new Promise<string>((resolve, reject) => {
      const stream = session.request({
        ":method": "POST",
        ":path": "/grpc.health.v1.Health/Check",
        "content-type": "application/grpc",
        te: "trailers",
      });
      let grpcStatus = "";
      stream.on("response", (h) => {
        grpcStatus = String(h["grpc-status"] ?? grpcStatus);
      });
      stream.on("trailers", (t) => {
        grpcStatus = String(t["grpc-status"]);
      });
      stream.on("error", reject);
      // The answer's message is read (and dropped): a stream closes only once both sides have ended.
      stream.resume();
      stream.on("close", () => resolve(grpcStatus));
      stream.end(Buffer.from([0, 0, 0, 0, 0]));
    });
    session.close();
    expect(status).toBe("0");
  }, 60_000);
});
