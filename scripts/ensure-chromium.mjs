// Makes sure Debian's Chromium, the only browser the tests drive, is installed.
// `npm test` runs this once before jest, so test files never race each other
// (or the machine's own package updates) for the package manager's lock.
//
//   node scripts/ensure-chromium.mjs        installs it when missing (as root)
//
// Exit status 0 when the browser is there afterwards; otherwise 1 with a message
// that says what to do.
import { spawnSync } from "node:child_process";
import { closeSync, existsSync, openSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const chromiumPath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** Seconds apt-get waits for another package manager run to release its lock. */
const lockWaitSeconds = 900;

function apt(args) {
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const result = spawnSync("apt-get", ["-o", `DPkg::Lock::Timeout=${lockWaitSeconds}`, ...args], {
    stdio: ["ignore", "inherit", "inherit"],
    env,
  });
  return result.status === 0;
}

/** One installer at a time across processes on this machine (jest workers, parallel runs). */
function withInstallLock(run) {
  const lock = join(tmpdir(), "gatehouse-chromium-install.lock");
  const deadline = Date.now() + lockWaitSeconds * 1000;
  for (;;) {
    try {
      closeSync(openSync(lock, "wx"));
      break;
    } catch (error) {
      if (error.code !== "EEXIST") throw error;
      // A lock left by a run that died is older than any install takes.
      try {
        if (Date.now() - statSync(lock).mtimeMs > lockWaitSeconds * 1000) rmSync(lock, { force: true });
      } catch {}
      if (Date.now() > deadline) throw new Error(`another process has held ${lock} for ${lockWaitSeconds} s`);
      if (existsSync(chromiumPath)) return;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);
    }
  }
  try {
    run();
  } finally {
    rmSync(lock, { force: true });
  }
}

/** Installs chromium when missing; throws with what to do when it cannot. */
export function ensureChromium() {
  if (existsSync(chromiumPath)) return;
  if (process.getuid?.() !== 0) {
    throw new Error(`${chromiumPath} is missing and this is not root: install it with "apt-get install -y chromium"`);
  }
  withInstallLock(() => {
    if (existsSync(chromiumPath)) return;
    process.stderr.write(`installing chromium (${chromiumPath} is missing)\n`);
    // A failed index refresh is not fatal: the package may be installable from what is cached.
    apt(["update", "-qq"]);
    if (!apt(["install", "-y", "-qq", "chromium"])) {
      // A half-finished earlier run leaves dpkg needing configuration; finish it and try once more.
      apt(["install", "-y", "-qq", "-f"]);
      apt(["install", "-y", "-qq", "chromium"]);
    }
  });
  if (!existsSync(chromiumPath)) {
    throw new Error(`could not install chromium: ${chromiumPath} is still missing (see apt-get's output above)`);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    ensureChromium();
  } catch (error) {
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
}
