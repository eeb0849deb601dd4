import type { IncomingMessage } from "node:http";
import { DomainError } from "../domain/errors.js";

/** Reads a request body, refusing (resource_exhausted, body_too_large) past the limit. */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) {
    req.resume();
    return Promise.reject(tooLarge(limit));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    req.on("data", (chunk: Buffer) => {
      if (failed) return;
      size += chunk.length;
      if (size > limit) {
        failed = true;
        reject(tooLarge(limit));
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => {
      if (!failed) resolve(chunks.length === 1 && chunks[0] ? chunks[0] : Buffer.concat(chunks, size));
    });
    req.on("error", (error) => {
      if (!failed) reject(error);
    });
  });
}

function tooLarge(limit: number): DomainError {
  return new DomainError(
    "resource_exhausted",
    "body_too_large",
    `request body is larger than the limit of ${limit} bytes (${(limit / 1024 / 1024).toFixed(limit >= 1024 * 1024 ? 0 : 2)} MiB)`,
  );
}

/** The media type of a Content-Type header, lower-cased, without parameters. */
export function mediaTypeOf(header: string | undefined): string {
  return (header ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
}

/** Node's incoming headers as a fetch Headers object (what handlers see). */
export function toHeaders(raw: IncomingMessage["headers"]): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else headers.set(name, value);
  }
  return headers;
}
