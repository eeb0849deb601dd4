// Builds everything `npm start` serves: the TypeScript sources to dist/, the browser SDK to dist/sdk and the dashboard UI to dist/dashboard.
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const steps = [
  ["collect the proto comments for the OpenAPI document", [join(root, "scripts/build-proto-comments.mjs")]],
  ["compile TypeScript", [join(root, "node_modules/typescript/bin/tsc"), "-p", join(root, "tsconfig.build.json")]],
  ["bundle the browser SDK", [join(root, "scripts/build-sdk.mjs")]],
  ["bundle the dashboard UI", [join(root, "scripts/build-dashboard.mjs")]],
];
for (const [label, args] of steps) {
  const started = Date.now();
  const result = spawnSync(process.execPath, args, { cwd: root, stdio: "inherit" });
  if (result.status !== 0) {
    console.error(`gatehouse build: ${label} failed`);
    process.exit(result.status ?? 1);
  }
  console.log(`gatehouse build: ${label} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
}
