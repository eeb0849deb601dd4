// Makes sure Debian's Chromium, the only browser the tests drive, is installed.
//
//   node scripts/ensure-chromium.mjs        installs it when missing (as root)
//
// Exit status 0 when the browser is there afterwards; otherwise 1 with a message
// that says what to do.
import { fileURLToPath } from "node:url";
import { ensureDebianPackage } from "./debian-package.mjs";

export const chromiumPath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** Installs chromium when missing; throws with what to do when it cannot. */
export function ensureChromium() {
  ensureDebianPackage(chromiumPath, "chromium");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    ensureChromium();
  } catch (error) {
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
}
