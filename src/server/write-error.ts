import type { ConnectError } from "@connectrpc/connect";
import { errorToJson } from "@connectrpc/connect/protocol-connect";
import type { ServerResponse } from "node:http";
import { retryAfterOf } from "../interceptors/errors.js";

/**
 * Writes a Connect JSON error body (the error body of every platform path) with
 * the given status, the error's metadata as headers, and Retry-After when the
 * error says when to retry.
 */
export function writeConnectError(res: ServerResponse, error: ConnectError, status: number, extra?: Headers): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(errorToJson(error, undefined));
  const headers: Record<string, string | number> = { "content-type": "application/json", "content-length": Buffer.byteLength(body) };
  extra?.forEach((value, name) => {
    headers[name] = value;
  });
  error.metadata.forEach((value, name) => {
    headers[name] = value;
  });
  const retryAfter = retryAfterOf(error);
  if (retryAfter !== undefined) headers["retry-after"] = String(retryAfter);
  res.writeHead(status, headers);
  res.end(body);
}
