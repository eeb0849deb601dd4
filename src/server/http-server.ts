import { Code, ConnectError } from "@connectrpc/connect";
import { ServerResponse, type IncomingMessage, type OutgoingHttpHeader, type OutgoingHttpHeaders } from "node:http";
import { randomBytes } from "node:crypto";
import type { createRestShim } from "../rest/shim.js";
import { clientAddressOf, type TrustedProxies } from "./client-address.js";
import type { createConnectUnary } from "./connect-unary.js";
import type { Logger, RequestLog } from "./logger.js";
import type { Metrics } from "./metrics.js";
import { writeConnectError } from "./write-error.js";

type NodeHandler = (req: IncomingMessage, res: ServerResponse) => void;

/** A page or document served beside the APIs (JWKS, SDK, dashboard, metrics). */
export interface ExtraRoute {
  /** Label for metrics and logs. */
  label: string;
  matches(method: string, pathname: string): boolean;
  handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> | void;
}

export interface PlatformHandlerDeps {
  /** For failures no handler caught. */
  logger: Logger;
  logRequest: RequestLog;
  metrics: Metrics;
  rest: ReturnType<typeof createRestShim>;
  connectUnary: ReturnType<typeof createConnectUnary>;
  /** The stock Connect / gRPC-Web handler (connectNodeAdapter). */
  stock: NodeHandler;
  extra: ExtraRoute[];
  /** Paths of every served RPC (`/svc.v1.ConfigService/WatchConfig`). */
  rpcPaths: ReadonlySet<string>;
  /** TRUSTED_PROXIES: peers whose X-Forwarded-For names the client (default none). */
  trustedProxies?: TrustedProxies;
}

const requestIdPrefix = randomBytes(4).toString("hex");
let requestCounter = 0;
const safeRequestId = /^[A-Za-z0-9._:-]{1,64}$/;

/**
 * Request header through which handlers learn the client's address (per-IP
 * limits): the socket's, or behind a trusted proxy the one it forwarded
 * (client-address.ts). The server sets it on every request and drops any
 * value a client sent, so it cannot be forged.
 */
export const peerAddressHeader = "x-gatehouse-peer";

/** Replaces any client-sent peer header with the client's address (the socket's, or a trusted proxy's X-Forwarded-For). */
export function stampPeerAddress(
  req: {
    headers: Record<string, string | string[] | undefined>;
    socket?: { remoteAddress?: string | undefined } | null;
  },
  trustedProxies: TrustedProxies = [],
): void {
  // Only when sent: deleting a property that is not there still costs the object its fast layout.
  if (req.headers[peerAddressHeader] !== undefined) delete req.headers[peerAddressHeader];
  const address = clientAddressOf(req.socket?.remoteAddress, req.headers["x-forwarded-for"], trustedProxies);
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
 * The platform's HTTP/1.1 front: extra routes, the REST shim, the lean unary
 * Connect path, and the stock Connect / gRPC-Web handler for everything else.
 */
export function createPlatformHandler(deps: PlatformHandlerDeps): NodeHandler {
  return (req, res) => {
    const started = performance.now();
    stampPeerAddress(req, deps.trustedProxies);
    const incomingId = req.headers["x-request-id"];
    const requestId =
      typeof incomingId === "string" && safeRequestId.test(incomingId)
        ? incomingId
        : `${requestIdPrefix}-${(++requestCounter).toString(36)}`;
    if (res instanceof PlatformResponse) res.requestId = requestId;
    else res.setHeader("x-request-id", requestId);
    let route = "unmatched";
    let protocol = "http";
    // "finish" comes once per response; `on` spares the wrapper `once` binds on every request.
    res.on("finish", () => {
      const seconds = (performance.now() - started) / 1e3;
      deps.metrics.observe(route, protocol, res.statusCode, seconds);
      deps.logRequest(requestId, method, route, protocol, res.statusCode, Math.round(seconds * 1e4) / 10);
    });

    const method = req.method ?? "GET";
    const target = req.url ?? "/";
    const query = target.indexOf("?");
    const pathname = query === -1 ? target : target.slice(0, query);
    let parsed: URL | undefined;
    const url = () => (parsed ??= new URL(target, "http://gatehouse.invalid"));
    const fail = (error: unknown) => {
      deps.logger.error({ reqId: requestId, route, err: error }, "unhandled request failure");
      writeConnectError(res, new ConnectError("internal error", Code.Internal), 500);
    };

    for (const extra of deps.extra) {
      if (extra.matches(method, pathname)) {
        route = extra.label;
        Promise.resolve(extra.handle(req, res, url())).catch(fail);
        return;
      }
    }

    const rest = deps.rest.match(method, pathname);
    if (rest === "method_not_allowed") {
      route = "method_not_allowed";
      req.resume();
      writeConnectError(res, new ConnectError(`${method} is not allowed on ${pathname}`, Code.Unimplemented), 405);
      return;
    }
    if (rest) {
      route = rest.pattern;
      protocol = "rest";
      rest.handle(req, res, url).catch(fail);
      return;
    }

    const lean = deps.connectUnary.accept(req, pathname);
    if (lean) {
      route = lean.path;
      protocol = "connect";
      deps.connectUnary.serve(lean, req, res).catch(fail);
      return;
    }

    protocol = "rpc";
    // Only served RPC paths become metric labels: arbitrary paths would grow the label set without bound.
    route = deps.rpcPaths.has(pathname) ? pathname : "unmatched";
    deps.stock(req, res);
  };
}
