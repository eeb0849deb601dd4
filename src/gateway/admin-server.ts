import { Code } from "@connectrpc/connect";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { gatewayAnswer, rawAnswer } from "./gateway-answer.js";
import { adminEdgeLimits, createEdgeServer } from "./proxy/edge-server.js";

export interface AdminServerDeps {
  /** Whether a configuration is loaded. */
  ready(): boolean;
  /** The Prometheus exposition text. */
  metrics(): Promise<string>;
  metricsContentType: string;
}

const serving = Buffer.from('{"status":"SERVING"}');
const notServing = Buffer.from('{"status":"NOT_SERVING"}');
const methodNotAllowed = gatewayAnswer(Code.Unimplemented, "method_not_allowed", "the gateway's admin paths answer GET only", {
  status: 405,
});
const unknownPath = gatewayAnswer(Code.NotFound, "not_found", "the gateway's admin port serves GET /healthz, /readyz and /metrics");

/**
 * The gateway's admin port (docs/gateway.md, "The data plane: how the gateway enforces it"): `/healthz` (the process
 * is alive), `/readyz` (200 once a configuration is loaded, else 503) and
 * `/metrics` (Prometheus text). Kept off the proxy port so no route can
 * shadow it and no client of the routes can reach it by accident. It has
 * limits of its own (adminEdgeLimits), so no client can hold enough of its
 * connections to starve the probes; bind it to a private interface with
 * GATEWAY_ADMIN_HOST (docs/gateway.md, "Limits").
 */
export function createAdminServer(deps: AdminServerDeps): Server {
  return createEdgeServer({
    limits: adminEdgeLimits,
    refused: () => {},
    upgrade: (_req: IncomingMessage, socket: Duplex) => socket.end(rawAnswer(unknownPath, [])),
    request: (req: IncomingMessage, res: ServerResponse) => {
      const path = (req.url ?? "/").split("?", 1)[0];
      const json = (status: number, body: Buffer) => {
        res.writeHead(status, { "content-type": "application/json", "content-length": body.length, "cache-control": "no-store" });
        res.end(body);
      };
      if (req.method !== "GET" && req.method !== "HEAD") {
        req.resume();
        res.writeHead(methodNotAllowed.status, {
          "content-type": "application/json",
          "content-length": methodNotAllowed.body.length,
          allow: "GET, HEAD",
        });
        res.end(methodNotAllowed.body);
        return;
      }
      switch (path) {
        case "/healthz":
          return json(200, serving);
        case "/readyz":
          return deps.ready() ? json(200, serving) : json(503, notServing);
        case "/metrics":
          deps.metrics().then(
            (text) => {
              res.writeHead(200, { "content-type": deps.metricsContentType, "cache-control": "no-store" });
              res.end(text);
            },
            () => {
              res.writeHead(500, { "content-type": "text/plain" });
              res.end("metrics unavailable\n");
            },
          );
          return;
        default:
          return json(unknownPath.status, unknownPath.body);
      }
    },
  }).server;
}
