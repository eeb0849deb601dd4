import {
  constants,
  createServer as createH2Server,
  type Http2Server,
  type Http2Session,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from "node:http2";
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from "node:net";
import { createServer as createTlsServer, type SecureContext, type Server as TlsServer, type TLSSocket } from "node:tls";
import { clientBucketOf } from "../../server/client-address.js";
import { answers } from "../gateway-answer.js";
import type { EdgeLimits } from "./edge-limits.js";

/**
 * The gateway's listening sockets (docs/gateway.md, "TLS, HTTP/2 and gRPC"):
 * the plain port serves HTTP/1.1 and HTTP/2 with prior knowledge (h2c,
 * RFC 9113 section 3.3), told apart by the client connection preface; the TLS
 * port serves HTTP/2 and HTTP/1.1 by ALPN (RFC 7301), with the certificate SNI
 * picks. Both count their connections against one set of limits, and hand
 * every connection to one HTTP/1.1 server and one HTTP/2 server, which call
 * the same request handler.
 */

/** Why a connection or an HTTP/2 stream was refused (gatehouse_gateway_connections_refused_total{reason}). */
export type RefusalReason = "connections" | "client_connections" | "client_streams";

/**
 * Counts client connections, per process and per client address (an IPv6 client by its /64), on every port; and
 * each HTTP/2 stream beyond a connection's first, against the same budgets (docs/gateway.md, "The edge": one
 * HTTP/2 connection holds no more requests at once than as many HTTP/1.1 connections would).
 */
export interface ConnectionAdmission {
  /** Whether the connection may stay; it is counted until it closes. */
  admit(socket: Socket): boolean;
  /** Whether one more concurrent stream of a client (its bucket: clientBucketOf) may open; counted until releaseStream. */
  admitStream(client: string): boolean;
  releaseStream(client: string): void;
  /** Connections open now. */
  open(): number;
}

export function createAdmission(
  limits: Pick<EdgeLimits, "maxConnections" | "maxConnectionsPerClient">,
  refused: (reason: RefusalReason) => void,
): ConnectionAdmission {
  const perClient = new Map<string, number>();
  /** Connections and extra streams, together: the process's budget. */
  let units = 0;
  let open = 0;
  const release = (client: string) => {
    units--;
    const left = (perClient.get(client) ?? 1) - 1;
    if (left <= 0) perClient.delete(client);
    else perClient.set(client, left);
  };
  const take = (client: string, reason: "connections" | "client_streams"): boolean => {
    if (units >= limits.maxConnections) {
      refused(reason === "connections" ? "connections" : "client_streams");
      return false;
    }
    const fromClient = (perClient.get(client) ?? 0) + 1;
    if (fromClient > limits.maxConnectionsPerClient) {
      refused(reason === "connections" ? "client_connections" : "client_streams");
      return false;
    }
    perClient.set(client, fromClient);
    units++;
    return true;
  };
  return {
    admit(socket) {
      const client = clientBucketOf(socket.remoteAddress);
      if (!take(client, "connections")) return false;
      open++;
      socket.once("close", () => {
        open--;
        release(client);
      });
      return true;
    },
    admitStream: (client) => take(client, "client_streams"),
    releaseStream: release,
    open: () => open,
  };
}

/** The client connection preface of HTTP/2 (RFC 9113 section 3.4). */
const preface = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

/**
 * The TCP peer address of each HTTP/2 session, taken when the session starts (a destroyed socket no longer
 * tells its address).
 */
const sessionPeers = new WeakMap<Http2Session, string>();

/** The TCP peer address of a request, HTTP/1.1 or HTTP/2, an IPv4-mapped IPv6 address as the IPv4 address it is. */
export function peerAddressOf(req: {
  socket: { remoteAddress?: string | undefined };
  stream?: { session?: Http2Session | undefined };
}): string {
  const stream = req.stream;
  if (stream !== undefined) {
    // An HTTP/2 request: its session's address, or none once the stream is destroyed (its session is then unknown).
    const session = stream.session;
    return session === undefined ? "" : (sessionPeers.get(session) ?? normalizedAddress(req.socket.remoteAddress));
  }
  return normalizedAddress(req.socket.remoteAddress);
}

function normalizedAddress(address: string | undefined): string {
  if (address === undefined) return "";
  return address.startsWith("::ffff:") && address.includes(".") ? address.slice(7) : address;
}

/** Whether a request came over TLS. */
export function isEncrypted(req: { socket: unknown; stream?: { session?: Http2Session | undefined } }): boolean {
  const session = req.stream?.session;
  if (session !== undefined) return session.encrypted === true;
  return (req.socket as { encrypted?: boolean }).encrypted === true;
}

export interface H2ServerDeps {
  limits: EdgeLimits;
  request(req: Http2ServerRequest, res: Http2ServerResponse): void;
  /** Counts each stream beyond a session's first against the connection budgets; absent: streams are not counted. */
  admission?: ConnectionAdmission;
  /** How long a session with no stream open stays (default max(30 s, the keep-alive time)). */
  idleTimeoutMs?: number;
}

/** Streams refused by the admission: reset before any handler sees them. */
const refusedStreams = new WeakSet<ServerHttp2Stream>();

/**
 * The HTTP/2 server, for h2c and h2 alike (docs/gateway.md, "The edge"). Streams a session may open at once are
 * bounded (SETTINGS_MAX_CONCURRENT_STREAMS), and so is the header list. Each stream beyond a session's first is
 * an admission unit of its client: over the budget it is reset with REFUSED_STREAM, which a client may retry
 * (RFC 9113 section 8.7). A session must open its first stream within the header timeout; one with no stream
 * open is closed after the idle time however many PINGs or SETTINGS it sends; a stream whose request body
 * stalls (nothing read or written) for the request timeout is reset with CANCEL.
 */
export function createHttp2Server(deps: H2ServerDeps): Http2Server & { sessions: Set<ServerHttp2Session> } {
  const { limits, admission } = deps;
  const idleTimeoutMs = deps.idleTimeoutMs ?? Math.max(30_000, limits.keepAliveTimeoutMs);
  const sessions = new Set<ServerHttp2Session>();
  const server = createH2Server({
    maxSessionMemory: 10,
    settings: { maxConcurrentStreams: 100, maxHeaderListSize: limits.maxHeaderBytes, enablePush: false },
    maxHeaderListPairs: 128,
  }) as Http2Server & { sessions: Set<ServerHttp2Session> };
  // No session-wide inactivity timeout: a long gRPC stream may be silent for minutes, as a long
  // HTTP/1.1 answer may. What holds a session is bounded above: its first stream by the header
  // timeout, an idle session by idleTimeoutMs, a stalled request body by the request timeout, a
  // request its target does not answer by the upstream timeouts, and its streams by admission.
  server.setTimeout(0);
  server.sessions = sessions;
  server.on("session", (session: ServerHttp2Session) => {
    sessions.add(session);
    const peer = pendingPeer;
    const client = clientBucketOf(peer?.remoteAddress);
    if (peer !== undefined) sessionPeers.set(session, normalizedAddress(peer.remoteAddress));
    let streams = 0;
    // Until its first stream, the session has the time a request head has (HTTP/1.1's headers timeout).
    let timer: NodeJS.Timeout | undefined = setTimeout(() => session.destroy(), limits.headerTimeoutMs);
    timer.unref();
    const clear = () => {
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
    };
    session.once("close", () => {
      clear();
      sessions.delete(session);
    });
    session.on("error", () => session.destroy());
    // Before Node's own listener, which hands the stream to the request handler.
    session.prependListener("stream", (stream: ServerHttp2Stream) => {
      const counted = streams > 0;
      if (counted && admission !== undefined && !admission.admitStream(client)) {
        refusedStreams.add(stream);
        stream.on("error", () => {});
        stream.close(constants.NGHTTP2_REFUSED_STREAM);
        return;
      }
      streams++;
      clear();
      stream.once("close", () => {
        if (counted) admission?.releaseStream(client);
        if (--streams === 0 && !session.closed && !session.destroyed) {
          timer = setTimeout(() => endIdle(session), idleTimeoutMs);
          timer.unref();
        }
      });
      if (!stream.endAfterHeaders) {
        // A request body that stops (no DATA read, no answer written) is not waited for beyond the request timeout.
        stream.setTimeout(limits.requestTimeoutMs, () => {
          if (!stream.closed && !stream.destroyed) stream.close(constants.NGHTTP2_CANCEL);
        });
        stream.once("end", () => stream.setTimeout(0));
      }
    });
  });
  server.on("sessionError", () => {});
  server.on("request", (req: Http2ServerRequest, res: Http2ServerResponse) => {
    if (!refusedStreams.has(req.stream)) deps.request(req, res);
  });
  // CONNECT (RFC 9113 section 8.5) as on HTTP/1.1 (edge-server.ts): 405 with the error body, never tunnelled.
  server.on("connect", (req: Http2ServerRequest, res: Http2ServerResponse) => {
    if (refusedStreams.has(req.stream)) return;
    const answer = answers.connectNotAllowed;
    res.writeHead(answer.status, {
      allow: "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
      "content-type": "application/json",
      "content-length": answer.body.length,
    });
    res.end(answer.body);
  });
  return server;
}

/** Closes an idle session (GOAWAY, then the socket); it may be tearing itself down already. */
function endIdle(session: ServerHttp2Session): void {
  if (session.closed || session.destroyed) return;
  try {
    session.close();
  } catch {
    session.destroy();
  }
}

/** The peer of the connection being handed to the HTTP/2 server (its 'session' event follows at once). */
let pendingPeer: Socket | undefined;

function handToHttp2(h2: Http2Server, connection: Socket, peer: Socket): void {
  pendingPeer = peer;
  try {
    h2.emit("connection", connection);
  } finally {
    pendingPeer = undefined;
  }
}

export interface PlainListenerDeps {
  admission: ConnectionAdmission;
  /** The HTTP/1.1 server (edge-server.ts), given each HTTP/1.1 connection. */
  http1: { emit(event: "connection", socket: Socket): boolean };
  http2: Http2Server;
  /** How long a client may take to send the bytes that tell HTTP/2 from HTTP/1.1. */
  headerTimeoutMs: number;
}

/**
 * The plain port: each connection is admitted, then its first bytes read. The
 * HTTP/2 preface goes to the HTTP/2 server (h2c with prior knowledge);
 * anything else to the HTTP/1.1 server, which is given the bytes read
 * (its parser reads the socket itself from then on).
 */
export function createPlainListener(deps: PlainListenerDeps): TcpServer {
  // noDelay: answers are written as they come; with Nagle's algorithm a small HTTP/2 frame
  // waits for the client's delayed ACK (about 40 ms on Linux) before it leaves.
  return createTcpServer({ pauseOnConnect: true, noDelay: true }, (socket) => {
    socket.on("error", () => socket.destroy());
    if (!deps.admission.admit(socket)) {
      socket.destroy();
      return;
    }
    let head: Buffer = Buffer.alloc(0);
    const timer = setTimeout(() => socket.destroy(), deps.headerTimeoutMs);
    timer.unref();
    const onData = (chunk: Buffer) => {
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
      const n = Math.min(head.length, preface.length);
      const isPreface = head.subarray(0, n).equals(preface.subarray(0, n));
      if (isPreface && head.length < preface.length) return; // not decided yet
      clearTimeout(timer);
      socket.removeListener("data", onData);
      socket.pause();
      if (isPreface) {
        // The bytes read go back to the socket's buffer, which a new HTTP/2 session reads before
        // its native handle (Node's http2 takes data already buffered on the socket). The socket
        // itself, not a JavaScript stream around it: nghttp2 then reads and writes it directly.
        socket.unshift(head);
        handToHttp2(deps.http2, socket, socket);
        return;
      }
      deps.http1.emit("connection", socket);
      // The HTTP/1.1 server listens for 'data' on its connections: the bytes read so far are given to it so.
      socket.emit("data", head);
      socket.resume();
    };
    socket.on("data", onData);
    socket.resume();
  });
}

export interface TlsListenerDeps {
  admission: ConnectionAdmission;
  http1: { emit(event: "connection", socket: Socket): boolean };
  http2: Http2Server;
  /** The context of a server name, or undefined when the gateway has no certificate for it. */
  contextFor(servername: string): SecureContext | undefined;
  /** Time for the TLS handshake. */
  handshakeTimeoutMs: number;
  /** A handshake that failed (for metrics): why. */
  failed(reason: string): void;
}

/**
 * The TLS port (TLS 1.2 and 1.3): SNI picks the certificate of the domain
 * (an exact name before a wildcard); a handshake without SNI, or for a name
 * without a certificate, fails. ALPN offers h2 and http/1.1.
 */
export function createTlsListener(deps: TlsListenerDeps): TlsServer {
  const server = createTlsServer(
    {
      minVersion: "TLSv1.2",
      ALPNProtocols: ["h2", "http/1.1"],
      handshakeTimeout: deps.handshakeTimeoutMs,
      SNICallback(servername, callback) {
        const context = deps.contextFor(servername.toLowerCase());
        if (context === undefined) callback(new Error("no certificate for this server name"), undefined);
        else callback(null, context);
      },
    },
    (socket: TLSSocket) => {
      if (socket.alpnProtocol === "h2") handToHttp2(deps.http2, socket, socket);
      else deps.http1.emit("connection", socket);
    },
  );
  server.on("connection", (socket: Socket) => {
    socket.on("error", () => socket.destroy());
    if (!deps.admission.admit(socket)) socket.destroy();
    else socket.setNoDelay(true); // as on the plain port (createPlainListener)
  });
  server.on("tlsClientError", (error: NodeJS.ErrnoException, socket: TLSSocket) => {
    deps.failed(error.code ?? "handshake");
    // A client that sent no TLS (or a handshake that failed) keeps no descriptor until the handshake timeout.
    socket.destroy();
  });
  return server;
}
