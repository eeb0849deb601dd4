import type { JsonObject, Message } from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import { DomainError } from "../domain/errors.js";
import { Call } from "./call.js";
import { EnvelopeFlag, encodeEnvelope, readEnvelopes } from "./envelope.js";
import { errorJson } from "./error-body.js";
import { contentCodingOf, mediaTypeOf, readBody } from "./http-body.js";
import { copyHeaders, HttpSource, oneHeader } from "./http-source.js";
import { decodeMessage, encodeBody, encodeMessage, type Codec } from "./message-codec.js";
import type { DoorDeps } from "./pipeline.js";
import type { Procedure } from "./procedures.js";
import { errorStatusOf, writeConnectError } from "./write-error.js";
import { writeStream } from "./write-stream.js";

export type ConnectDoorDeps = DoorDeps;

/** The Connect protocol's content types (https://connectrpc.com/docs/protocol). */
const unaryTypes: Record<string, Codec> = { "application/json": "json", "application/proto": "binary" };
const streamTypes: Record<string, Codec> = { "application/connect+json": "json", "application/connect+proto": "binary" };

interface UnarySource {
  req: IncomingMessage;
  codec: Codec;
  limit: number;
}

async function readUnary(call: Call, source: UnarySource): Promise<Message> {
  const bytes = await readBody(source.req, source.limit);
  return decodeMessage(call.procedure.method.input, source.codec, bytes);
}

/**
 * The Connect door (POST, unary JSON or binary; server streaming with
 * enveloped messages and an end-of-stream message). It only frames: what a
 * request means, who may make it and what answers it is the pipeline's.
 */
export function createConnectDoor(deps: ConnectDoorDeps) {
  const { pipeline } = deps;

  async function serve(
    procedure: Procedure,
    req: IncomingMessage,
    res: ServerResponse,
    requestId: string,
    clientAddress: string | undefined,
  ) {
    const call = new Call(procedure, "connect", requestId, new HttpSource(req, res, clientAddress));
    const streaming = procedure.method.methodKind !== "unary";
    const type = mediaTypeOf(req.headers["content-type"]);
    const codec = streaming ? streamTypes[type] : unaryTypes[type];
    try {
      if (codec === undefined) throw unsupportedType(type, streaming);
      const version = oneHeader(req.headers, "connect-protocol-version");
      if (version !== undefined && version !== "1") {
        throw new DomainError("invalid_argument", "malformed_request", `Connect-Protocol-Version must be 1, got ${version.slice(0, 20)}`);
      }
      const timeout = oneHeader(req.headers, "connect-timeout-ms");
      if (timeout !== undefined) {
        if (!/^\d{1,10}$/.test(timeout)) {
          throw new DomainError(
            "invalid_argument",
            "malformed_request",
            "Connect-Timeout-Ms must be a whole number of milliseconds (up to 10 digits)",
          );
        }
        call.deadline = call.startedAt + Number(timeout);
      }
    } catch (error) {
      req.resume();
      return writeUnaryError(res, pipeline.refuse(call, error), call);
    }
    if (!streaming) return serveUnary(call, req, res, codec as Codec);
    return serveStream(call, req, res, codec as Codec);
  }

  async function serveUnary(call: Call, req: IncomingMessage, res: ServerResponse, codec: Codec) {
    const outcome = await pipeline.unary(call, readUnary, { req, codec, limit: deps.readMaxBytes });
    if (!outcome.ok) return writeUnaryError(res, outcome.error, call);
    const payload = encodeBody(call.procedure.method.output, codec, outcome.message);
    const headers: OutgoingHttpHeaders = {
      "content-type": codec === "binary" ? "application/proto" : "application/json",
      "content-length": typeof payload === "string" ? Buffer.byteLength(payload) : payload.byteLength,
    };
    copyHeaders(headers, call.touchedHeader);
    // Connect unary: trailers travel as headers prefixed with "trailer-".
    copyHeaders(headers, call.touchedTrailer, "trailer-");
    res.writeHead(200, headers);
    res.end(payload);
  }

  async function serveStream(call: Call, req: IncomingMessage, res: ServerResponse, codec: Codec) {
    const method = call.procedure.method;
    let coding: ReturnType<typeof contentCodingOf>;
    try {
      coding = contentCodingOf(oneHeader(req.headers, "connect-content-encoding"));
    } catch (error) {
      req.resume();
      return writeUnaryError(res, pipeline.refuse(call, error), call);
    }
    const inputs = (async function* () {
      for await (const envelope of readEnvelopes(req, deps.readMaxBytes, coding)) {
        yield decodeMessage(method.input, codec, envelope.data);
      }
    })();
    const outcome = await pipeline.stream(call, inputs);
    const headers: OutgoingHttpHeaders = { "content-type": codec === "binary" ? "application/connect+proto" : "application/connect+json" };
    copyHeaders(headers, call.touchedHeader);
    res.writeHead(200, headers);
    const failure = outcome.ok
      ? await writeStream(res, outcome.messages, (message) => encodeEnvelope(0, encodeMessage(method.output, codec, message)))
      : outcome.error;
    if (res.destroyed) return;
    res.end(encodeEnvelope(EnvelopeFlag.ConnectEndStream, Buffer.from(JSON.stringify(endStream(failure, call)))));
  }

  return { serve };
}

/** The end-of-stream message: the error, if any, and the trailers as metadata. */
function endStream(error: ConnectError | undefined, call: Call): JsonObject {
  const end: JsonObject = {};
  if (error) end.error = errorJson(error);
  const trailer = call.touchedTrailer;
  if (trailer) {
    const metadata: JsonObject = {};
    trailer.forEach((value, name) => {
      metadata[name] = [value];
    });
    end.metadata = metadata;
  }
  return end;
}

function writeUnaryError(res: ServerResponse, error: ConnectError, call: Call): void {
  writeConnectError(res, error, errorStatusOf(error, false), call.touchedHeader);
}

function unsupportedType(type: string, streaming: boolean): DomainError {
  const expected = streaming ? "application/connect+json or application/connect+proto" : "application/json or application/proto";
  return new DomainError(
    "invalid_argument",
    "unsupported_media_type",
    `Content-Type must be ${expected} for this ${streaming ? "streaming" : "unary"} RPC${type ? "" : " (none was sent)"}`,
  );
}
