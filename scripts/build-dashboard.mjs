// Builds the dashboard UI (src/dashboard/ui) into dist/dashboard: index.html and
// assets/app.js, assets/app.css, served at /dashboard/ by src/dashboard/http/static-route.ts.
import { copyFileSync, mkdirSync, renameSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const source = join(root, "src", "dashboard", "ui");
const out = join(root, "dist", "dashboard");
const assets = join(out, "assets");
mkdirSync(assets, { recursive: true });

// Each file is written beside its target and renamed, so a running server never serves half a file.
const staging = join(assets, `.app.${process.pid}.js`);
await build({
  entryPoints: [join(source, "main.ts")],
  outfile: staging,
  bundle: true,
  format: "esm",
  platform: "browser",
  target: ["es2020"],
  minify: true,
  legalComments: "none",
  logLevel: "warning",
});
renameSync(staging, join(assets, "app.js"));
for (const [from, to] of [
  [join(source, "styles.css"), join(assets, "app.css")],
  [join(source, "index.html"), join(out, "index.html")],
]) {
  const temporary = `${to}.${process.pid}.tmp`;
  copyFileSync(from, temporary);
  renameSync(temporary, to);
}
