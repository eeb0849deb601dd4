import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { DomainError, invalidArgument } from "../domain/errors.js";
import type { Clock } from "../domain/clock.js";
import type { SessionIssuer } from "../domain/identity/sessions.js";
import { mediaTypeOf, readBody } from "../server/http-body.js";
import type { PlantStore } from "./plant-store.js";
import { exactInteger, numberLiteral, parseExactJson, type ExactJson } from "./exact-json.js";
import { plantApiDocument, plantApiDocumentJson } from "./openapi.js";
import { createRequestValidator } from "./request-validator.js";

export interface PlantApiDeps {
  /** The plants of each organisation. */
  plants: PlantStore;
  /** This platform's session check (the identity area's, shared with ValidateSession). */
  sessions: Pick<SessionIssuer, "verifySessionToken">;
  clock: Clock;
  logger: { error(object: object, message: string): void };
}

/** Largest accepted request body: a NewPlant is a few hundred bytes; 413 beyond. */
export const maxPlantBodyBytes = 64 * 1024;

type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/**
 * The sample plant API's HTTP server. Requests that node's HTTP parser
 * refuses before any handler runs (a malformed request line, headers over
 * node's limit) still get the Error body.
 */
export function createPlantServer(deps: PlantApiDeps): Server {
  const server = createServer({ keepAliveTimeout: 65_000 }, createPlantApi(deps));
  server.on("clientError", (error: Error & { code?: string }, socket: Duplex) => {
    if (error.code === "ECONNRESET" || !socket.writable) return void socket.destroy();
    const [status, reason, message] =
      error.code === "HPE_HEADER_OVERFLOW"
        ? [431, "Request Header Fields Too Large", "the request headers are larger than the server accepts"]
        : error.code === "ERR_HTTP_REQUEST_TIMEOUT"
          ? [408, "Request Timeout", "the request was not received in time"]
          : [400, "Bad Request", "the request is not valid HTTP/1.1"];
    const body = JSON.stringify({ error: status, message });
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  });
  return server;
}

/**
 * The sample plant API (docs/plants.md, "The sample plant API") as a node:http
 * request listener: GET /openapi.json and POST /plants, protected by this
 * platform's sessions. Every answer other than 200 is the document's Error
 * `{"error": <status>, "message": ...}`; nothing escapes as a 500.
 */
export function createPlantApi(deps: PlantApiDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const newPlant = createRequestValidator(plantApiDocument).body("/plants", "post");
  const store = deps.plants;
  // The identity area's issuer, shared with ValidateSession: the same checks, the same key cache.
  const sessions = deps.sessions;
  const documentBytes = Buffer.from(plantApiDocumentJson);

  const serveDocument: Handler = async (req, res) => {
    req.resume();
    res.writeHead(200, { "content-type": "application/json", "content-length": documentBytes.length, "cache-control": "no-cache" });
    res.end(req.method === "HEAD" ? undefined : documentBytes);
  };

  const addPlant: Handler = async (req, res) => {
    const session = await sessions.verifySessionToken(bearerToken(req.headers.authorization));
    checkMediaType(req.headers["content-type"], newPlant.mediaTypes);
    const body = await readJsonBody(req, newPlant.required);
    const violations = newPlant.validate(body);
    if (violations.length > 0) throw invalidArgument(violations, "invalid_plant");

    // The document has just vouched for the shape: an object with a string
    // name, an optional string tag and an integer id from 1 to 2^63-1.
    const fields = body as Record<string, ExactJson>;
    const literal = numberLiteral(fields.id);
    const id = literal === undefined ? undefined : exactInteger(literal);
    if (id === undefined) throw invalidArgument([{ field: "id", description: "must be an integer" }], "invalid_plant");
    const name = fields.name as string;
    const tag = fields.tag as string | undefined;
    try {
      await store.createPlant({
        organizationId: session.organizationId,
        id,
        identityId: session.identityId,
        name,
        tag: tag ?? null,
        createdAt: deps.clock(),
      });
    } catch (error) {
      // A duplicate `id` in the same organisation is 400 (docs/plants.md, "`id` is an int64, kept exactly").
      if (error instanceof DomainError && error.reason === "plant_id_taken") {
        throw invalidArgument(
          [{ field: "id", description: `${id} is already taken by another plant of this organisation` }],
          "plant_id_taken",
        );
      }
      throw error;
    }
    // 200 Plant: the document's Plant has name and tag only.
    sendJson(res, 200, tag === undefined ? { name } : { name, tag });
  };

  const routes = new Map<string, Map<string, Handler>>([
    ["/plants", new Map([["POST", addPlant]])],
    [
      "/openapi.json",
      new Map([
        ["GET", serveDocument],
        ["HEAD", serveDocument],
      ]),
    ],
  ]);

  return (req, res) => {
    const path = (req.url ?? "/").split("?", 1)[0] ?? "/";
    const methods = routes.get(path);
    if (!methods) return refuse(req, res, 404, `no such path: ${truncate(path)}; this API serves POST /plants and GET /openapi.json`);
    const method = req.method ?? "GET";
    const handler = methods.get(method);
    if (!handler) {
      const allowed = [...methods.keys()].join(", ");
      return refuse(req, res, 405, `method ${truncate(method)} is not allowed on ${path}; use ${allowed}`, { allow: allowed });
    }
    handler(req, res).catch((error: unknown) => {
      const failure = failureOf(error);
      if (failure.status === 503) deps.logger.error({ err: error, path }, "plant API request failed");
      if (res.headersSent) return void res.destroy();
      refuse(req, res, failure.status, failure.message, failure.headers);
    });
  };
}

/** The token of an `Authorization: Bearer <token>` header (RFC 6750 2.1); unauthenticated otherwise. */
function bearerToken(header: string | undefined): string {
  if (header === undefined || header.trim() === "") {
    throw new DomainError(
      "unauthenticated",
      "credential_missing",
      "authorization: a session token is required (Authorization: Bearer <token>)",
    );
  }
  const match = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(header);
  if (!match?.[1])
    throw new DomainError("unauthenticated", "credential_malformed", "authorization: must be Bearer followed by a session token");
  return match[1];
}

function checkMediaType(header: string | undefined, accepted: readonly string[]): void {
  const mediaType = mediaTypeOf(header);
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(header ?? "")?.[1]?.toLowerCase();
  if (!accepted.includes(mediaType) || (charset !== undefined && charset !== "utf-8" && charset !== "utf8")) {
    throw new DomainError(
      "invalid_argument",
      "unsupported_media_type",
      `content-type: must be ${accepted.join(" or ")} (UTF-8), got ${header ? truncate(header) : "none"}`,
    );
  }
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

async function readJsonBody(req: IncomingMessage, required: boolean): Promise<ExactJson> {
  let bytes: Buffer;
  try {
    bytes = await readBody(req, maxPlantBodyBytes);
  } catch (error) {
    if (error instanceof DomainError && error.reason === "body_too_large") {
      throw new DomainError("resource_exhausted", "body_too_large", `body: larger than the limit of ${maxPlantBodyBytes} bytes (64 KiB)`);
    }
    throw error;
  }
  if (bytes.length === 0) {
    if (required) throw invalidArgument([{ field: "body", description: "is required: a NewPlant JSON object" }], "invalid_plant");
    return undefined;
  }
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw invalidArgument([{ field: "body", description: "is not valid UTF-8" }], "invalid_json");
  }
  try {
    return parseExactJson(text);
  } catch (error) {
    // RangeError: nesting deep enough to exhaust the parser's stack.
    const why = error instanceof SyntaxError ? error.message : "nested too deeply";
    throw invalidArgument([{ field: "body", description: `is not valid JSON: ${truncate(why)}` }], "invalid_json");
  }
}

interface Failure {
  status: number;
  message: string;
  headers?: Record<string, string>;
}

/** The one place a failure becomes a status (docs/plants.md, "Errors": 400 or 401; 404, 405, 413, 415). */
function failureOf(error: unknown): Failure {
  if (error instanceof DomainError) {
    if (error.reason === "body_too_large") return { status: 413, message: error.message, headers: { connection: "close" } };
    if (error.reason === "unsupported_media_type") return { status: 415, message: error.message, headers: { accept: "application/json" } };
    if (error.kind === "invalid_argument") return { status: 400, message: error.message };
    if (error.kind === "unauthenticated") {
      // RFC 6750 3.1: no error code when no credential was sent at all.
      const challenge = error.reason === "credential_missing" ? 'Bearer realm="plants"' : 'Bearer realm="plants", error="invalid_token"';
      return { status: 401, message: error.message, headers: { "www-authenticate": challenge } };
    }
  }
  // The database or the key store failed: not the caller's fault, and not a
  // crash either. The cause goes to the log, never to the client.
  return { status: 503, message: "the plant store is unavailable; try again shortly", headers: { "retry-after": "1" } };
}

function refuse(req: IncomingMessage, res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void {
  // Unread body bytes are discarded by node before the next request on the connection.
  req.resume();
  sendJson(res, status, { error: status, message }, headers);
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const bytes = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { ...headers, "content-type": "application/json", "content-length": bytes.length });
  res.end(bytes);
}

/** Caller-supplied text quoted in a message, cut short. */
function truncate(text: string): string {
  return text.length > 100 ? `${text.slice(0, 100)}...` : text;
}
