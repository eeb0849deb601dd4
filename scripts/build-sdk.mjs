// Builds the browser SDK (src/sdk) into dist/sdk: one ES module, gatehouse.js,
// served at /sdk/gatehouse.js and exported as the package's "./sdk"; its type
// declarations; and the example page served at /sdk/example.
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, renameSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const out = join(root, "dist", "sdk");
mkdirSync(out, { recursive: true });

// Written beside the target and renamed, so a server reading it never sees half a file.
const staging = join(out, `.gatehouse.${process.pid}.js`);
await build({
  entryPoints: [join(root, "src", "sdk", "index.ts")],
  outfile: staging,
  bundle: true,
  format: "esm",
  platform: "browser",
  // Browsers with passkeys (WebAuthn Level 2) all run ES2020.
  target: ["es2020"],
  minify: true,
  legalComments: "none",
  banner: {
    js: "/*! Gatehouse browser SDK. Bundles @simplewebauthn/browser, MIT License, Copyright (c) 2020 Matthew Miller. */",
  },
  logLevel: "warning",
});
renameSync(staging, join(out, "gatehouse.js"));
copyFileSync(join(root, "src", "sdk", "example.html"), join(out, "example.html"));

if (!process.argv.includes("--no-types")) {
  const types = join(out, "types");
  rmSync(types, { recursive: true, force: true });
  const tsc = spawnSync(
    process.execPath,
    [
      join(root, "node_modules", "typescript", "bin", "tsc"),
      join(root, "src", "sdk", "index.ts"),
      "--declaration",
      "--emitDeclarationOnly",
      "--outDir",
      types,
      "--rootDir",
      join(root, "src", "sdk"),
      "--target",
      "ES2022",
      "--module",
      "NodeNext",
      "--moduleResolution",
      "NodeNext",
      "--lib",
      "ES2023,DOM",
      "--strict",
      "--skipLibCheck",
    ],
    { cwd: root, stdio: "inherit" },
  );
  if (tsc.status !== 0) process.exit(tsc.status ?? 1);
}
