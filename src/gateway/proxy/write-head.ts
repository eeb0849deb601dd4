import { ServerResponse } from "node:http";
import type { Http2ServerResponse } from "node:http2";

/**
 * Writes an answer's status and headers ([name, value, ...], names in lower
 * case). node:http takes them as they are; HTTP/2 takes a mapping, and no
 * connection-specific field (RFC 9113 section 8.2.2).
 */
export function writeHeadOf(res: ServerResponse | Http2ServerResponse, status: number, headers: readonly (string | string[])[]): void {
  if (res instanceof ServerResponse) {
    res.writeHead(status, headers as string[]);
    return;
  }
  res.writeHead(status, http2Mapping(headers));
}

/**
 * A whole answer in its head alone: on HTTP/2 one HEADERS frame that ends
 * the stream, as a gRPC Trailers-Only response must be (a client such as
 * grpc-core reads an empty DATA frame after the head as a call that ended
 * without its status); on HTTP/1.1 the head and an empty body.
 */
export function endWithHead(res: ServerResponse | Http2ServerResponse, status: number, headers: readonly (string | string[])[]): void {
  if (res instanceof ServerResponse) {
    res.writeHead(status, headers as string[]);
    res.end();
    return;
  }
  res.stream.respond({ ...http2Mapping(headers), ":status": status }, { endStream: true });
}

function http2Mapping(headers: readonly (string | string[])[]): Record<string, string | string[]> {
  const mapping: Record<string, string | string[]> = {};
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i] as string;
    if (connectionSpecific.has(name)) continue;
    const value = headers[i + 1]!;
    const existing = mapping[name];
    mapping[name] =
      existing === undefined ? value : [...(Array.isArray(existing) ? existing : [existing]), ...(Array.isArray(value) ? value : [value])];
  }
  return mapping;
}

/** Fields HTTP/2 does not carry (RFC 9113 section 8.2.2). */
const connectionSpecific: ReadonlySet<string> = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"]);
