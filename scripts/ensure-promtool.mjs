// Makes sure `promtool` (Prometheus's checker of the text exposition format) is
// at hand for the tests that check /metrics: the one on PATH, or one taken out
// of Debian's prometheus package into node_modules/.cache (without installing
// the server or running its scripts). `npm test` runs this once before jest.
//
//   node scripts/ensure-promtool.mjs        prints the path of promtool
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
export const cachedPromtool = join(root, "node_modules", ".cache", "gatehouse-tools", "promtool");

/** The promtool to run: PROMTOOL, the one on PATH, or the cached copy; undefined when there is none. */
export function promtoolPath() {
  if (process.env.PROMTOOL && existsSync(process.env.PROMTOOL)) return process.env.PROMTOOL;
  const onPath = spawnSync("sh", ["-c", "command -v promtool"], { encoding: "utf8" });
  if (onPath.status === 0 && onPath.stdout.trim()) return onPath.stdout.trim();
  return existsSync(cachedPromtool) ? cachedPromtool : undefined;
}

/** Finds or fetches promtool; throws with what to do when it cannot. */
export function ensurePromtool() {
  const found = promtoolPath();
  if (found) return found;
  const work = mkdtempSync(join(tmpdir(), "gatehouse-promtool-"));
  try {
    const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
    let download = spawnSync("apt-get", ["download", "-q", "prometheus"], { cwd: work, stdio: ["ignore", "ignore", "inherit"], env });
    if (download.status !== 0) {
      spawnSync("apt-get", ["update", "-qq"], { stdio: "ignore", env });
      download = spawnSync("apt-get", ["download", "-q", "prometheus"], { cwd: work, stdio: ["ignore", "ignore", "inherit"], env });
    }
    const deb = readdirSync(work).find((name) => name.endsWith(".deb"));
    if (download.status !== 0 || !deb)
      throw new Error('could not download Debian\'s "prometheus" package for promtool: install promtool or set PROMTOOL');
    const extracted = join(work, "root");
    if (spawnSync("dpkg-deb", ["-x", join(work, deb), extracted], { stdio: "inherit" }).status !== 0) {
      throw new Error("could not unpack the prometheus package");
    }
    mkdirSync(dirname(cachedPromtool), { recursive: true });
    copyFileSync(join(extracted, "usr", "bin", "promtool"), cachedPromtool);
    return cachedPromtool;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    console.log(ensurePromtool());
  } catch (error) {
    console.error(`gatehouse: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  }
}
