import { createHash } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ServerResponse } from "node:http";
import type { ExtraRoute } from "../../server/http-server.js";

/** Where scripts/build.mjs writes the dashboard UI, relative to the package root. */
export const dashboardBuildDir = join("dist", "dashboard");

/** The package root: the nearest folder above this module with a package.json (src/ in tests, dist/src/ when built). */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, "package.json"))) return dir;
    const parent = dirname(dir);
    if (parent === dir) return process.cwd();
    dir = parent;
  }
}

const contentTypes: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".html": "text/html; charset=utf-8",
  ".svg": "image/svg+xml",
  ".map": "application/json",
};

/**
 * Every dashboard page runs only this origin's scripts and styles, talks only
 * to this origin, and cannot be framed (clickjacking).
 */
const securityHeaders = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin",
};

interface Asset {
  body: Buffer;
  etag: string;
  mtimeMs: number;
}

/**
 * Serves the dashboard UI built into dist/dashboard/: `/dashboard/assets/*`
 * as files, and the single page (index.html) for `/dashboard/` and every path
 * under it (the UI routes on the client: /dashboard/setup, /dashboard/api-keys, ...).
 */
export function createDashboardStaticRoute(options: { root?: string } = {}): ExtraRoute {
  const base = join(options.root ?? packageRoot(), dashboardBuildDir);
  const cache = new Map<string, Asset>();

  function load(file: string): Asset | null {
    let mtimeMs: number;
    try {
      const stat = statSync(file);
      if (!stat.isFile()) return null;
      mtimeMs = stat.mtimeMs;
    } catch {
      return null;
    }
    const cached = cache.get(file);
    if (cached && cached.mtimeMs === mtimeMs) return cached;
    const body = readFileSync(file);
    const asset = { body, etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 27)}"`, mtimeMs };
    cache.set(file, asset);
    return asset;
  }

  function send(res: ServerResponse, method: string, ifNoneMatch: string | undefined, asset: Asset, type: string): void {
    // no-cache: revalidate every time (cheap with the ETag), so a new build is picked up at once.
    const headers = { ...securityHeaders, "content-type": type, "cache-control": "no-cache", etag: asset.etag };
    if (ifNoneMatch === asset.etag) {
      res.writeHead(304, headers);
      res.end();
      return;
    }
    res.writeHead(200, { ...headers, "content-length": asset.body.length });
    res.end(method === "HEAD" ? undefined : asset.body);
  }

  return {
    label: "/dashboard",
    matches: (method, path) => (method === "GET" || method === "HEAD") && (path === "/dashboard" || path.startsWith("/dashboard/")),
    handle(req, res, url) {
      req.resume();
      const method = req.method ?? "GET";
      const path = url.pathname;
      if (path === "/dashboard") {
        res.writeHead(308, { location: "/dashboard/" });
        res.end();
        return;
      }
      const ifNoneMatch = req.headers["if-none-match"];
      if (path.startsWith("/dashboard/assets/")) {
        const name = path.slice("/dashboard/assets/".length);
        const extension = /^[A-Za-z0-9_-][A-Za-z0-9._-]*(\.[a-z]+)$/.exec(name)?.[1];
        const type = extension ? contentTypes[extension] : undefined;
        const asset = type ? load(join(base, "assets", name)) : null;
        if (!asset || !type) {
          res.writeHead(404, { ...securityHeaders, "content-type": "text/plain; charset=utf-8" });
          res.end("not found\n");
          return;
        }
        send(res, method, ifNoneMatch, asset, type);
        return;
      }
      const page = load(join(base, "index.html"));
      if (!page) {
        res.writeHead(503, { ...securityHeaders, "content-type": "text/plain; charset=utf-8", "retry-after": "5" });
        res.end("The dashboard UI is not built: run `npm install` (or `node scripts/build.mjs`).\n");
        return;
      }
      send(res, method, ifNoneMatch, page, contentTypes[".html"] as string);
    },
  };
}
