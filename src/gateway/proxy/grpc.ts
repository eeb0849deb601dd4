import { connect, constants, type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders } from "node:http2";
import type { GatewayAnswer } from "../gateway-answer.js";

/**
 * gRPC through the gateway (docs/gateway.md, "gRPC"): a request whose
 * content-type is application/grpc or application/grpc+<codec> is forwarded
 * over HTTP/2 (h2c to an http target, h2 to an https one), streaming both
 * ways, trailers kept. The gateway's own refusals of such a request are
 * Trailers-Only answers (https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md).
 */

/** Whether a request is gRPC (not gRPC-Web, which is forwarded as it comes). */
export function isGrpc(contentType: string | string[] | undefined): boolean {
  if (typeof contentType !== "string" || !contentType.startsWith("application/grpc")) return false;
  const rest = contentType.slice(16);
  return rest === "" || rest.charCodeAt(0) === 43 /* + */ || rest.charCodeAt(0) === 59 /* ; */;
}

/** The gRPC status of a gateway answer's HTTP status (docs/gateway.md, "gRPC"). */
export function grpcStatusOf(status: number): number {
  switch (status) {
    case 400:
      return 3; // INVALID_ARGUMENT
    case 401:
      return 16; // UNAUTHENTICATED
    case 403:
      return 7; // PERMISSION_DENIED
    case 404:
    case 405:
    case 505:
      return 12; // UNIMPLEMENTED
    case 408:
    case 504:
      return 4; // DEADLINE_EXCEEDED
    case 413:
    case 429:
      return 8; // RESOURCE_EXHAUSTED
    case 502:
    case 503:
      return 14; // UNAVAILABLE
    default:
      return status >= 500 ? 13 : 2; // INTERNAL, UNKNOWN
  }
}

/** A grpc-message value: percent-encoded UTF-8 as the protocol asks, so any message travels in a header. */
export function grpcMessage(text: string): string {
  return encodeURIComponent(text).replace(/%20/g, " ");
}

/** The Trailers-Only answer of a gateway answer: [name, value, ...] for an HTTP 200 with no body. */
export function trailersOnly(answer: GatewayAnswer): string[] {
  const message = (JSON.parse(answer.body.toString("utf8")) as { message?: string }).message ?? answer.reason;
  return ["content-type", "application/grpc", "grpc-status", String(grpcStatusOf(answer.status)), "grpc-message", grpcMessage(message)];
}

/** grpc-timeout (an integer of at most 8 digits and a unit: H, M, S, m, u, n) in ms, or undefined (none, or too far to time). */
export function grpcTimeoutMs(value: string | string[] | undefined): number | undefined {
  if (typeof value !== "string") return undefined;
  const match = /^(\d{1,8})([HMSmun])$/.exec(value);
  if (match === null) return undefined;
  const amount = Number(match[1]);
  const unit = match[2];
  const ms =
    unit === "H"
      ? amount * 3_600_000
      : unit === "M"
        ? amount * 60_000
        : unit === "S"
          ? amount * 1_000
          : unit === "m"
            ? amount
            : unit === "u"
              ? amount / 1_000
              : amount / 1e6;
  // Beyond what a timer can hold (2^31-1 ms, about 24.8 days) Node would fire at once: such a deadline is none.
  if (ms > maxTimerMs) return undefined;
  return Math.max(1, Math.ceil(ms));
}

/** The longest delay setTimeout honours; a longer one fires at once (TimeoutOverflowWarning). */
const maxTimerMs = 2 ** 31 - 1;

/** Request fields that belong to one HTTP/2 hop or are set per stream: never copied onto the target's stream. */
const notForwarded: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "host",
  "te",
  "http2-settings",
]);

/** The target's stream headers: the upstream request's headers as HTTP/2 fields, pseudo-headers first. */
export function grpcRequestHeaders(
  headers: Record<string, string | string[]>,
  target: { readonly hostname: string; readonly port: number; readonly secure: boolean },
  path: string,
  method: string,
): Record<string, string | string[]> {
  const host = target.hostname.includes(":") ? `[${target.hostname}]` : target.hostname;
  const authority = target.port === (target.secure ? 443 : 80) ? host : `${host}:${target.port}`;
  const out: Record<string, string | string[]> = {
    ":method": method,
    ":scheme": target.secure ? "https" : "http",
    ":authority": authority,
    ":path": path,
  };
  for (const name in headers) if (!notForwarded.has(name)) out[name] = headers[name]!;
  out.te = "trailers";
  return out;
}

/** Sessions to one target origin at most: beyond, calls wait in the least busy one's queue. */
const maxSessionsPerOrigin = 16;
/** How long a session with no call open stays. */
const sessionIdleMs = 30_000;

interface PooledSession {
  readonly session: ClientHttp2Session;
  /** Calls open on it now. */
  streams: number;
  /** Whether the target's SETTINGS arrived (its SETTINGS_MAX_CONCURRENT_STREAMS is known). */
  ready: boolean;
  idle: NodeJS.Timeout | undefined;
}

/**
 * HTTP/2 client sessions to gRPC targets: a small pool per origin. A call goes on the least busy session
 * that has a stream left under the target's SETTINGS_MAX_CONCURRENT_STREAMS (RFC 9113 section 6.5.2); when
 * every one is full, another is opened, up to 16; a session that closes, errs or is told to go away is
 * forgotten, and one with no call open for 30 s is closed.
 */
export function createHttp2Sessions(options: { connectTimeoutMs(origin: string): number }) {
  const pools = new Map<string, PooledSession[]>();
  /** Calls waiting for a session's SETTINGS, by origin: called again when one arrives, with the error when a session failed first. */
  const waiting = new Map<string, ((failure?: Error) => void)[]>();

  const live = (entry: PooledSession) => !entry.session.closed && !entry.session.destroyed;
  const capacityOf = (entry: PooledSession) => entry.session.remoteSettings.maxConcurrentStreams ?? Number.POSITIVE_INFINITY;

  const connectTo = (origin: string): PooledSession => {
    const session = connect(origin, { settings: { enablePush: false } });
    // Frames leave as they are written (see createPlainListener in listeners.ts: Nagle's algorithm
    // holds a small frame for the peer's delayed ACK). 'connect' hands over the socket itself.
    session.once("connect", (_session, socket) => socket.setNoDelay(true));
    const entry: PooledSession = { session, streams: 0, ready: false, idle: undefined };
    const timer = setTimeout(() => {
      if (entry.ready || session.destroyed) return;
      session.destroy(Object.assign(new Error("connect timeout"), { code: "UND_ERR_CONNECT_TIMEOUT" }));
    }, options.connectTimeoutMs(origin));
    timer.unref();
    let failure: Error | undefined;
    const forget = (error?: unknown) => {
      clearTimeout(entry.idle);
      if (error instanceof Error) failure ??= error;
      const list = pools.get(origin);
      if (list !== undefined) {
        const at = list.indexOf(entry);
        if (at !== -1) list.splice(at, 1);
        if (list.length === 0) pools.delete(origin);
      }
      wake(origin, entry.ready ? undefined : (failure ?? new Error("the target closed the connection before its SETTINGS")));
    };
    session.on("error", forget);
    session.on("close", () => forget());
    session.on("goaway", () => forget());
    session.once("remoteSettings", () => {
      entry.ready = true;
      clearTimeout(timer);
      wake(origin);
    });
    session.unref();
    const list = pools.get(origin);
    if (list === undefined) pools.set(origin, [entry]);
    else list.push(entry);
    return entry;
  };

  /** Lets the calls waiting on an origin choose again (a session became ready or went away). */
  const wake = (origin: string, failure?: Error) => {
    const queue = waiting.get(origin);
    if (queue === undefined) return;
    waiting.delete(origin);
    for (const retry of queue) retry(failure);
  };

  /** A session for one more call: undefined while the only choice is one whose SETTINGS have not arrived. */
  const choose = (origin: string): PooledSession | undefined => {
    const list = (pools.get(origin) ?? []).filter(live);
    let best: PooledSession | undefined;
    for (const entry of list) {
      if (!entry.ready || entry.streams >= capacityOf(entry)) continue;
      if (best === undefined || entry.streams < best.streams) best = entry;
    }
    if (best !== undefined) return best;
    if (list.some((entry) => !entry.ready)) return undefined;
    if (list.length < maxSessionsPerOrigin) {
      connectTo(origin);
      return undefined;
    }
    // Every session is full: the call waits in the queue of the least busy one (nghttp2 sends it when a stream ends).
    let least = list[0]!;
    for (const entry of list) if (entry.streams < least.streams) least = entry;
    return least;
  };

  const start = (entry: PooledSession, headers: Record<string, string | string[]>): ClientHttp2Stream => {
    clearTimeout(entry.idle);
    entry.idle = undefined;
    const stream = entry.session.request(headers, { endStream: false });
    entry.streams++;
    stream.once("close", () => {
      if (--entry.streams > 0 || !live(entry)) return;
      entry.idle = setTimeout(() => {
        if (entry.streams === 0) entry.session.close();
      }, sessionIdleMs);
      entry.idle.unref();
    });
    return stream;
  };

  return {
    /**
     * A stream for one call to `origin`, on a session of its pool (opened when needed); rejects when the
     * target cannot be reached (refused, reset or timed out before its SETTINGS).
     */
    open(origin: string, headers: Record<string, string | string[]>): Promise<ClientHttp2Stream> {
      return new Promise((resolve, reject) => {
        const attempt = (failure?: Error) => {
          // A connection to the origin failed before its SETTINGS: the target cannot be reached now.
          if (failure !== undefined) return reject(failure);
          try {
            const chosen = choose(origin);
            if (chosen !== undefined) return resolve(start(chosen, headers));
          } catch (error) {
            return reject(error as Error);
          }
          const queue = waiting.get(origin);
          if (queue === undefined) waiting.set(origin, [attempt]);
          else queue.push(attempt);
        };
        attempt();
      });
    },
    close(): void {
      for (const list of pools.values()) for (const entry of list) entry.session.destroy();
      pools.clear();
      for (const origin of [...waiting.keys()]) wake(origin, new Error("the gateway is closing"));
    },
  };
}

export type Http2Sessions = ReturnType<typeof createHttp2Sessions>;

/** Closes a target's stream when the client's went away, or the deadline passed. */
export function cancel(stream: ClientHttp2Stream): void {
  if (!stream.closed && !stream.destroyed) stream.close(constants.NGHTTP2_CANCEL);
}

/** The response headers of a target as [name, value, ...] without pseudo-headers. */
export function responseHeadersOf(headers: IncomingHttpHeaders): (string | string[])[] {
  const out: (string | string[])[] = [];
  for (const name in headers) {
    if (name.charCodeAt(0) === 58 || notForwarded.has(name)) continue;
    const value = headers[name];
    if (value !== undefined) out.push(name, typeof value === "number" ? String(value) : value);
  }
  return out;
}
