import type { Message } from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import { constants, type IncomingHttpHeaders, type OutgoingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import { DomainError } from "../domain/errors.js";
import { Call, type CallSource } from "./call.js";
import { encodeEnvelope, readEnvelopes } from "./envelope.js";
import { grpcStatusFields, parseGrpcTimeout } from "./grpc-status.js";
import { firstOf } from "./grpc-web-door.js";
import { contentCodingOf, mediaTypeOf } from "./http-body.js";
import { copyHeaders, oneHeader } from "./http-source.js";
import { decodeMessage, encodeMessage, type Codec } from "./message-codec.js";
import type { DoorDeps } from "./pipeline.js";
import type { Procedure } from "./procedures.js";
import { writeStream } from "./write-stream.js";

export type GrpcDoorDeps = DoorDeps;

/** gRPC content types (https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md). */
export function grpcCodecOf(contentType: string | undefined): Codec | undefined {
  const type = mediaTypeOf(contentType);
  if (type === "application/grpc" || type === "application/grpc+proto") return "binary";
  if (type === "application/grpc+json") return "json";
  return undefined;
}

/** A call's view of an HTTP/2 stream. */
class StreamSource implements CallSource {
  readonly httpMethod: string;
  readonly url: string;

  constructor(
    readonly stream: ServerHttp2Stream,
    readonly headers: IncomingHttpHeaders,
    readonly clientAddress: string | undefined,
  ) {
    this.httpMethod = String(headers[":method"] ?? "POST");
    this.url = String(headers[":path"] ?? "/");
  }

  onAbort(listener: () => void): void {
    const stream = this.stream;
    stream.once("close", () => {
      if (!stream.writableFinished) listener();
    });
  }
}

/**
 * The gRPC door on the HTTP/2 port, on Node's stream API (the compatibility
 * request/response objects cost a large share of a cheap call). Every answer
 * is HTTP 200 with the status in trailers; an answer without messages is
 * "trailers-only": one HEADERS frame holding the status.
 */
export function createGrpcDoor(deps: GrpcDoorDeps) {
  const { pipeline } = deps;

  async function serve(
    procedure: Procedure,
    stream: ServerHttp2Stream,
    headers: IncomingHttpHeaders,
    requestId: string,
    clientAddress: string | undefined,
    onFirstMessage: () => void,
  ): Promise<void> {
    const call = new Call(procedure, "grpc", requestId, new StreamSource(stream, headers, clientAddress));
    const codec = grpcCodecOf(oneHeader(headers, "content-type")) as Codec;
    const contentType = codec === "json" ? "application/grpc+json" : "application/grpc+proto";
    let coding: ReturnType<typeof contentCodingOf>;
    try {
      coding = contentCodingOf(oneHeader(headers, "grpc-encoding"));
      const timeout = parseGrpcTimeout(oneHeader(headers, "grpc-timeout"));
      if (timeout !== undefined) call.deadline = call.startedAt + timeout;
    } catch (error) {
      stream.resume();
      onFirstMessage();
      return trailersOnly(stream, contentType, pipeline.refuse(call, error), requestId);
    }
    const method = procedure.method;
    const inputs = (async function* () {
      let first = true;
      for await (const envelope of readEnvelopes(stream, deps.readMaxBytes, coding)) {
        if (first) {
          first = false;
          onFirstMessage();
        }
        yield decodeMessage(method.input, codec, envelope.data);
      }
      if (first) onFirstMessage();
    })();
    if (method.methodKind === "unary") {
      const outcome = await pipeline.unary(call, firstOf, inputs);
      if (stream.destroyed) return;
      if (!outcome.ok) return trailersOnly(stream, contentType, outcome.error, requestId, call);
      respond(stream, contentType, call, requestId);
      stream.end(encodeEnvelope(0, encodeMessage(method.output, codec, outcome.message)));
      return;
    }
    const outcome = await pipeline.stream(call, inputs);
    if (stream.destroyed) return;
    if (!outcome.ok) return trailersOnly(stream, contentType, outcome.error, requestId, call);
    const trailers = respond(stream, contentType, call, requestId);
    const failure = await writeStream(stream, outcome.messages, (message: Message) =>
      encodeEnvelope(0, encodeMessage(method.output, codec, message)),
    );
    if (stream.destroyed) return;
    trailers.error = failure;
    stream.end();
  }

  return { serve };
}

/** Sends the headers and arranges the trailers (status, the handler's trailers) for when the body ends. */
function respond(stream: ServerHttp2Stream, contentType: string, call: Call, requestId: string): { error: ConnectError | undefined } {
  const headers: OutgoingHttpHeaders = { ":status": 200, "content-type": contentType, "x-request-id": requestId };
  copyHeaders(headers, call.touchedHeader);
  const state: { error: ConnectError | undefined } = { error: undefined };
  stream.respond(headers, { waitForTrailers: true });
  stream.once("wantTrailers", () => {
    const trailers: OutgoingHttpHeaders = {};
    copyHeaders(trailers, call.touchedTrailer);
    state.error?.metadata.forEach((value, name) => {
      trailers[name] = value;
    });
    Object.assign(trailers, grpcStatusFields(state.error));
    stream.sendTrailers(trailers);
  });
  return state;
}

/** An answer with no messages: the status in the one HEADERS frame. */
export function trailersOnly(stream: ServerHttp2Stream, contentType: string, error: ConnectError, requestId: string, call?: Call): void {
  if (stream.destroyed || stream.headersSent) {
    stream.close(constants.NGHTTP2_INTERNAL_ERROR);
    return;
  }
  const headers: OutgoingHttpHeaders = { ":status": 200, "content-type": contentType, "x-request-id": requestId };
  copyHeaders(headers, call?.touchedHeader);
  error.metadata.forEach((value, name) => {
    headers[name] = value;
  });
  Object.assign(headers, grpcStatusFields(error));
  stream.respond(headers, { endStream: true });
}

/** The answer to a path that names no served RPC: trailers-only `unimplemented` (gRPC status 12). */
export function unimplementedPath(): DomainError {
  return new DomainError(
    "unimplemented",
    "unknown_method",
    "the server does not serve this method: list what it serves with gRPC server reflection",
  );
}
