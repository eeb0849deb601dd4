import type { Readable } from "node:stream";
import { DomainError } from "../domain/errors.js";
import { decodeBytes, tooLarge, type ContentCoding } from "./http-body.js";

/**
 * The length-prefixed message framing shared by gRPC, gRPC-Web and Connect
 * streaming (https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md,
 * "Length-Prefixed-Message"): one flags byte, a 4-byte big-endian length, the
 * message bytes.
 */
export const EnvelopeFlag = {
  Compressed: 0x01,
  /** Connect streaming: the end-of-stream message (JSON). */
  ConnectEndStream: 0x02,
  /** gRPC-Web: the trailers frame. */
  GrpcWebTrailer: 0x80,
} as const;

export interface Envelope {
  flags: number;
  data: Buffer;
}

/** One framed message. */
export function encodeEnvelope(flags: number, data: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + data.byteLength);
  out[0] = flags;
  out.writeUInt32BE(data.byteLength, 1);
  out.set(data, 5);
  return out;
}

/**
 * Reads the envelopes of a request body as they complete. A message declaring
 * more than `limit` bytes is refused before its bytes are read (the length
 * comes first); compressed messages are decoded with `coding`, their decoded
 * size held to the same limit; a body that ends inside an envelope is malformed.
 */
export async function* readEnvelopes(body: Readable, limit: number, coding: ContentCoding): AsyncGenerator<Envelope> {
  let pending: Buffer = Buffer.alloc(0);
  for await (const raw of chunksOf(body)) {
    const chunk = typeof raw === "string" ? Buffer.from(raw) : raw;
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.length >= 5) {
      const length = pending.readUInt32BE(1);
      if (length > limit) throw tooLarge(limit);
      if (pending.length < 5 + length) break;
      const flags = pending[0] as number;
      let data = pending.subarray(5, 5 + length);
      pending = pending.subarray(5 + length);
      if (flags & EnvelopeFlag.Compressed) {
        if (coding === "identity") {
          throw new DomainError(
            "invalid_argument",
            "malformed_request",
            "a message is flagged as compressed but the request names no message encoding",
          );
        }
        data = await decodeBytes(data, coding, limit);
      }
      yield { flags, data };
    }
  }
  if (pending.length > 0) {
    throw new DomainError(
      "invalid_argument",
      "malformed_request",
      "the request body ends inside a message (truncated length-prefixed frame)",
    );
  }
}

/**
 * The chunks of a request body. Unlike iterating the stream itself, stopping
 * early (a malformed message, a refused call) does not destroy it: the rest is
 * drained and thrown away, so the door can still write its answer on the
 * same connection or stream.
 */
async function* chunksOf(body: Readable): AsyncGenerator<Buffer | string> {
  const queue: (Buffer | string)[] = [];
  let ended = false;
  let failure: unknown;
  let wake: (() => void) | undefined;
  const notify = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  const onData = (chunk: Buffer | string) => {
    queue.push(chunk);
    // Hold the sender back while the reader is behind (flow control).
    if (queue.length > 16) body.pause();
    notify();
  };
  const onEnd = () => {
    ended = true;
    notify();
  };
  const onError = (error: unknown) => {
    failure = error;
    notify();
  };
  body.on("data", onData);
  body.once("end", onEnd);
  body.once("error", onError);
  try {
    for (;;) {
      const next = queue.shift();
      if (next !== undefined) {
        if (queue.length <= 16 && body.isPaused()) body.resume();
        yield next;
        continue;
      }
      if (failure !== undefined) throw failure;
      if (ended) return;
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
    }
  } finally {
    body.off("data", onData);
    body.off("end", onEnd);
    body.off("error", onError);
    // A client that goes away later must not become an unhandled 'error': the call is over for us.
    body.on("error", () => {});
    if (!ended && failure === undefined) body.resume();
  }
}
