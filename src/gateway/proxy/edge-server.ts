import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { answers, rawAnswer, type GatewayAnswer } from "../gateway-answer.js";
import { defaultEdgeLimits, type EdgeLimits } from "./edge-limits.js";
import { createAdmission, type RefusalReason } from "./listeners.js";

/**
 * The admin port's limits: a handful of scrapers and probes, never the
 * clients of the routes. One address cannot hold more than a few of its
 * connections, so it cannot starve the probes or the process's descriptors.
 */
export const adminEdgeLimits: EdgeLimits = {
  ...defaultEdgeLimits,
  maxConnections: 256,
  maxConnectionsPerClient: 16,
  maxTunnels: 0,
  headerTimeoutMs: 5_000,
  requestTimeoutMs: 10_000,
};

/**
 * Descriptors left to the rest of the process (the admin port, upstream
 * connections beyond one per client, a control plane beside the gateway, log
 * files): the client limit is lowered to fit the process's open-file limit.
 */
const reservedDescriptors = 1024;

/** The soft limit of open files of this process (Linux), or undefined where it cannot be read. */
export function openFileLimit(): number | undefined {
  try {
    const line = readFileSync("/proc/self/limits", "utf8")
      .split("\n")
      .find((l) => l.startsWith("Max open files"));
    const soft = line?.split(/\s{2,}/)[1];
    if (soft === undefined || soft === "unlimited") return undefined;
    const value = Number(soft);
    return Number.isInteger(value) && value > 0 ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The client connections a gateway can hold within the process's open-file
 * limit: each proxied request holds a client and an upstream socket, and
 * `shared` descriptors belong to others in the process (the platform's own
 * connections when the gateway is embedded). Never below 64.
 */
export function connectionBudget(configured: number, fileLimit: number | undefined, shared: number): number {
  if (fileLimit === undefined) return configured;
  return Math.max(64, Math.min(configured, Math.floor((fileLimit - reservedDescriptors - shared) / 2)));
}

export interface EdgeServerDeps {
  limits: EdgeLimits;
  request(req: IncomingMessage, res: ServerResponse): void;
  /** A WebSocket upgrade (Upgrade: websocket): the socket is the handler's. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /**
   * The body of a request being answered turned out malformed (a chunk the
   * parser refused): the handler answers 400 if its answer has not started.
   * False when it could not (the connection is then closed).
   */
  malformedBody?(res: ServerResponse): boolean;
  /** Counts connections refused by a limit. */
  refused(reason: RefusalReason): void;
  /** False when the server is given connections a front admitted already (listeners.ts); default true. */
  admitsConnections?: boolean;
}

const counted = Symbol("gatehouse edge: counted connection");
const busy = Symbol("gatehouse edge: answering");
const answering = Symbol("gatehouse edge: the response being written");
type EdgeSocket = Socket & { [counted]?: boolean; [busy]?: number; [answering]?: ServerResponse };

const parserAnswers: Record<number, GatewayAnswer> = {
  400: answers.malformedRequest,
  408: answers.requestTimeout,
  431: answers.headersTooLarge,
  505: answers.versionNotSupported,
};

/** The status of an answer to an HTTP/1.1 parser error (Node's `clientError` codes). */
function statusOfClientError(code: string | undefined): number {
  switch (code) {
    case "HPE_HEADER_OVERFLOW":
      return 431;
    case "HPE_INVALID_VERSION":
    case "HPE_PAUSED_H2_UPGRADE":
      return 505;
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return 408;
    default:
      return 400;
  }
}

/**
 * The request head as received, less the `upgrade` token of its Connection
 * field, so that HTTP/1.1 reads it as an ordinary request (RFC 9110 section
 * 7.8: a server may ignore an Upgrade). Node has already parsed and checked
 * every line; the fields are written back as they came.
 */
function headWithoutUpgrade(req: IncomingMessage): string {
  let head = `${req.method} ${req.url} HTTP/${req.httpVersion}\r\n`;
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    let value = raw[i + 1]!;
    if (name.length === 10 && name.toLowerCase() === "connection") {
      value = value
        .split(",")
        .map((token) => token.trim())
        .filter((token) => token !== "" && token.toLowerCase() !== "upgrade")
        .join(", ");
      if (value === "") continue;
    }
    head += `${name}: ${value}\r\n`;
  }
  return `${head}\r\n`;
}

/**
 * The gateway's HTTP/1.1 listener: node:http with the limits above, and an
 * answer of the platform's error body (with Date) for everything Node would
 * otherwise answer bare or not at all: parser errors (400, 431, 505, 408),
 * an unmet `Expect` (417), `CONNECT` (405). An `Upgrade` other than
 * `websocket` (`h2c` included) is ignored: the request is served as plain
 * HTTP/1.1 on the same connection.
 */
export interface EdgeServer {
  readonly server: Server;
  /** Client connections open now (those it admitted itself). */
  connections(): number;
  /** For a server that does not listen itself: starts the checks of its head and request timeouts. */
  startTimeouts(): void;
}

export function createEdgeServer(deps: EdgeServerDeps): EdgeServer {
  const { limits } = deps;
  const server = createServer({
    maxHeaderSize: limits.maxHeaderBytes,
    headersTimeout: limits.headerTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    // Node checks the two timeouts above every this often (30 s by default, which would triple a 10 s head timeout).
    connectionsCheckingInterval: Math.max(100, Math.min(1_000, Math.floor(limits.headerTimeoutMs / 2))),
    // A missing Host is answered by the gateway, with its error body.
    requireHostHeader: false,
  });
  // A server that listens itself (the admin port) admits its own connections; the proxy's fronts admit theirs (listeners.ts).
  const admission = deps.admitsConnections === false ? undefined : createAdmission(limits, deps.refused);
  server.on("connection", (socket: EdgeSocket) => {
    if (admission === undefined || socket[counted]) return; // admitted by a front, or handed back after an ignored Upgrade
    socket[counted] = true;
    if (!admission.admit(socket)) socket.destroy();
  });

  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket as EdgeSocket;
    socket[busy] = (socket[busy] ?? 0) + 1;
    socket[answering] = res;
    res.once("close", () => {
      socket[busy] = (socket[busy] ?? 1) - 1;
      if (socket[answering] === res) socket[answering] = undefined;
    });
    deps.request(req, res);
  });

  server.on("checkExpectation", (_req: IncomingMessage, res: ServerResponse) => {
    const answer = answers.expectationFailed;
    res.writeHead(answer.status, { "content-type": "application/json", "content-length": answer.body.length, connection: "close" });
    res.end(answer.body);
  });

  server.on("connect", (_req: IncomingMessage, socket: Duplex) => {
    socket.on("error", () => socket.destroy());
    socket.end(rawAnswer(answers.connectNotAllowed, ["allow", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"]));
  });

  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const upgrade = req.headers.upgrade;
    if (typeof upgrade === "string" && upgrade.toLowerCase() === "websocket") {
      deps.upgrade(req, socket, head);
      return;
    }
    // Handed back to the same server, which reads it as a plain request (its Connection no longer asks to upgrade).
    socket.unshift(
      head.length === 0
        ? Buffer.from(headWithoutUpgrade(req), "latin1")
        : Buffer.concat([Buffer.from(headWithoutUpgrade(req), "latin1"), head]),
    );
    server.emit("connection", socket);
  });

  server.on("clientError", (error: NodeJS.ErrnoException, socket: Duplex) => {
    const edge = socket as EdgeSocket;
    if (error.code === "ECONNRESET" || !socket.writable) {
      socket.destroy();
      return;
    }
    if ((edge[busy] ?? 0) > 0) {
      // The request was handed on and its body failed: answered 400 unless its answer already began.
      const res = edge[answering];
      if (res === undefined || res.headersSent || deps.malformedBody?.(res) !== true) socket.destroy();
      return;
    }
    const answer = parserAnswers[statusOfClientError(error.code)] ?? answers.malformedRequest;
    socket.end(rawAnswer(answer, []));
  });

  return {
    server,
    connections: () => admission?.open() ?? 0,
    startTimeouts() {
      // Node checks the head and request timeouts of a server's connections once it is listening. Connections are
      // handed to this one by the listeners, so it is told when they listen: its 'listening' event starts the checks.
      if (!server.listening) server.emit("listening");
    },
  };
}
