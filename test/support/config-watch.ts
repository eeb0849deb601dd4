import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ConfigService, type WatchConfigResponse } from "../../gen/svc/v1/config_pb.js";

/** A WatchConfig subscriber over the Connect protocol, read one message at a time. */
export interface Watcher {
  /** The next message; rejects after timeoutMs or when the stream fails. */
  next(timeoutMs?: number): Promise<WatchConfigResponse>;
  /** Resolves with the error that ended the stream (or undefined when it ended cleanly). */
  ended(timeoutMs?: number): Promise<unknown>;
  close(): void;
}

export function watchConfig(baseUrl: string, bearer: string, request: { organizationId: string; sinceRevision?: number }): Watcher {
  const controller = new AbortController();
  const client = createClient(ConfigService, createConnectTransport({ baseUrl, httpVersion: "1.1" }));
  const iterator = client
    .watchConfig(request, { headers: { authorization: `Bearer ${bearer}` }, signal: controller.signal })
    [Symbol.asyncIterator]();
  const withTimeout = <T>(promise: Promise<T>, timeoutMs: number, what: string) =>
    new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no ${what} within ${timeoutMs} ms`)), timeoutMs);
      promise.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  return {
    async next(timeoutMs = 10_000) {
      const result = await withTimeout(iterator.next(), timeoutMs, "WatchConfig message");
      if (result.done) throw new Error("the WatchConfig stream ended");
      return result.value;
    },
    async ended(timeoutMs = 10_000) {
      try {
        const result = await withTimeout(iterator.next(), timeoutMs, "end of the WatchConfig stream");
        return result.done ? undefined : new Error(`unexpected message: revision ${result.value.revision}`);
      } catch (error) {
        return error;
      }
    },
    close() {
      controller.abort();
      iterator.return?.().catch(() => {});
    },
  };
}

/**
 * Under jest, connect-node does not recognise Node's own errors (they come
 * from another realm), so a subscriber hanging up is logged as a failed RPC
 * instead of being ignored as it is in production. Mute exactly that line.
 */
export function muteHangUpNoise(): void {
  const original = console.error.bind(console);
  console.error = (...args: unknown[]) => {
    if (
      typeof args[0] === "string" &&
      args[0].startsWith("handler for rpc WatchConfig") &&
      String(args[1]).includes("ERR_STREAM_DESTROYED")
    )
      return;
    original(...args);
  };
}
