#!/usr/bin/env node
// The gatehouse command. The TypeScript sources are compiled to dist/ by `npm install`.
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const entry = new URL("../dist/src/cli/main.js", import.meta.url);
if (!existsSync(fileURLToPath(entry))) {
  console.error("gatehouse is not built yet: run `npm install` (or `npm run build`) in the project folder first.");
  process.exit(1);
}
const { main } = await import(entry.href);
process.exitCode = await main(process.argv.slice(2));
