// Leaves a fresh `npm install` ready to run: generates both Prisma clients and
// builds what `npm start` and the CLI run (scripts/build.mjs).
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
for (const script of ["scripts/prisma-generate.mjs", "scripts/build.mjs"]) {
  const result = spawnSync(process.execPath, [join(root, script)], { cwd: root, stdio: "inherit" });
  if (result.status !== 0) {
    console.error(`gatehouse postinstall: ${script} failed`);
    process.exit(result.status ?? 1);
  }
}
