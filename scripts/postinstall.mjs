// Leaves a fresh `npm install` ready to run: generates both Prisma clients and
// compiles the TypeScript sources to dist/ (what `npm start` and the CLI run).
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const steps = [
  ["generate Prisma clients", [join(root, "scripts/prisma-generate.mjs")]],
  ["compile TypeScript", [join(root, "node_modules/typescript/bin/tsc"), "-p", join(root, "tsconfig.build.json")]],
];
for (const [label, args] of steps) {
  const started = Date.now();
  const result = spawnSync(process.execPath, args, { cwd: root, stdio: "inherit" });
  if (result.status !== 0) {
    console.error(`gatehouse postinstall: ${label} failed`);
    process.exit(result.status ?? 1);
  }
  console.log(`gatehouse postinstall: ${label} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
}
