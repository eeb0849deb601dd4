import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ExtraRoute } from "../server/http-server.js";

/** The folder holding package.json above this module (src/handlers or dist/src/handlers). */
function packageRoot(): string {
  const start = dirname(fileURLToPath(import.meta.url));
  for (let dir = start; ; dir = dirname(dir)) {
    if (existsSync(join(dir, "package.json"))) return dir;
    if (dirname(dir) === dir) throw new Error(`No package.json found above ${start}`);
  }
}

interface Asset {
  body: Buffer;
  etag: string;
  mtimeMs: number;
}

/**
 * A file of the SDK build (scripts/build-sdk.mjs writes dist/sdk), read once
 * and again only when the build replaced it.
 */
function createAsset(file: string) {
  let cached: Asset | undefined;
  return async (): Promise<Asset | null> => {
    let mtimeMs: number;
    try {
      mtimeMs = (await stat(file)).mtimeMs;
    } catch {
      return null;
    }
    if (cached?.mtimeMs === mtimeMs) return cached;
    const body = await readFile(file);
    cached = { body, etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 27)}"`, mtimeMs };
    return cached;
  };
}

function serve(label: string, path: string, load: () => Promise<Asset | null>, headers: Record<string, string>): ExtraRoute {
  return {
    label,
    matches: (method, pathname) => (method === "GET" || method === "HEAD") && pathname === path,
    async handle(req: IncomingMessage, res: ServerResponse) {
      req.resume();
      const asset = await load();
      if (!asset) {
        const body = JSON.stringify({ code: "unavailable", message: "the browser SDK is not built: run `npm run build`" });
        res.writeHead(503, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
        res.end(body);
        return;
      }
      const common = { ...headers, etag: asset.etag, "cache-control": "public, max-age=300" };
      if (req.headers["if-none-match"] === asset.etag) {
        res.writeHead(304, common);
        res.end();
        return;
      }
      res.writeHead(200, { ...common, "content-length": asset.body.length });
      res.end(req.method === "HEAD" ? undefined : asset.body);
    },
  };
}

/**
 * GET /sdk/gatehouse.js (the browser SDK, one ES module) and GET /sdk/example
 * (a page that registers and signs in with it).
 */
export function createSdkRoutes(options: { dir?: string } = {}): ExtraRoute[] {
  const dir = options.dir ?? join(packageRoot(), "dist", "sdk");
  return [
    serve("/sdk/gatehouse.js", "/sdk/gatehouse.js", createAsset(join(dir, "gatehouse.js")), {
      "content-type": "text/javascript; charset=utf-8",
      // Module scripts load in CORS mode: pages on the organisation's own origins import it from here.
      "access-control-allow-origin": "*",
      "x-content-type-options": "nosniff",
    }),
    serve("/sdk/example", "/sdk/example", createAsset(join(dir, "example.html")), {
      "content-type": "text/html; charset=utf-8",
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
      // The page loads only its own module and talks only to this origin.
      "content-security-policy":
        "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    }),
  ];
}
