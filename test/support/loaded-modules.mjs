// Preloaded into a Gatehouse process (NODE_OPTIONS=--import=<this file>) by the tracing test: when the
// process exits, the files of every CommonJS module it loaded (the OpenTelemetry packages are CommonJS,
// imported or required) are written to LOADED_MODULES_FILE, one a line.
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";

const file = process.env.LOADED_MODULES_FILE;
if (file) {
  const require = createRequire(import.meta.url);
  process.on("exit", () => writeFileSync(file, Object.keys(require.cache).join("\n")));
}
