import type { DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ServerResponse, type IncomingMessage, type OutgoingHttpHeader, type OutgoingHttpHeaders } from "node:http";
import type { RestShim } from "../rest/shim.js";
import { createBrowserCors } from "./browser-cors.js";
import type { createConnectDoor } from "./connect-door.js";
import type { createGrpcWebDoor } from "./grpc-web-door.js";
import { isGrpcWeb, writeGrpcWebUnimplemented } from "./grpc-web-door.js";
import { oneHeader } from "./http-source.js";
import type { Logger } from "./logger.js";
import type { Observability } from "./observability.js";
import type { Procedure } from "./procedures.js";
import { nextRequestId } from "./request-id.js";
import { writeConnectError } from "./write-error.js";

type NodeHandler = (req: IncomingMessage, res: ServerResponse) => void;

/** A page or document served beside the APIs (JWKS, SDK, dashboard, metrics): not an RPC call. */
export interface ExtraRoute {
  /** Label for metrics and logs. */
  label: string;
  matches(method: string, pathname: string): boolean;
  handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> | void;
  /**
   * Set on a public document that pages on any origin may read (CORS): its
   * path and methods. The route sends Access-Control-Allow-Origin itself, on
   * every answer, since shared caches keep it; the server answers its preflights.
   */
  crossOrigin?: { path: string; methods: readonly string[] };
}

export interface PlatformHandlerDeps {
  /** For failures no handler caught. */
  logger: Logger;
  observability: Observability;
  rest: RestShim;
  connect: ReturnType<typeof createConnectDoor>;
  grpcWeb: ReturnType<typeof createGrpcWebDoor>;
  procedures: ReadonlyMap<string, Procedure>;
  extra: ExtraRoute[];
  /** Whether a web page on another origin may call the RPC (CORS): its auth rule accepts the publishable key. */
  callableFromBrowser(method: DescMethod): boolean;
  /** The client's address: the TCP peer, or what a trusted proxy says it is. */
  clientAddress(req: IncomingMessage): string | undefined;
}

/**
 * Request header through which handlers learn the client's address (per-IP
 * limits): the socket's, or behind a trusted proxy the one it forwarded
 * (client-address.ts). The server sets it on every request and drops any
 * value a client sent, so it cannot be forged.
 */
export const peerAddressHeader = "x-gatehouse-peer";

/** Replaces any client-sent peer header with the client's address (the socket's, or a trusted proxy's X-Forwarded-For). */
export function stampPeerAddress(req: { headers: Record<string, string | string[] | undefined> }, address: string | undefined): void {
  // Only when sent: deleting a property that is not there still costs the object its fast layout.
  if (req.headers[peerAddressHeader] !== undefined) delete req.headers[peerAddressHeader];
  if (address) req.headers[peerAddressHeader] = address;
}

type HeaderList = OutgoingHttpHeaders | OutgoingHttpHeader[];

/**
 * The response class of the platform's HTTP/1.1 server: it sends the request
 * id with whatever headers the handler writes. Setting the id with setHeader
 * when the request arrives would send every `writeHead(status, headers)` of
 * every handler down Node's slower path, which merges the given headers into
 * the ones set before, one setHeader at a time.
 */
export class PlatformResponse<Request extends IncomingMessage = IncomingMessage> extends ServerResponse<Request> {
  /** Sent as x-request-id with the headers, then forgotten. */
  requestId: string | undefined;

  override writeHead(statusCode: number, statusMessage?: string, headers?: HeaderList): this;
  override writeHead(statusCode: number, headers?: HeaderList): this;
  override writeHead(statusCode: number, second?: string | HeaderList, third?: HeaderList): this {
    const id = this.requestId;
    const statusMessage = typeof second === "string" ? second : undefined;
    let headers = typeof second === "string" ? third : second;
    if (id !== undefined) {
      this.requestId = undefined;
      if (headers === undefined) this.setHeader("x-request-id", id);
      else if (!Array.isArray(headers)) headers = { "x-request-id": id, ...headers };
      else if (headers.length > 0 && Array.isArray(headers[0])) headers = [...headers, ["x-request-id", id]] as OutgoingHttpHeader[];
      else headers = [...headers, "x-request-id", id];
    }
    return statusMessage === undefined ? super.writeHead(statusCode, headers) : super.writeHead(statusCode, statusMessage, headers);
  }
}

/**
 * The platform port's front: it only dispatches. RPC paths go to the Connect
 * or gRPC-Web door by Content-Type, documented REST paths to the REST door,
 * pages and documents to their routes; everything else is answered here with
 * the platform's error body (404 with `not_found`, 405 with `Allow`).
 */
export function createPlatformHandler(deps: PlatformHandlerDeps): NodeHandler {
  const { observability } = deps;
  const browserCors = createBrowserCors({
    procedures: deps.procedures,
    callableFromBrowser: deps.callableFromBrowser,
    restRoutesAt: deps.rest.routesAt,
    documents: new Map(deps.extra.flatMap((route) => (route.crossOrigin ? [[route.crossOrigin.path, route.crossOrigin.methods]] : []))),
  });
  return (req, res) => {
    const started = performance.now();
    const requestId = nextRequestId(oneHeader(req.headers, "x-request-id"));
    if (res instanceof PlatformResponse) res.requestId = requestId;
    else res.setHeader("x-request-id", requestId);
    const clientAddress = deps.clientAddress(req);
    stampPeerAddress(req, clientAddress);
    const method = req.method ?? "GET";
    const target = req.url ?? "/";
    const query = target.indexOf("?");
    const pathname = query === -1 ? target : target.slice(0, query);
    /** Counts and logs an answer that is not an RPC call, once it is sent. */
    const answered = (label: string) => {
      res.once("finish", () => observability.http(requestId, method, label, res.statusCode, started));
    };
    const fail = (label: string) => (error: unknown) => {
      deps.logger.error({ reqId: requestId, route: label, err: error }, "unhandled request failure");
      writeConnectError(res, new ConnectError("internal error", Code.Internal), 500);
    };

    // CORS where a page on another origin may call with the publishable key (browser-cors.ts); only a browser sends Origin.
    if (req.headers.origin !== undefined) {
      const methods = browserCors.methodsAt(pathname);
      if (methods !== undefined) {
        // A preflight (Fetch standard, "CORS-preflight request"): OPTIONS with Access-Control-Request-Method.
        if (method === "OPTIONS" && req.headers["access-control-request-method"] !== undefined) {
          answered("cors_preflight");
          req.resume();
          res.writeHead(204, browserCors.preflightHeaders(methods));
          res.end();
          return;
        }
        // Set before any handler writes, so errors written anywhere below carry them too.
        const { answerHeaders } = browserCors;
        res.setHeader("access-control-allow-origin", answerHeaders["access-control-allow-origin"]);
        res.setHeader("access-control-expose-headers", answerHeaders["access-control-expose-headers"]);
      }
    }

    const procedure = deps.procedures.get(pathname);
    if (procedure) {
      if (method !== "POST") {
        answered("method_not_allowed");
        req.resume();
        const error = new ConnectError(`${pathname.slice(1)} is an RPC: call it with POST (Connect, gRPC-Web)`, Code.Unimplemented);
        writeConnectError(res, error, 405, new Headers({ allow: "POST" }));
        return;
      }
      const door = isGrpcWeb(req.headers["content-type"]) ? deps.grpcWeb : deps.connect;
      door.serve(procedure, req, res, requestId, clientAddress).catch(fail(procedure.path));
      return;
    }

    const rest = deps.rest.match(method, pathname);
    if (rest?.kind === "route") {
      deps.rest.serve(rest, req, res, requestId, clientAddress).catch(fail(rest.route.route.pattern));
      return;
    }
    if (rest?.kind === "method_not_allowed") {
      answered("method_not_allowed");
      req.resume();
      const allow = [...new Set(rest.allow)].join(", ");
      writeConnectError(
        res,
        new ConnectError(`${method} is not allowed here; this path allows ${allow}`, Code.Unimplemented),
        405,
        new Headers({ allow }),
      );
      return;
    }

    for (const extra of deps.extra) {
      if (extra.matches(method, pathname)) {
        answered(extra.label);
        Promise.resolve(extra.handle(req, res, new URL(target, "http://gatehouse.invalid"))).catch(fail(extra.label));
        return;
      }
    }

    req.resume();
    if (isGrpcWeb(req.headers["content-type"])) {
      writeGrpcWebUnimplemented(res);
      observability.unknownRpc(requestId, "grpc_web", started);
      return;
    }
    answered("not_found");
    writeConnectError(
      res,
      new ConnectError("no such path: see the README for the REST paths and RPCs this server answers", Code.NotFound),
      404,
    );
  };
}
