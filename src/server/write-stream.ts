import type { Message } from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import type { Writable } from "node:stream";

/**
 * Writes a streaming answer's messages as they come, waiting for the
 * connection to drain when it is full (a slow reader holds the handler back
 * instead of growing the buffer). Returns the error the stream ended with, if
 * any; stops quietly when the connection is gone.
 */
export async function writeStream(
  out: Writable,
  messages: AsyncIterable<Message>,
  frame: (message: Message) => Uint8Array,
): Promise<ConnectError | undefined> {
  try {
    for await (const message of messages) {
      if (out.destroyed) break;
      if (!out.write(frame(message))) await drained(out);
    }
    return undefined;
  } catch (error) {
    // The pipeline's stream throws only ConnectErrors that are safe to show.
    return error as ConnectError;
  }
}

function drained(out: Writable): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      out.off("drain", done);
      out.off("close", done);
      resolve();
    };
    out.on("drain", done);
    out.on("close", done);
  });
}
