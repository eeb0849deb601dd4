import { Code, ConnectError } from "@connectrpc/connect";
import { createHash } from "node:crypto";
import { packageVersion } from "../../cli/program.js";
import type { Config } from "../../config.js";
import type { ExtraRoute } from "../../server/http-server.js";
import { writeConnectError } from "../../server/write-error.js";
import type { RestRoute } from "../routes.js";
import { createPlatformOpenApi, openApiPath } from "./platform-openapi.js";

export interface OpenApiRouteDeps {
  config: Pick<Config, "publicUrl" | "limits">;
  routes: readonly RestRoute[];
}

/**
 * GET /openapi.json on the platform port: the OpenAPI document of the REST
 * paths, built once at start (it depends only on the routes table, the
 * descriptors, PUBLIC_URL and the limits) and served as the same bytes with a
 * strong ETag of them, so a client revalidates with If-None-Match and gets 304.
 */
export function createOpenApiRoute(deps: OpenApiRouteDeps): ExtraRoute {
  const document = createPlatformOpenApi({
    routes: deps.routes,
    publicUrl: deps.config.publicUrl,
    limits: deps.config.limits,
    version: packageVersion(),
  });
  const body = Buffer.from(JSON.stringify(document));
  const etag = `"${createHash("sha256").update(body).digest("base64url")}"`;
  const headers = {
    etag,
    // The document changes only when the server is upgraded or restarted with other settings.
    "cache-control": "public, max-age=300",
    // It holds nothing secret, so API tools on any origin (a Swagger UI, an editor) may fetch it.
    "access-control-allow-origin": "*",
  };
  return {
    label: openApiPath,
    matches: (_method, path) => path === openApiPath,
    handle(req, res) {
      req.resume();
      if (req.method !== "GET" && req.method !== "HEAD") {
        const error = new ConnectError(`${req.method} is not allowed here; this path allows GET, HEAD`, Code.Unimplemented);
        writeConnectError(res, error, 405, new Headers({ allow: "GET, HEAD" }));
        return;
      }
      if (matchesAny(req.headers["if-none-match"], etag)) {
        res.writeHead(304, headers);
        res.end();
        return;
      }
      res.writeHead(200, { ...headers, "content-type": "application/json", "content-length": body.byteLength });
      res.end(req.method === "HEAD" ? undefined : body);
    },
  };
}

/** If-None-Match uses weak comparison (RFC 9110 §13.1.2): `W/"x"` matches `"x"`; `*` matches any current representation. */
function matchesAny(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  if (header.trim() === "*") return true;
  return header.split(",").some((tag) => tag.trim().replace(/^W\//, "") === etag);
}
