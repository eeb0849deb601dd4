import { connect, constants, type ClientHttp2Session } from "node:http2";
import { gzipSync } from "node:zlib";
import type { TestServer } from "./server.js";

/**
 * Raw clients of every door of the platform, written from the protocol
 * documents rather than with connect-es, so that a test sees exactly the bytes
 * each door answers: the HTTP status, the error body or gRPC status, headers.
 */
export type Door = "connect_json" | "connect_binary" | "grpc_web" | "grpc" | "rest";

/** What a door answered, brought to one shape. */
export interface DoorAnswer {
  /** HTTP status (200 for gRPC and gRPC-Web errors: the status is in trailers). */
  httpStatus: number;
  /** The Connect code ("ok" on success), from the JSON error body or grpc-status. */
  code: string;
  /** The human message (Connect body `message`, or the decoded grpc-message). */
  message: string;
  /** Everything the answer carried as text (body, headers, trailers), to check nothing was echoed. */
  raw: string;
  headers: Record<string, string>;
}

export interface DoorRequest {
  /** `/svc.v1.ConfigService/GetConfig` */
  procedure: string;
  /** The request message as JSON (Connect JSON, REST body) */
  json?: unknown;
  /** The request message as protobuf binary (Connect binary, gRPC, gRPC-Web). */
  binary?: Uint8Array;
  /** Raw body bytes instead of an encoded message (malformed input). */
  rawBody?: Uint8Array;
  bearer?: string;
  /** Content-Encoding / grpc-encoding of the body. */
  encoding?: "gzip" | "compress";
  requestId: string;
  /** For the REST door: method and path. */
  rest?: { method: string; path: string };
}

const codeNames = [
  "ok",
  "canceled",
  "unknown",
  "invalid_argument",
  "deadline_exceeded",
  "not_found",
  "already_exists",
  "permission_denied",
  "resource_exhausted",
  "failed_precondition",
  "aborted",
  "out_of_range",
  "unimplemented",
  "internal",
  "unavailable",
  "data_loss",
  "unauthenticated",
];

export function envelope(flags: number, data: Uint8Array): Buffer {
  const out = Buffer.alloc(5 + data.length);
  out[0] = flags;
  out.writeUInt32BE(data.length, 1);
  Buffer.from(data).copy(out, 5);
  return out;
}

function encodeBody(body: Uint8Array, encoding: DoorRequest["encoding"]): Uint8Array {
  return encoding === "gzip" ? gzipSync(body) : body;
}

/** Sends one request through a door. */
export async function callDoor(server: TestServer, door: Door, request: DoorRequest): Promise<DoorAnswer> {
  if (door === "grpc") return callGrpc(server.grpcUrl, request);
  const headers: Record<string, string> = { "x-request-id": request.requestId };
  if (request.bearer !== undefined) headers.authorization = `Bearer ${request.bearer}`;
  let url = `${server.url}${request.procedure}`;
  let method = "POST";
  let body: Uint8Array | undefined;
  if (door === "connect_json" || door === "rest") {
    headers["content-type"] = "application/json";
    body = request.rawBody ?? (request.json === undefined ? undefined : Buffer.from(JSON.stringify(request.json)));
    if (door === "rest") {
      if (!request.rest) throw new Error("a REST request needs rest.method and rest.path");
      url = `${server.url}${request.rest.path}`;
      method = request.rest.method;
      if (method === "GET") body = undefined;
    }
    if (body && request.encoding) {
      headers["content-encoding"] = request.encoding;
      body = encodeBody(body, request.encoding);
    }
  } else if (door === "connect_binary") {
    headers["content-type"] = "application/proto";
    body = request.rawBody ?? request.binary ?? new Uint8Array();
    if (request.encoding) {
      headers["content-encoding"] = request.encoding;
      body = encodeBody(body, request.encoding);
    }
  } else {
    headers["content-type"] = "application/grpc-web+proto";
    let message = request.rawBody ?? request.binary ?? new Uint8Array();
    let flags = 0;
    if (request.encoding) {
      headers["grpc-encoding"] = request.encoding;
      message = encodeBody(message, request.encoding);
      flags = 1;
    }
    body = envelope(flags, message);
  }
  const response = await fetch(url, { method, headers, ...(body ? { body: Buffer.from(body) } : {}) });
  const bytes = Buffer.from(await response.arrayBuffer());
  const responseHeaders = Object.fromEntries(response.headers);
  const raw = `${JSON.stringify(responseHeaders)}\n${bytes.toString("latin1")}`;
  if (door === "grpc_web") {
    const trailers = { ...grpcWebTrailers(bytes), ...responseHeaders };
    return {
      httpStatus: response.status,
      code: codeNames[Number(trailers["grpc-status"] ?? 2)] ?? "unknown",
      message: decodeURIComponent(trailers["grpc-message"] ?? ""),
      raw,
      headers: trailers,
    };
  }
  if (response.status === 200) return { httpStatus: 200, code: "ok", message: "", raw, headers: responseHeaders };
  let parsed: { code?: string; message?: string } = {};
  try {
    parsed = JSON.parse(bytes.toString("utf8")) as typeof parsed;
  } catch {
    // An error answer without a JSON body: the test sees code "" and fails on it.
  }
  return { httpStatus: response.status, code: parsed.code ?? "", message: parsed.message ?? "", raw, headers: responseHeaders };
}

/** The trailers frame (flag 0x80) of a gRPC-Web body. */
function grpcWebTrailers(body: Buffer): Record<string, string> {
  const fields: Record<string, string> = {};
  let offset = 0;
  while (offset + 5 <= body.length) {
    const flags = body[offset] as number;
    const length = body.readUInt32BE(offset + 1);
    const data = body.subarray(offset + 5, offset + 5 + length);
    offset += 5 + length;
    if (flags & 0x80) {
      for (const line of data.toString("latin1").split("\r\n")) {
        const colon = line.indexOf(":");
        if (colon > 0) fields[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
    }
  }
  return fields;
}

let sessions = new Map<string, ClientHttp2Session>();

/** Closes the HTTP/2 connections the gRPC door's client opened. */
export function closeGrpcClients(): void {
  for (const session of sessions.values()) session.close();
  sessions = new Map();
}

function sessionTo(url: string): ClientHttp2Session {
  let session = sessions.get(url);
  if (!session || session.closed || session.destroyed) {
    session = connect(url);
    session.on("error", () => {});
    sessions.set(url, session);
  }
  return session;
}

async function callGrpc(grpcUrl: string, request: DoorRequest): Promise<DoorAnswer> {
  const headers: Record<string, string> = {
    ":method": "POST",
    ":path": request.procedure,
    "content-type": "application/grpc+proto",
    te: "trailers",
    "x-request-id": request.requestId,
  };
  if (request.bearer !== undefined) headers.authorization = `Bearer ${request.bearer}`;
  let message = request.rawBody ?? request.binary ?? new Uint8Array();
  let flags = 0;
  if (request.encoding) {
    headers["grpc-encoding"] = request.encoding;
    message = encodeBody(message, request.encoding);
    flags = 1;
  }
  const stream = sessionTo(grpcUrl).request(headers);
  stream.end(envelope(flags, message));
  return new Promise((resolve, reject) => {
    let status = 0;
    let fields: Record<string, string> = {};
    const chunks: Buffer[] = [];
    stream.on("response", (h) => {
      status = Number(h[":status"]);
      fields = { ...fields, ...stringFields(h) };
    });
    stream.on("trailers", (t) => {
      fields = { ...fields, ...stringFields(t) };
    });
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("error", reject);
    stream.on("close", () => {
      if (stream.rstCode && stream.rstCode !== constants.NGHTTP2_NO_ERROR && !fields["grpc-status"]) {
        reject(new Error(`stream reset with code ${stream.rstCode}`));
        return;
      }
      const raw = `${JSON.stringify(fields)}\n${Buffer.concat(chunks).toString("latin1")}`;
      resolve({
        httpStatus: status,
        code: codeNames[Number(fields["grpc-status"] ?? 2)] ?? "unknown",
        message: decodeURIComponent(fields["grpc-message"] ?? ""),
        raw,
        headers: fields,
      });
    });
  });
}

function stringFields(headers: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) if (!name.startsWith(":")) out[name] = String(value);
  return out;
}
