import { fromJson, toJson, type DescMethod, type JsonObject, type JsonValue, type Message } from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import type { IncomingMessage, ServerResponse } from "node:http";
import { DomainError } from "../domain/errors.js";
import { toConnectError } from "../interceptors/errors.js";
import { invokeUnary, type InvokeDeps } from "../server/invoke-unary.js";
import { mediaTypeOf, readBody } from "../server/http-body.js";
import type { UnaryEntry } from "../server/registry.js";
import { writeConnectError } from "../server/write-error.js";
import type { RestRoute } from "./routes.js";
import { restStatusOf } from "./status.js";

export interface RestShimDeps extends InvokeDeps {
  routes: readonly RestRoute[];
  unary: ReadonlyMap<string, UnaryEntry>;
  limits: { jsonBody: number; configBody: number };
}

interface CompiledRoute {
  route: RestRoute;
  regex: RegExp;
  params: string[];
  /** The served RPC, when the route names one (not chosen by the body). */
  entry: UnaryEntry | undefined;
}

const yamlTypes = new Set(["application/yaml", "application/x-yaml", "text/yaml"]);
const jsonWrite = { useProtoFieldName: true, alwaysEmitImplicit: true } as const;

/** The matched route of a request, for metrics and logs (the pattern, never the raw path). */
export interface RestMatch {
  pattern: string;
  /** url parses the request target when (and only if) it is needed. */
  handle(req: IncomingMessage, res: ServerResponse, url: () => URL): Promise<void>;
}

/**
 * The REST front door: a table of method + path -> RPC (src/rest/routes.ts).
 * Requests go through invokeUnary, so authentication, validation and errors are
 * exactly those of the Connect path.
 */
export function createRestShim(deps: RestShimDeps) {
  const compiled: CompiledRoute[] = deps.routes.map((route) => {
    const params: string[] = [];
    const source = route.pattern.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{(\w+)\}/g, (_m, name: string) => {
      params.push(name);
      return "([^/]+)";
    });
    return { route, regex: new RegExp(`^${source}$`), params, entry: typeof route.rpc === "function" ? undefined : entryOf(route.rpc) };
  });

  const exactPaths = new Map<string, CompiledRoute[]>();
  for (const route of compiled) {
    if (route.params.length === 0) exactPaths.set(route.route.pattern, [...(exactPaths.get(route.route.pattern) ?? []), route]);
  }

  function entryOf(method: DescMethod): UnaryEntry {
    const entry = deps.unary.get(`/${method.parent.typeName}/${method.name}`);
    if (!entry) throw new Error(`REST route targets ${method.parent.typeName}/${method.name}, which is not served`);
    return entry;
  }

  async function handle(route: CompiledRoute, pathValues: string[], req: IncomingMessage, res: ServerResponse, url: () => URL) {
    let procedure = route.route.pattern;
    try {
      let fields: JsonObject;
      if (route.route.body === "none") {
        req.resume();
        fields = {};
      } else {
        fields = await readInit(route.route, req);
      }
      const { init, method } = buildRequest(route, pathValues, req, url, fields);
      // Found once at start for routes that name their RPC (which also fails at start when it is not served).
      const entry = route.entry ?? entryOf(method);
      procedure = entry.path.slice(1);
      let message: Message;
      try {
        message = fromJson(entry.method.input, init, { ignoreUnknownFields: false });
      } catch (error) {
        throw new DomainError("invalid_argument", "malformed_request", describeJsonError(error));
      }
      const outcome = await invokeUnary(deps, entry, message, { protocolName: "rest", req, res, url: req.url ?? "/" });
      if (!outcome.ok) return sendError(res, outcome.error, outcome.responseHeader);
      const json = toJson(entry.method.output, outcome.message, jsonWrite) as JsonObject;
      if (outcome.responseHeader) for (const [name, value] of outcome.responseHeader) res.setHeader(name, value);
      if (route.route.render) {
        const answer = route.route.render(json);
        const body = encoded(answer.body);
        // A known length keeps the answer in one write instead of a chunked stream.
        const length = typeof body === "string" ? Buffer.byteLength(body) : body.byteLength;
        res.writeHead(answer.status, { ...answer.headers, "content-length": length });
        res.end(body);
        return;
      }
      const body = JSON.stringify(json);
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
      res.end(body);
    } catch (error) {
      sendError(res, toConnectError(error, procedure, deps.logError));
    }
  }

  /** The request fields a body gives; bodiless routes read nothing (and never wait for a promise). */
  async function readInit(spec: RestRoute, req: IncomingMessage): Promise<JsonObject> {
    let init: JsonObject = {};
    const limit = spec.limit === "config" ? deps.limits.configBody : deps.limits.jsonBody;
    const raw = await readBody(req, limit);
    const type = mediaTypeOf(req.headers["content-type"]);
    if (spec.body === "yaml") {
      if (!yamlTypes.has(type)) {
        throw new DomainError(
          "invalid_argument",
          "unsupported_media_type",
          `Content-Type must be application/yaml (or application/x-yaml, text/yaml), got "${type || "none"}"`,
        );
      }
      init[spec.yamlField ?? "yaml"] = raw.toString("utf8");
    } else if (raw.length > 0) {
      if (type !== "application/json") {
        throw new DomainError(
          "invalid_argument",
          "unsupported_media_type",
          `Content-Type must be application/json, got "${type || "none"}"`,
        );
      }
      init = parseJsonObject(raw);
      for (const [alias, field] of Object.entries(spec.aliases ?? {})) {
        if (alias in init) {
          if (field in init)
            throw new DomainError("invalid_argument", "malformed_request", `send either "${alias}" or "${field}", not both`);
          init[field] = init[alias] as JsonValue;
          delete init[alias];
        }
      }
    }
    return init;
  }

  /** Adds what the path, query and headers say to the body's fields. */
  function buildRequest(route: CompiledRoute, pathValues: string[], req: IncomingMessage, url: () => URL, init: JsonObject) {
    const spec = route.route;
    const method = typeof spec.rpc === "function" ? spec.rpc(init) : spec.rpc;
    const query = spec.query && (req.url ?? "").includes("?") ? url().searchParams : undefined;
    for (const [name, param] of query ? Object.entries(spec.query ?? {}) : []) {
      const values = query?.getAll(name) ?? [];
      if (values.length === 0) continue;
      if (values.length > 1)
        throw new DomainError("invalid_argument", "malformed_request", `query parameter "${name}" is given more than once`);
      const value = values[0] ?? "";
      if (param.kind === "boolean") {
        if (value !== "true" && value !== "false") {
          throw new DomainError("invalid_argument", "malformed_request", `query parameter "${name}" must be true or false, got "${value}"`);
        }
        init[param.field] = value === "true";
      } else if (param.kind === "list") {
        init[param.field] = value
          .split(",")
          .map((v) => v.trim())
          .filter((v) => v.length > 0);
      } else {
        init[param.field] = value;
      }
    }
    if (spec.ifMatchField) {
      const ifMatch = req.headers["if-match"];
      if (ifMatch !== undefined && ifMatch.trim() !== "*") {
        const match = /^\s*(?:W\/)?"(\d{1,9})"\s*$/.exec(ifMatch);
        if (!match) {
          throw new DomainError(
            "invalid_argument",
            "malformed_request",
            `If-Match must be a revision ETag such as "7" (with the quotes), got ${ifMatch}`,
          );
        }
        init[spec.ifMatchField] = Number(match[1]);
      }
    }
    route.params.forEach((param, i) => {
      init[param] = decodeURIComponent(pathValues[i] ?? "");
    });
    Object.assign(init, spec.fixed ?? {});
    return { init, method };
  }

  return {
    /** The route for a request, or undefined when no REST path matches. */
    match(method: string, pathname: string): RestMatch | "method_not_allowed" | undefined {
      // Paths without parameters (the probes) are found without running the patterns.
      const exact = exactPaths.get(pathname);
      if (exact) {
        const route = exact.find((r) => r.route.method === method);
        if (!route) return "method_not_allowed";
        return { pattern: route.route.pattern, handle: (req, res, url) => handle(route, [], req, res, url) };
      }
      let pathMatched = false;
      for (const route of compiled) {
        if (route.params.length === 0) continue;
        const found = route.regex.exec(pathname);
        if (!found) continue;
        pathMatched = true;
        if (route.route.method !== method) continue;
        const values = found.slice(1);
        return { pattern: route.route.pattern, handle: (req, res, url) => handle(route, values, req, res, url) };
      }
      return pathMatched ? "method_not_allowed" : undefined;
    },
  };
}

/**
 * Large rendered bodies (an exported configuration) are mostly the same string
 * served again from the export cache: keep their UTF-8 bytes instead of
 * measuring and encoding the text on every answer. Keyed by the text itself;
 * a string the cache already holds is found by reference and its cached hash.
 */
const encodedBodies = new Map<string, Buffer>();
/** Bodies from 4 KiB to 1 MiB are kept, 8 MiB in all, oldest first out. */
const encodeOnce = { minChars: 4 * 1024, maxChars: 1024 * 1024, totalBytes: 8 * 1024 * 1024 };
let encodedBytes = 0;

function encoded(text: string): Buffer | string {
  if (text.length < encodeOnce.minChars || text.length > encodeOnce.maxChars) return text;
  let bytes = encodedBodies.get(text);
  if (!bytes) {
    bytes = Buffer.from(text, "utf8");
    for (const [oldest, old] of encodedBodies) {
      if (encodedBytes + bytes.byteLength <= encodeOnce.totalBytes) break;
      encodedBodies.delete(oldest);
      encodedBytes -= old.byteLength;
    }
    encodedBodies.set(text, bytes);
    encodedBytes += bytes.byteLength;
  }
  return bytes;
}

/** Writes a Connect error body with its REST status. */
export function sendError(res: ServerResponse, error: ConnectError, extraHeaders?: Headers): void {
  writeConnectError(res, error, restStatusOf(error), extraHeaders);
}

function parseJsonObject(raw: Buffer): JsonObject {
  let value: unknown;
  try {
    value = JSON.parse(raw.toString("utf8"));
  } catch (error) {
    throw new DomainError("invalid_argument", "malformed_request", `request body is not valid JSON: ${(error as Error).message}`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new DomainError("invalid_argument", "malformed_request", "request body must be a JSON object");
  }
  return value as JsonObject;
}

function describeJsonError(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  // protobuf-es: 'cannot decode message svc.v1.X from JSON: key "foo" is unknown'
  return text
    .replace(/cannot decode (message|field) svc\.v1\.\w+(\.\w+)? from JSON: /, "")
    .replace(/^key "(.+)" is unknown$/, 'unknown field "$1"');
}
