import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { CallSource } from "./call.js";

/** A call's view of an HTTP/1.1 request (the platform port's doors). */
export class HttpSource implements CallSource {
  readonly headers: IncomingHttpHeaders;
  readonly httpMethod: string;
  readonly url: string;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly clientAddress: string | undefined,
  ) {
    this.headers = req.headers;
    this.httpMethod = req.method ?? "POST";
    this.url = req.url ?? "/";
  }

  onAbort(listener: () => void): void {
    const res = this.res;
    res.once("close", () => {
      if (!res.writableFinished) listener();
    });
  }
}

/** Reads one header from Node's incoming headers without building a Headers object. */
export function headerReader(raw: IncomingHttpHeaders): Pick<Headers, "get"> {
  return {
    get(name: string) {
      const value = raw[name.toLowerCase()];
      if (value === undefined) return null;
      return Array.isArray(value) ? value.join(", ") : value;
    },
  };
}

/**
 * Copies fetch Headers onto Node's outgoing headers (optionally prefixed, as
 * Connect unary sends trailers: `trailer-<name>`); Set-Cookie stays a list.
 */
export function copyHeaders(target: OutgoingHttpHeaders, source: Headers | undefined, prefix = ""): void {
  if (!source) return;
  source.forEach((value, name) => {
    if (name !== "set-cookie") target[prefix + name] = value;
  });
  const cookies = source.getSetCookie();
  if (cookies.length > 0) target[`${prefix}set-cookie`] = cookies;
}

/** One header's value as a string (repeated headers joined with ", "). */
export function oneHeader(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(", ") : value;
}
