import { toJson, type DescMethod, type JsonObject, type JsonValue, type Message } from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import { DomainError } from "../domain/errors.js";
import { Call } from "../server/call.js";
import { mediaTypeOf, readBody } from "../server/http-body.js";
import { copyHeaders, HttpSource, oneHeader } from "../server/http-source.js";
import { parseJsonBody } from "../server/json-body.js";
import { decodeJson } from "../server/message-codec.js";
import type { Pipeline } from "../server/pipeline.js";
import type { Procedure } from "../server/procedures.js";
import { errorStatusOf, writeConnectError } from "../server/write-error.js";
import type { RestRoute } from "./routes.js";

export interface RestShimDeps {
  pipeline: Pipeline;
  procedures: ReadonlyMap<string, Procedure>;
  routes: readonly RestRoute[];
  limits: { jsonBody: number; configBody: number };
}

interface CompiledRoute {
  route: RestRoute;
  regex: RegExp;
  params: string[];
  /** The RPC the route serves; for a route that picks its RPC from the body, the first it may pick. */
  procedure: Procedure;
}

/** The outcome of matching a request against the table. */
export type RestMatch =
  | { kind: "route"; route: CompiledRoute; values: string[] }
  | { kind: "method_not_allowed"; allow: string[] }
  | undefined;

const yamlTypes = new Set(["application/yaml", "application/x-yaml", "text/yaml"]);
const jsonWrite = { useProtoFieldName: true, alwaysEmitImplicit: true } as const;
const safeName = /^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/;

/** What the REST reader needs: the route, the request, and a body read before the call when the body picks the RPC. */
interface RestSource {
  compiled: CompiledRoute;
  values: string[];
  req: IncomingMessage;
  body: JsonObject | undefined;
}

/**
 * The REST door: a table of method + path -> RPC (src/rest/routes.ts). It only
 * translates: path, query, headers and body become the RPC's request message
 * (inside the pipeline, so a malformed request is counted, logged and
 * answered like any other failure), and the RPC's answer or error becomes the
 * HTTP answer.
 */
export function createRestShim(deps: RestShimDeps) {
  const procedureOf = (method: DescMethod): Procedure => {
    const procedure = deps.procedures.get(`/${method.parent.typeName}/${method.name}`);
    if (!procedure) throw new Error(`REST route targets ${method.parent.typeName}/${method.name}, which is not served`);
    return procedure;
  };
  const compiled: CompiledRoute[] = deps.routes.map((route) => {
    const params: string[] = [];
    const source = route.pattern.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{(\w+)\}/g, (_m, name: string) => {
      params.push(name);
      return "([^/]+)";
    });
    const first = typeof route.rpc === "function" ? route.candidates?.[0] : route.rpc;
    if (!first) throw new Error(`REST route ${route.pattern} picks its RPC from the body but lists no candidates`);
    return { route, regex: new RegExp(`^${source}$`), params, procedure: procedureOf(first) };
  });
  const exactPaths = new Map<string, CompiledRoute[]>();
  for (const route of compiled) {
    if (route.params.length === 0) exactPaths.set(route.route.pattern, [...(exactPaths.get(route.route.pattern) ?? []), route]);
  }

  const read = async (call: Call, source: RestSource): Promise<Message> => {
    const { compiled: route, req } = source;
    const fields = source.body ?? (await readFields(route.route, req));
    return decodeJson(call.procedure.method.input, buildRequest(route, source.values, req, fields));
  };

  async function readFields(spec: RestRoute, req: IncomingMessage): Promise<JsonObject> {
    if (spec.body === "none") {
      req.resume();
      return {};
    }
    const type = mediaTypeOf(req.headers["content-type"]);
    const limit = spec.limit === "config" ? deps.limits.configBody : deps.limits.jsonBody;
    if (spec.body === "yaml") {
      if (!yamlTypes.has(type)) {
        req.resume();
        throw new DomainError(
          "invalid_argument",
          "unsupported_media_type",
          `Content-Type must be application/yaml (or application/x-yaml, text/yaml)${type ? "" : "; none was sent"}`,
        );
      }
      return { [spec.yamlField ?? "yaml"]: (await readBody(req, limit)).toString("utf8") };
    }
    if (
      type !== "application/json" &&
      !(type === "" && Number(req.headers["content-length"] ?? 0) === 0 && !req.headers["transfer-encoding"])
    ) {
      req.resume();
      throw new DomainError(
        "invalid_argument",
        "unsupported_media_type",
        `Content-Type must be application/json${type ? "" : "; none was sent"}`,
      );
    }
    const raw = await readBody(req, limit);
    if (raw.length === 0) return {};
    const value = parseJsonBody(raw);
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      throw new DomainError("invalid_argument", "malformed_request", "the request body must be a JSON object");
    }
    const init = value as JsonObject;
    for (const [alias, field] of Object.entries(spec.aliases ?? {})) {
      if (alias in init) {
        if (field in init) throw new DomainError("invalid_argument", "malformed_request", `send either "${alias}" or "${field}", not both`);
        init[field] = init[alias] as JsonValue;
        delete init[alias];
      }
    }
    return init;
  }

  /** Adds what the path, query and headers say to the body's fields. */
  function buildRequest(route: CompiledRoute, values: string[], req: IncomingMessage, init: JsonObject): JsonObject {
    const spec = route.route;
    const target = req.url ?? "/";
    const mark = target.indexOf("?");
    if (mark !== -1) {
      const seen = new Set<string>();
      for (const pair of target.slice(mark + 1).split("&")) {
        if (pair === "") continue;
        const equals = pair.indexOf("=");
        const name = decodeComponent(equals === -1 ? pair : pair.slice(0, equals), "query parameter name");
        const value = decodeComponent(equals === -1 ? "" : pair.slice(equals + 1), "query parameter value");
        const param = spec.query?.[name];
        if (!param) {
          const known = Object.keys(spec.query ?? {});
          throw new DomainError(
            "invalid_argument",
            "unknown_query_parameter",
            `${safeName.test(name) ? `query parameter "${name}"` : "a query parameter"} is not defined on ${spec.method} ${spec.pattern}; ${known.length > 0 ? `it takes: ${known.join(", ")}` : "it takes none"} (nothing was changed)`,
          );
        }
        if (seen.has(name))
          throw new DomainError("invalid_argument", "malformed_request", `query parameter "${name}" is given more than once`);
        seen.add(name);
        if (param.kind === "boolean") {
          if (value !== "true" && value !== "false") {
            throw new DomainError("invalid_argument", "malformed_request", `query parameter "${name}" must be true or false`);
          }
          init[param.field] = value === "true";
        } else if (param.kind === "integer") {
          if (!/^\d{1,9}$/.test(value)) {
            throw new DomainError("invalid_argument", "malformed_request", `query parameter "${name}" must be a whole number`);
          }
          init[param.field] = Number(value);
        } else if (param.kind === "list") {
          init[param.field] = value
            .split(",")
            .map((v) => v.trim())
            .filter((v) => v.length > 0);
        } else init[param.field] = value;
      }
    }
    if (spec.ifMatchField) {
      const ifMatch = oneHeader(req.headers, "if-match");
      if (ifMatch !== undefined) init[spec.ifMatchField] = ifMatch;
    }
    route.params.forEach((param, i) => {
      init[param] = decodeComponent(values[i] ?? "", "path segment");
    });
    Object.assign(init, spec.fixed ?? {});
    return init;
  }

  async function serve(
    match: { route: CompiledRoute; values: string[] },
    req: IncomingMessage,
    res: ServerResponse,
    requestId: string,
    clientAddress: string | undefined,
  ) {
    const { route, values } = match;
    const source = new HttpSource(req, res, clientAddress);
    let procedure = route.procedure;
    let body: JsonObject | undefined;
    if (typeof route.route.rpc === "function") {
      // The body names the RPC: read it first; a failure is counted against the route's first RPC.
      try {
        body = await readFields(route.route, req);
        procedure = procedureOf(route.route.rpc(body));
      } catch (error) {
        const call = new Call(procedure, "rest", requestId, source);
        call.route = route.route.pattern;
        return writeError(res, deps.pipeline.refuse(call, error), call);
      }
    }
    const call = new Call(procedure, "rest", requestId, source);
    call.route = route.route.pattern;
    const outcome = await deps.pipeline.unary(call, read, { compiled: route, values, req, body });
    if (!outcome.ok) return writeError(res, outcome.error, call);
    const json = toJson(procedure.method.output, outcome.message, jsonWrite) as JsonObject;
    const headers: OutgoingHttpHeaders = {};
    copyHeaders(headers, call.touchedHeader);
    if (route.route.render) {
      const answer = route.route.render(json);
      const payload = encoded(answer.body);
      Object.assign(headers, answer.headers);
      // A known length keeps the answer in one write instead of a chunked stream.
      headers["content-length"] = typeof payload === "string" ? Buffer.byteLength(payload) : payload.byteLength;
      res.writeHead(answer.status, headers);
      res.end(payload);
      return;
    }
    const payload = JSON.stringify(json);
    headers["content-type"] = "application/json";
    headers["content-length"] = Buffer.byteLength(payload);
    res.writeHead(200, headers);
    res.end(payload);
  }

  return {
    /** The route of a request, the methods its path allows, or undefined when no REST path matches. */
    match(method: string, pathname: string): RestMatch {
      // Paths without parameters (the probes) are found without running the patterns.
      const exact = exactPaths.get(pathname);
      if (exact) {
        const route = exact.find((r) => r.route.method === method);
        return route ? { kind: "route", route, values: [] } : { kind: "method_not_allowed", allow: exact.map((r) => r.route.method) };
      }
      const allow: string[] = [];
      for (const route of compiled) {
        if (route.params.length === 0) continue;
        const found = route.regex.exec(pathname);
        if (!found) continue;
        if (route.route.method !== method) {
          allow.push(route.route.method);
          continue;
        }
        return { kind: "route", route, values: found.slice(1) };
      }
      return allow.length > 0 ? { kind: "method_not_allowed", allow } : undefined;
    },
    serve,
    /** The routes at a path, whatever their method: each one's method and the RPCs it may call (for CORS, browser-cors.ts). */
    routesAt(pathname: string): { method: string; rpcs: readonly DescMethod[] }[] {
      const found = exactPaths.get(pathname) ?? compiled.filter((route) => route.params.length > 0 && route.regex.test(pathname));
      return found.map(({ route }) => ({
        method: route.method,
        rpcs: typeof route.rpc === "function" ? (route.candidates ?? []) : [route.rpc],
      }));
    },
  };
}

export type RestShim = ReturnType<typeof createRestShim>;

function writeError(res: ServerResponse, error: ConnectError, call: Call): void {
  writeConnectError(res, error, errorStatusOf(error, true), call.touchedHeader);
}

/** Percent-decodes a path segment or query component; broken encoding is a 400, never a 500. */
function decodeComponent(raw: string, what: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, what.startsWith("query") ? " " : "+"));
  } catch {
    throw new DomainError(
      "invalid_argument",
      "malformed_request",
      `a ${what} has broken percent-encoding (RFC 3986 §2.1: "%" must be followed by two hex digits of UTF-8)`,
    );
  }
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
