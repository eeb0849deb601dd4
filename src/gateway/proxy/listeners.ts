import {
  createServer as createH2Server,
  type Http2Server,
  type Http2Session,
  type Http2ServerRequest,
  type Http2ServerResponse,
  type ServerHttp2Session,
} from "node:http2";
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from "node:net";
import { Duplex } from "node:stream";
import { createServer as createTlsServer, type SecureContext, type Server as TlsServer, type TLSSocket } from "node:tls";
import { clientBucketOf } from "../../server/client-address.js";
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

/** Counts client connections, per process and per client address (an IPv6 client by its /64), on every port. */
export interface ConnectionAdmission {
  /** Whether the connection may stay; it is counted until it closes. */
  admit(socket: Socket): boolean;
  /** Connections open now. */
  open(): number;
}

export function createAdmission(
  limits: Pick<EdgeLimits, "maxConnections" | "maxConnectionsPerClient">,
  refused: (reason: "connections" | "client_connections") => void,
): ConnectionAdmission {
  const perClient = new Map<string, number>();
  let open = 0;
  return {
    admit(socket) {
      if (open >= limits.maxConnections) {
        refused("connections");
        return false;
      }
      const client = clientBucketOf(socket.remoteAddress);
      const fromClient = (perClient.get(client) ?? 0) + 1;
      if (fromClient > limits.maxConnectionsPerClient) {
        refused("client_connections");
        return false;
      }
      perClient.set(client, fromClient);
      open++;
      socket.once("close", () => {
        open--;
        const left = (perClient.get(client) ?? 1) - 1;
        if (left <= 0) perClient.delete(client);
        else perClient.set(client, left);
      });
      return true;
    },
    open: () => open,
  };
}

/** The client connection preface of HTTP/2 (RFC 9113 section 3.4). */
const preface = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

/**
 * A connection whose first bytes were read to tell HTTP/2 from HTTP/1.1,
 * given to the HTTP/2 server as a Duplex that replays them (its 'connection'
 * event takes any Duplex): the HTTP/2 session then reads the whole preface.
 */
class PrefacedConnection extends Duplex {
  constructor(
    readonly socket: Socket,
    private head: Buffer | undefined,
  ) {
    super();
    socket.on("data", (chunk: Buffer) => {
      if (!this.push(chunk)) socket.pause();
    });
    socket.on("end", () => this.push(null));
    socket.on("close", () => this.destroy());
    socket.on("error", (error) => this.destroy(error));
  }
  override _read(): void {
    const head = this.head;
    if (head !== undefined) {
      this.head = undefined;
      this.push(head);
    }
    this.socket.resume();
  }
  override _write(chunk: Buffer, encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    this.socket.write(chunk, encoding, done);
  }
  override _final(done: (error?: Error | null) => void): void {
    this.socket.end(done);
  }
  override _destroy(error: Error | null, done: (error?: Error | null) => void): void {
    this.socket.destroy(error ?? undefined);
    done(error);
  }
  setNoDelay(noDelay?: boolean): this {
    this.socket.setNoDelay(noDelay);
    return this;
  }
  setKeepAlive(enable?: boolean, delay?: number): this {
    this.socket.setKeepAlive(enable, delay);
    return this;
  }
  setTimeout(ms: number, callback?: () => void): this {
    this.socket.setTimeout(ms, callback);
    return this;
  }
}

/**
 * The TCP peer address of each HTTP/2 session, taken when the session starts (an h2c session reads through a
 * PrefacedConnection, and a destroyed socket no longer tells its address).
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
}

/**
 * The HTTP/2 server, for h2c and h2 alike. Streams a session may open at once
 * are bounded (SETTINGS_MAX_CONCURRENT_STREAMS), and so is the header list; a
 * session with no stream open is closed after the keep-alive time.
 */
export function createHttp2Server(deps: H2ServerDeps): Http2Server & { sessions: Set<ServerHttp2Session> } {
  const sessions = new Set<ServerHttp2Session>();
  const server = createH2Server({
    maxSessionMemory: 10,
    settings: { maxConcurrentStreams: 100, maxHeaderListSize: deps.limits.maxHeaderBytes, enablePush: false },
    maxHeaderListPairs: 128,
    // An idle session's socket is let go (HTTP/1.1's keep-alive time, at least 30 s for long-lived gRPC channels).
  }) as Http2Server & { sessions: Set<ServerHttp2Session> };
  server.setTimeout(Math.max(30_000, deps.limits.keepAliveTimeoutMs));
  server.sessions = sessions;
  server.on("session", (session: ServerHttp2Session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
    session.on("error", () => session.destroy());
    if (pendingPeer !== undefined) sessionPeers.set(session, normalizedAddress(pendingPeer.remoteAddress));
  });
  server.on("sessionError", () => {});
  server.on("request", deps.request);
  return server;
}

/** The peer of the connection being handed to the HTTP/2 server (its 'session' event follows at once). */
let pendingPeer: Socket | undefined;

function handToHttp2(h2: Http2Server, connection: Duplex, peer: Socket): void {
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
  return createTcpServer({ pauseOnConnect: true }, (socket) => {
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
        handToHttp2(deps.http2, new PrefacedConnection(socket, head), socket);
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
  });
  server.on("tlsClientError", (error: NodeJS.ErrnoException) => deps.failed(error.code ?? "handshake"));
  return server;
}
