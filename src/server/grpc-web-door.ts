import type { Message } from "@bufbuild/protobuf";
import { Code, ConnectError as ConnectErrorClass, type ConnectError } from "@connectrpc/connect";
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import { DomainError } from "../domain/errors.js";
import { Call } from "./call.js";
import { EnvelopeFlag, encodeEnvelope, readEnvelopes } from "./envelope.js";
import { grpcStatusFields, parseGrpcTimeout } from "./grpc-status.js";
import { contentCodingOf, mediaTypeOf } from "./http-body.js";
import { copyHeaders, HttpSource, oneHeader } from "./http-source.js";
import { decodeMessage, encodeMessage, type Codec } from "./message-codec.js";
import type { DoorDeps } from "./pipeline.js";
import type { Procedure } from "./procedures.js";
import { writeStream } from "./write-stream.js";

export type GrpcWebDoorDeps = DoorDeps;

/** gRPC-Web content types (https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-WEB.md); the text (base64) variant is not served. */
export function grpcWebCodecOf(contentType: string | undefined): Codec | undefined {
  const type = mediaTypeOf(contentType);
  if (type === "application/grpc-web" || type === "application/grpc-web+proto") return "binary";
  if (type === "application/grpc-web+json") return "json";
  return undefined;
}

/** True for every gRPC-Web content type, served or not (they get gRPC-Web shaped answers). */
export function isGrpcWeb(contentType: string | undefined): boolean {
  return mediaTypeOf(contentType).startsWith("application/grpc-web");
}

/**
 * The gRPC-Web door on the platform port: enveloped messages in the body,
 * the status in a trailers frame at its end (HTTP 200 whatever the outcome).
 */
export function createGrpcWebDoor(deps: GrpcWebDoorDeps) {
  const { pipeline } = deps;

  async function serve(
    procedure: Procedure,
    req: IncomingMessage,
    res: ServerResponse,
    requestId: string,
    clientAddress: string | undefined,
  ) {
    const call = new Call(procedure, "grpc_web", requestId, new HttpSource(req, res, clientAddress));
    const codec = grpcWebCodecOf(req.headers["content-type"]);
    const contentType = codec === "json" ? "application/grpc-web+json" : "application/grpc-web+proto";
    let coding: ReturnType<typeof contentCodingOf>;
    try {
      if (codec === undefined) {
        throw new DomainError(
          "invalid_argument",
          "unsupported_media_type",
          "gRPC-Web requests must be application/grpc-web, application/grpc-web+proto or application/grpc-web+json (the -text variant is not served)",
        );
      }
      coding = contentCodingOf(oneHeader(req.headers, "grpc-encoding"));
      const timeout = parseGrpcTimeout(oneHeader(req.headers, "grpc-timeout"));
      if (timeout !== undefined) call.deadline = call.startedAt + timeout;
    } catch (error) {
      req.resume();
      return finish(res, call, contentType, pipeline.refuse(call, error), false);
    }
    const method = procedure.method;
    const inputs = (async function* () {
      for await (const envelope of readEnvelopes(req, deps.readMaxBytes, coding)) {
        yield decodeMessage(method.input, codec as Codec, envelope.data);
      }
    })();
    if (method.methodKind === "unary") {
      const outcome = await pipeline.unary(call, firstOf, inputs);
      if (!outcome.ok) return finish(res, call, contentType, outcome.error, false);
      begin(res, call, contentType);
      res.write(encodeEnvelope(0, encodeMessage(method.output, codec as Codec, outcome.message)));
      return finish(res, call, contentType, undefined, true);
    }
    const outcome = await pipeline.stream(call, inputs);
    if (!outcome.ok) return finish(res, call, contentType, outcome.error, false);
    begin(res, call, contentType);
    const failure = await writeStream(res, outcome.messages, (message) =>
      encodeEnvelope(0, encodeMessage(method.output, codec as Codec, message)),
    );
    if (!res.destroyed) finish(res, call, contentType, failure, true);
  }

  return { serve };
}

/** The one message of a unary gRPC or gRPC-Web request: exactly one envelope. */
export async function firstOf(_call: Call, inputs: AsyncIterable<Message>): Promise<Message> {
  let first: Message | undefined;
  for await (const message of inputs) {
    if (first !== undefined)
      throw new DomainError("invalid_argument", "malformed_request", "a unary RPC takes exactly one request message");
    first = message;
  }
  if (first === undefined) throw new DomainError("invalid_argument", "malformed_request", "the request has no message");
  return first;
}

function begin(res: ServerResponse, call: Call, contentType: string): void {
  const headers: OutgoingHttpHeaders = { "content-type": contentType };
  copyHeaders(headers, call.touchedHeader);
  res.writeHead(200, headers);
}

/** Ends the answer with the trailers frame (status, details and the handler's trailers). */
function finish(res: ServerResponse, call: Call, contentType: string, error: ConnectError | undefined, begun: boolean): void {
  if (!begun) begin(res, call, contentType);
  const fields: Record<string, string> = {};
  call.touchedTrailer?.forEach((value, name) => {
    fields[name] = value;
  });
  error?.metadata.forEach((value, name) => {
    fields[name] = value;
  });
  Object.assign(fields, grpcStatusFields(error));
  const text = Object.entries(fields)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join("");
  res.end(encodeEnvelope(EnvelopeFlag.GrpcWebTrailer, Buffer.from(text, "latin1")));
}

/** A gRPC-Web request for a path that names no served RPC: a trailers-only `unimplemented` answer (gRPC status 12). */
export function writeGrpcWebUnimplemented(res: ServerResponse): void {
  const fields = grpcStatusFields(
    new ConnectErrorClass("the server does not serve this method: list what it serves with gRPC server reflection", Code.Unimplemented),
  );
  res.writeHead(200, { "content-type": "application/grpc-web+proto", ...fields, "content-length": 0 });
  res.end();
}
