import { constants, createServer, type Http2Server, type Http2Session, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import type { TransportLimits } from "../config.js";
import { toConnectError, type ErrorLogger } from "../interceptors/errors.js";
import { createGrpcDoor, grpcCodecOf, trailersOnly, unimplementedPath } from "./grpc-door.js";
import { oneHeader } from "./http-source.js";
import type { Observability } from "./observability.js";
import type { Pipeline } from "./pipeline.js";
import type { Procedure } from "./procedures.js";
import { nextRequestId } from "./request-id.js";

export interface GrpcServerDeps {
  pipeline: Pipeline;
  procedures: ReadonlyMap<string, Procedure>;
  observability: Observability;
  limits: TransportLimits;
  readMaxBytes: number;
  /** The client address of a peer address (trusted proxies do not apply to gRPC: there is no X-Forwarded-For). */
  clientAddress?: (peer: string | undefined) => string | undefined;
  logError: ErrorLogger;
}

interface SessionState {
  /** Streams open on the session. */
  open: number;
  /** Streams that have not delivered their first message (not yet authenticated). */
  pending: number;
  /** Whether the session ever opened a stream. */
  used: boolean;
}

/**
 * The gRPC port: HTTP/2 cleartext (h2c), the gRPC door for every served
 * RPC, and the limits that keep unauthenticated clients from holding memory:
 *
 * - at most `maxConnections` sessions; beyond, a new session gets GOAWAY
 *   (ENHANCE_YOUR_CALM) and is closed;
 * - at most `maxConcurrentStreams` streams per session (advertised in SETTINGS;
 *   nghttp2 refuses the excess);
 * - at most `maxPendingStreams` streams per session still waiting for their
 *   first message: the next one is refused (RST_STREAM REFUSED_STREAM), since
 *   nothing about it is authenticated yet;
 * - a stream's first message must arrive within `firstMessageTimeoutMs`
 *   (else deadline_exceeded, and the stream is closed);
 * - a session that never opens a stream is closed after `headersTimeoutMs`,
 *   one with no open stream after `idleTimeoutMs`.
 */
export function createGrpcServer(deps: GrpcServerDeps): Http2Server {
  const { limits } = deps;
  const door = createGrpcDoor({ pipeline: deps.pipeline, readMaxBytes: deps.readMaxBytes });
  const server = createServer({
    settings: { maxConcurrentStreams: limits.maxConcurrentStreams, maxHeaderListSize: 16 * 1024 },
    maxSessionMemory: 10,
  });
  const states = new WeakMap<Http2Session, SessionState>();
  let sessions = 0;

  server.on("session", (session: Http2Session) => {
    if (sessions >= limits.maxConnections) {
      session.goaway(constants.NGHTTP2_ENHANCE_YOUR_CALM);
      session.destroy();
      return;
    }
    sessions++;
    states.set(session, { open: 0, pending: 0, used: false });
    session.once("close", () => sessions--);
    // Until its first stream a session has `headersTimeoutMs` to open one; afterwards, idle ones close after `idleTimeoutMs`.
    session.on("timeout", () => {
      if ((states.get(session)?.open ?? 0) === 0) session.close();
    });
    session.setTimeout(limits.headersTimeoutMs);
  });

  server.on("stream", (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
    // A stream closed with an error code (refused below, reset by the client) emits 'error': never let one be unhandled.
    stream.on("error", () => {});
    const started = performance.now();
    const session = stream.session as Http2Session;
    const state = states.get(session);
    const requestId = nextRequestId(oneHeader(headers, "x-request-id"));
    if (!state) {
      stream.close(constants.NGHTTP2_REFUSED_STREAM);
      return;
    }
    if (state.pending >= limits.maxPendingStreams) {
      stream.close(constants.NGHTTP2_REFUSED_STREAM);
      return;
    }
    if (!state.used) {
      state.used = true;
      session.setTimeout(limits.idleTimeoutMs);
    }
    state.open++;
    state.pending++;
    let waiting = true;
    const firstMessage = () => {
      if (!waiting) return;
      waiting = false;
      state.pending--;
      clearTimeout(timer);
    };
    const timer = setTimeout(() => {
      if (!waiting) return;
      firstMessage();
      trailersOnly(
        stream,
        "application/grpc",
        new ConnectError(
          `no complete request message within ${limits.firstMessageTimeoutMs} ms of the stream's headers`,
          Code.DeadlineExceeded,
        ),
        requestId,
      );
      stream.close(constants.NGHTTP2_CANCEL);
    }, limits.firstMessageTimeoutMs);
    timer.unref();
    stream.once("close", () => {
      state.open--;
      firstMessage();
    });

    const path = String(headers[":path"] ?? "");
    const contentType = oneHeader(headers, "content-type");
    if (headers[":method"] !== "POST" || grpcCodecOf(contentType) === undefined) {
      // Not a gRPC request: gRPC over HTTP/2 answers 415 to other content types ("Content-Type ... If not, 415").
      firstMessage();
      stream.resume();
      const body = JSON.stringify({
        code: "invalid_argument",
        message: "this port serves gRPC only (POST, Content-Type application/grpc, application/grpc+proto or application/grpc+json)",
      });
      stream.respond({ ":status": headers[":method"] === "POST" ? 415 : 405, allow: "POST", "content-type": "application/json" });
      stream.end(body);
      deps.observability.http(requestId, String(headers[":method"]), "grpc_not_grpc", headers[":method"] === "POST" ? 415 : 405, started);
      return;
    }
    const procedure = deps.procedures.get(path);
    if (!procedure) {
      firstMessage();
      stream.resume();
      trailersOnly(stream, "application/grpc", toConnectError(unimplementedPath(), "grpc", deps.logError), requestId);
      deps.observability.unknownRpc(requestId, "grpc", started);
      return;
    }
    const peer = stream.session?.socket?.remoteAddress;
    const clientAddress = deps.clientAddress ? deps.clientAddress(peer) : peer;
    door.serve(procedure, stream, headers, requestId, clientAddress, firstMessage).catch((error: unknown) => {
      deps.logError(error, { procedure: procedure.path.slice(1) });
      if (!stream.destroyed) stream.close(constants.NGHTTP2_INTERNAL_ERROR);
    });
  });

  return server;
}
