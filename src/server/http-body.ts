import type { IncomingMessage } from "node:http";
import type { Readable } from "node:stream";
import { createBrotliDecompress, createGunzip, type BrotliDecompress, type Gunzip } from "node:zlib";
import { DomainError } from "../domain/errors.js";

/** Content codings a request body may use: anything else is 415 `unsupported_encoding` (docs/errors.md, "Statuses"). */
export type ContentCoding = "identity" | "gzip" | "br";

/**
 * The coding named by a Content-Encoding header (one coding; `identity` or no
 * header means none). Refuses what the platform does not decode, saying what it does.
 */
export function contentCodingOf(header: string | undefined): ContentCoding {
  if (header === undefined) return "identity";
  const coding = header.trim().toLowerCase();
  if (coding === "" || coding === "identity") return "identity";
  if (coding === "gzip" || coding === "x-gzip") return "gzip";
  if (coding === "br") return "br";
  throw new DomainError(
    "invalid_argument",
    "unsupported_encoding",
    `Content-Encoding must be gzip, br or identity (one coding, not a list); the body cannot be decoded otherwise`,
  );
}

/**
 * Reads a request body, decoding its Content-Encoding, and refuses
 * (resource_exhausted, body_too_large) as soon as the *decoded* size passes
 * the limit, so a small compressed body cannot inflate without bound.
 */
export function readBody(
  req: IncomingMessage,
  limit: number,
  coding: ContentCoding = contentCodingOf(req.headers["content-encoding"]),
): Promise<Buffer> {
  if (coding !== "identity") return readDecoded(req, limit, coding);
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) {
    req.resume();
    return Promise.reject(tooLarge(limit));
  }
  return collect(req, limit);
}

/** Decodes gzip or br bytes that arrived in one piece (a compressed envelope), with the same limit. */
export function decodeBytes(bytes: Uint8Array, coding: ContentCoding, limit: number): Promise<Buffer> {
  if (coding === "identity") {
    if (bytes.byteLength > limit) return Promise.reject(tooLarge(limit));
    return Promise.resolve(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  }
  const decoder = coding === "gzip" ? createGunzip() : createBrotliDecompress();
  const result = collect(decoder, limit, malformedCoding(coding));
  decoder.end(bytes);
  return result;
}

function readDecoded(req: IncomingMessage, limit: number, coding: "gzip" | "br"): Promise<Buffer> {
  const decoder: Gunzip | BrotliDecompress = coding === "gzip" ? createGunzip() : createBrotliDecompress();
  const result = collect(decoder, limit, malformedCoding(coding));
  req.on("error", (error) => decoder.destroy(error));
  req.pipe(decoder);
  // On refusal the request keeps being drained so the connection stays usable for the answer.
  result.catch(() => {
    req.unpipe(decoder);
    req.resume();
  });
  return result;
}

function collect(source: Readable, limit: number, onStreamError?: DomainError): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    source.on("data", (chunk: Buffer) => {
      if (failed) return;
      size += chunk.length;
      if (size > limit) {
        failed = true;
        reject(tooLarge(limit));
        if (onStreamError) source.destroy();
        return;
      }
      chunks.push(chunk);
    });
    source.on("end", () => {
      if (!failed) resolve(chunks.length === 1 && chunks[0] ? chunks[0] : Buffer.concat(chunks, size));
    });
    source.on("error", () => {
      if (failed) return;
      failed = true;
      // A decoder's error is a malformed body; a request's is the client going away (ECONNRESET, aborted).
      reject(onStreamError ?? incomplete());
    });
    // A client that goes away mid-body (or is cut off by the request timeout) may end the stream
    // without 'end' or 'error': the read must still settle, or the call would wait forever.
    source.on("close", () => {
      if (failed || source.readableEnded) return;
      failed = true;
      reject(incomplete());
    });
  });
}

function incomplete(): DomainError {
  return new DomainError("invalid_argument", "request_incomplete", "the connection closed before the request body was complete");
}

function malformedCoding(coding: string): DomainError {
  return new DomainError(
    "invalid_argument",
    "malformed_encoding",
    `the body is not valid ${coding} data, as its Content-Encoding says it is`,
  );
}

export function tooLarge(limit: number): DomainError {
  return new DomainError(
    "resource_exhausted",
    "body_too_large",
    `request body is larger than the limit of ${limit} bytes (${(limit / 1024 / 1024).toFixed(limit >= 1024 * 1024 ? 0 : 2)} MiB) once decoded`,
  );
}

/** The media type of a Content-Type header, lower-cased, without parameters. */
export function mediaTypeOf(header: string | undefined): string {
  if (header === undefined) return "";
  const semicolon = header.indexOf(";");
  return (semicolon === -1 ? header : header.slice(0, semicolon)).trim().toLowerCase();
}

/** Node's incoming headers as a fetch Headers object. */
export function toHeaders(raw: IncomingMessage["headers"]): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined || name.startsWith(":")) continue;
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else headers.set(name, value);
  }
  return headers;
}
