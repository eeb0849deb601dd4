import type { IncomingMessage, ServerResponse } from "node:http";
import type { RestRoute } from "../rest/routes.js";

type NodeHandler = (req: IncomingMessage, res: ServerResponse) => void;

/** The client-side identity paths (publishable key) of the REST table: what the browser SDK calls. */
export function clientIdentityPaths(routes: readonly RestRoute[]): ReadonlySet<string> {
  return new Set(routes.filter((route) => /^\/(v1\/)?identity\//.test(route.pattern)).map((route) => route.pattern));
}

/**
 * CORS for the client-side identity paths, so the SDK works from an app's own
 * origin (`https://app.example.com`) against the platform's
 * (`https://auth.example.com`). Any origin may call them: they authenticate by
 * a bearer key that pages carry in the open, never by cookies (the SDK sends
 * `credentials: "omit"`), so CORS has no ambient credential to protect. Which
 * origins may use passkeys is decided by WebAuthn itself, against the
 * organisation's `origins` setting. Preflights are answered here; other
 * requests get the header and go on to the platform.
 */
export function withClientCors(handler: NodeHandler, paths: ReadonlySet<string>): NodeHandler {
  return (req, res) => {
    // Most requests are not from browsers: no Origin, nothing to work out.
    if (req.headers.origin === undefined) {
      handler(req, res);
      return;
    }
    const target = req.url ?? "/";
    const query = target.indexOf("?");
    const path = query === -1 ? target : target.slice(0, query);
    if (!paths.has(path)) {
      handler(req, res);
      return;
    }
    res.setHeader("access-control-allow-origin", "*");
    if (req.method === "OPTIONS") {
      req.resume();
      res.writeHead(204, {
        "access-control-allow-methods": "POST",
        "access-control-allow-headers": "authorization, content-type",
        "access-control-max-age": "600",
        "content-length": "0",
      });
      res.end();
      return;
    }
    res.setHeader("access-control-expose-headers", "retry-after, x-request-id");
    handler(req, res);
  };
}
