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

/** grpc-timeout (an integer of at most 8 digits and a unit: H, M, S, m, u, n) in ms, or undefined. */
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
  return Math.max(1, Math.ceil(ms));
}

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

/**
 * HTTP/2 client sessions to gRPC targets, one per origin, opened on first use
 * and again after one closes, errs or is told to go away.
 */
export function createHttp2Sessions(options: { connectTimeoutMs(origin: string): number }) {
  const sessions = new Map<string, ClientHttp2Session>();
  return {
    sessionFor(origin: string): ClientHttp2Session {
      const existing = sessions.get(origin);
      if (existing !== undefined && !existing.closed && !existing.destroyed) return existing;
      const session = connect(origin, { settings: { enablePush: false } });
      const forget = () => {
        if (sessions.get(origin) === session) sessions.delete(origin);
      };
      session.on("error", forget);
      session.on("close", forget);
      session.on("goaway", forget);
      const timer = setTimeout(() => {
        if (!session.connecting) return;
        session.destroy(Object.assign(new Error("connect timeout"), { code: "UND_ERR_CONNECT_TIMEOUT" }));
      }, options.connectTimeoutMs(origin));
      timer.unref();
      session.once("connect", () => clearTimeout(timer));
      session.unref();
      sessions.set(origin, session);
      return session;
    },
    close(): void {
      for (const session of sessions.values()) session.destroy();
      sessions.clear();
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
