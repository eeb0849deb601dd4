import type { ConnectError } from "@connectrpc/connect";
import type { ServerResponse } from "node:http";
import { reasonOf, retryAfterOf } from "../interceptors/errors.js";
import { errorJson, httpStatusOf } from "./error-body.js";

/**
 * Statuses beyond the Connect mapping (docs/errors.md, "Statuses"), chosen
 * by the error's stable reason: 415 on every door for a Content-Type or
 * Content-Encoding the platform does not take; on REST paths also 412 for an
 * If-Match mismatch and 413 for a body over the limit.
 */
const everyDoor: Record<string, number> = { unsupported_media_type: 415, unsupported_encoding: 415 };
const restOnly: Record<string, number> = { revision_mismatch: 412, body_too_large: 413 };

/** The HTTP status of an error answer on a Connect or REST path. */
export function errorStatusOf(error: ConnectError, rest: boolean): number {
  const reason = reasonOf(error);
  if (reason !== undefined) {
    const special = everyDoor[reason] ?? (rest ? restOnly[reason] : undefined);
    if (special !== undefined) return special;
  }
  return httpStatusOf(error.code);
}

/**
 * Writes a Connect JSON error body (the error body of every platform path)
 * with the given status, the error's metadata and `extra` as headers,
 * `Retry-After` when the error says when to retry, and `WWW-Authenticate:
 * Bearer` on a 401 (RFC 9110 §11.6.1: a 401 names the scheme to use).
 */
export function writeConnectError(res: ServerResponse, error: ConnectError, status: number, extra?: Headers): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(errorJson(error));
  const headers: Record<string, string | number | string[]> = {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
  };
  extra?.forEach((value, name) => {
    headers[name] = value;
  });
  const cookies = extra?.getSetCookie();
  if (cookies && cookies.length > 0) headers["set-cookie"] = cookies;
  error.metadata.forEach((value, name) => {
    headers[name] = value;
  });
  const retryAfter = retryAfterOf(error);
  if (retryAfter !== undefined) headers["retry-after"] = String(retryAfter);
  if (status === 401) headers["www-authenticate"] = 'Bearer realm="gatehouse"';
  res.writeHead(status, headers);
  res.end(body);
}
