import { Code, ConnectError } from "@connectrpc/connect";
import type { IncomingMessage, ServerResponse } from "node:http";
import { randomBytes } from "node:crypto";
import type { createRestShim } from "../rest/shim.js";
import type { createConnectUnary } from "./connect-unary.js";
import type { Logger } from "./logger.js";
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
  logger: Logger;
  metrics: Metrics;
  rest: ReturnType<typeof createRestShim>;
  connectUnary: ReturnType<typeof createConnectUnary>;
  /** The stock Connect / gRPC-Web handler (connectNodeAdapter). */
  stock: NodeHandler;
  extra: ExtraRoute[];
}

const requestIdPrefix = randomBytes(4).toString("hex");
let requestCounter = 0;
const safeRequestId = /^[A-Za-z0-9._:-]{1,64}$/;

/**
 * The platform's HTTP/1.1 front: extra routes, the REST shim, the lean unary
 * Connect path, and the stock Connect / gRPC-Web handler for everything else.
 */
export function createPlatformHandler(deps: PlatformHandlerDeps): NodeHandler {
  return (req, res) => {
    const started = process.hrtime.bigint();
    const incomingId = req.headers["x-request-id"];
    const requestId =
      typeof incomingId === "string" && safeRequestId.test(incomingId) ? incomingId : `${requestIdPrefix}-${(++requestCounter).toString(36)}`;
    res.setHeader("x-request-id", requestId);
    let route = "unmatched";
    let protocol = "http";
    res.once("finish", () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      deps.metrics.observe(route, protocol, res.statusCode, seconds);
      deps.logger.info(
        { reqId: requestId, method: req.method, route, protocol, status: res.statusCode, ms: Math.round(seconds * 1e4) / 10 },
        "request",
      );
    });

    const url = new URL(req.url ?? "/", "http://gatehouse.invalid");
    const method = req.method ?? "GET";
    const fail = (error: unknown) => {
      deps.logger.error({ reqId: requestId, route, err: error }, "unhandled request failure");
      writeConnectError(res, new ConnectError("internal error", Code.Internal), 500);
    };

    for (const extra of deps.extra) {
      if (extra.matches(method, url.pathname)) {
        route = extra.label;
        Promise.resolve(extra.handle(req, res, url)).catch(fail);
        return;
      }
    }

    const rest = deps.rest.match(method, url.pathname);
    if (rest === "method_not_allowed") {
      route = url.pathname.startsWith("/organization/") ? "rest:method_not_allowed" : url.pathname;
      req.resume();
      writeConnectError(res, new ConnectError(`${method} is not allowed on ${url.pathname}`, Code.Unimplemented), 405);
      return;
    }
    if (rest) {
      route = rest.pattern;
      protocol = "rest";
      rest.handle(req, res, url).catch(fail);
      return;
    }

    const lean = deps.connectUnary.accept(req, url.pathname);
    if (lean) {
      route = lean.path;
      protocol = "connect";
      deps.connectUnary.serve(lean, req, res).catch(fail);
      return;
    }

    protocol = "rpc";
    route = /^\/[\w.]+\/\w+$/.test(url.pathname) ? url.pathname : "unmatched";
    deps.stock(req, res);
  };
}
