import { Transform, type Readable, type TransformCallback } from "node:stream";

/** Raised into the upstream request when a body grows past the route's limit: undici aborts that request. */
export class BodyTooLargeError extends Error {
  override readonly name = "BodyTooLargeError";
}

/**
 * A request body without a Content-Length (chunked), passed on as it comes
 * until it grows past `limit` bytes; then the stream fails, which aborts the
 * upstream request before its body is complete (docs/gateway.md,
 * `max_body_bytes`), and `exceeded` tells the request to answer 413.
 */
export function limitBody(body: Readable, limit: number, exceeded: () => void): Transform {
  let seen = 0;
  const limited = new Transform({
    transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback) {
      seen += chunk.length;
      if (seen > limit) {
        exceeded();
        body.unpipe(limited);
        done(new BodyTooLargeError(`the request body is over ${limit} bytes`));
        return;
      }
      done(null, chunk);
    },
  });
  body.on("error", (error) => limited.destroy(error));
  body.pipe(limited);
  return limited;
}
