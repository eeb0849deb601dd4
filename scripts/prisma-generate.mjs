// Generates both Prisma clients (SQLite and PostgreSQL) into src/storage/generated.
//
// `prisma generate` never runs the native schema engine, but the CLI still tries
// to download it first; pointing PRISMA_SCHEMA_ENGINE_BINARY at any existing
// file skips that download, so generation works from npm packages alone.
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const cli = join(root, "node_modules", "prisma", "build", "index.js");
for (const provider of ["sqlite", "postgresql"]) {
  const result = spawnSync(process.execPath, [cli, "generate", "--schema", join(root, "prisma", provider, "schema.prisma"), "--no-hints"], {
    cwd: root,
    stdio: ["ignore", "pipe", "inherit"],
    env: {
      ...process.env,
      PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? process.execPath,
      PRISMA_HIDE_UPDATE_MESSAGE: "1",
      CHECKPOINT_DISABLE: "1",
    },
  });
  if (result.status !== 0) {
    process.stderr.write(result.stdout);
    process.exit(result.status ?? 1);
  }
}
