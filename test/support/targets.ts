import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";

/**
 * How a target answers live requests (its health-check path answers `health`): `partial` sends a
 * 200 head and part of its body, then resets the connection.
 */
export type TargetMode = "ok" | "reset" | "slow" | "partial" | "error500" | "error502" | "error503" | "error504";

/**
 * A real upstream target for the gateway's balancing, health and retry tests:
 * a node:http server that counts what it receives and fails on cue.
 */
export interface TestTarget {
  name: string;
  url: string;
  /** Live requests received (health checks excluded), by method and path. */
  received: { method: string; url: string; body: number; requestId: string | undefined }[];
  /** Health-check requests received. */
  probes: number;
  mode: TargetMode;
  /** Status of its health-check path. */
  health: number;
  /** Requests being answered now. */
  inFlight: number;
  /** Stops listening (connections are refused) and cuts open ones; `start` listens again on the same port. */
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

export async function startTarget(name: string, options: { healthPath?: string; slowMs?: number } = {}): Promise<TestTarget> {
  const healthPath = options.healthPath ?? "/healthz";
  const sockets = new Set<Socket>();
  let port = 0;
  const target: TestTarget = {
    name,
    url: "",
    received: [],
    probes: 0,
    mode: "ok",
    health: 200,
    inFlight: 0,
    stop: async () => {},
    start: async () => {},
    close: async () => {},
  };
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    if (req.url === healthPath) {
      target.probes++;
      req.resume();
      res.writeHead(target.health, { "content-type": "text/plain" });
      res.end(name);
      return;
    }
    let body = 0;
    target.inFlight++;
    res.once("close", () => target.inFlight--);
    req.on("data", (chunk: Buffer) => {
      body += chunk.length;
    });
    req.on("error", () => {});
    req.on("end", () => {
      const requestId = req.headers["x-request-id"];
      target.received.push({
        method: req.method ?? "",
        url: req.url ?? "",
        body,
        requestId: typeof requestId === "string" ? requestId : undefined,
      });
      switch (target.mode) {
        case "reset":
          req.socket.destroy();
          return;
        case "slow":
          setTimeout(() => res.end(name), options.slowMs ?? 2_000).unref();
          return;
        case "partial":
          res.writeHead(200, { "content-type": "text/plain", "content-length": "1000", "x-target": name });
          res.write(`${name} partial`);
          // The head and the first bytes are on their way before the reset.
          setTimeout(() => req.socket.destroy(), 50).unref();
          return;
        case "error500":
        case "error502":
        case "error503":
        case "error504":
          res.writeHead(Number(target.mode.slice(5)), { "content-type": "text/plain" });
          res.end(name);
          return;
        default:
          res.writeHead(200, { "content-type": "text/plain", "x-target": name });
          res.end(name);
      }
    });
  };
  let server: Server = createServer(handle);
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      server = createServer(handle);
      server.on("connection", (socket: Socket) => {
        sockets.add(socket);
        socket.on("close", () => sockets.delete(socket));
      });
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => {
        port = (server.address() as AddressInfo).port;
        resolve();
      });
    });
  await listen();
  target.url = `http://127.0.0.1:${port}`;
  target.stop = async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  target.start = listen;
  target.close = async () => {
    if (server.listening) await target.stop();
  };
  return target;
}
