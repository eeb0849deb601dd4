// Installs a Debian package the tests need when its program is missing, once per machine:
// `npm test` runs the ensure-* scripts before jest, so test files never race each other
// (or the machine's own package updates) for the package manager's lock.
import { spawnSync } from "node:child_process";
import { closeSync, existsSync, openSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

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
function withInstallLock(run, installed) {
  const lock = join(tmpdir(), "gatehouse-apt-install.lock");
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
      if (installed()) return;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);
    }
  }
  try {
    run();
  } finally {
    rmSync(lock, { force: true });
  }
}

/** Installs `packageName` (as root) unless `path` exists; throws with what to do when it cannot. */
export function ensureDebianPackage(path, packageName) {
  if (existsSync(path)) return;
  if (process.getuid?.() !== 0) {
    throw new Error(`${path} is missing and this is not root: install it with "apt-get install -y ${packageName}"`);
  }
  withInstallLock(
    () => {
      if (existsSync(path)) return;
      process.stderr.write(`installing ${packageName} (${path} is missing)\n`);
      // A failed index refresh is not fatal: the package may be installable from what is cached.
      apt(["update", "-qq"]);
      if (!apt(["install", "-y", "-qq", packageName])) {
        // A half-finished earlier run leaves dpkg needing configuration; finish it and try once more.
        apt(["install", "-y", "-qq", "-f"]);
        apt(["install", "-y", "-qq", packageName]);
      }
    },
    () => existsSync(path),
  );
  if (!existsSync(path)) {
    throw new Error(`could not install ${packageName}: ${path} is still missing (see apt-get's output above)`);
  }
}
