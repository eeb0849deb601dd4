// `.ci/run` on another Node release line: a fresh install and the SQLite suite of the
// committed HEAD under the newest release of that line, all fetched from the npm registry.
//
//   node scripts/ci-node.mjs 24        (22 works the same way)
//
// Everything lives in one temporary folder, removed at the end: the registry's
// `node-<platform>-<arch>` package (the official binary and its headers) unpacked into a
// folder of its own, and a clone of HEAD with its own node_modules, since native addons
// are built for one Node ABI. The install must be quiet: an EBADENGINE or an unreviewed
// install script fails the run, and so does a lockfile or tracked file it changes.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const major = process.argv[2] ?? "24";
if (!/^\d+$/.test(major)) {
  console.error("usage: node scripts/ci-node.mjs <major version>, e.g. 24");
  process.exit(2);
}
const nodePackage = `node-${process.platform}-${process.arch}`;

// Native addons are compiled against the headers of the line's first release (<major>.0.0),
// as better-sqlite3 builds the binaries it publishes (`prebuild -t 24.0.0`); Node keeps the
// addon ABI within a release line. The headers of 24.19 and later compile node::ObjectWrap
// with environment cleanup hooks whose removal aborts the process when the garbage collector
// frees a better-sqlite3 statement outside a JavaScript context
// (https://github.com/nodejs/node/issues/65446); better-sqlite3 12 built against them
// crashes the suite.
const headersVersion = `${major}.0.0`;

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { stdio: "inherit", ...options });
  if (result.error) throw result.error;
  if (result.status !== 0) {
    const output = options.stdio === "pipe" ? `\n${result.stdout ?? ""}${result.stderr ?? ""}` : "";
    throw new Error(`${command} ${args.join(" ")} exited with ${result.status ?? result.signal}${output}`);
  }
  return result;
}

/** `npm pack`s one version of the registry's Node package and unpacks it into a folder of its own. */
function unpackNode(spec, into) {
  const packed = join(work, "packed");
  mkdirSync(packed, { recursive: true });
  run("npm", ["pack", spec, "--pack-destination", packed, "--silent"], { stdio: ["ignore", "ignore", "inherit"] });
  const tarball = readdirSync(packed).find((name) => name.endsWith(".tgz"));
  if (!tarball) throw new Error(`npm pack ${spec} left no tarball`);
  mkdirSync(into);
  run("tar", ["-xzf", join(packed, tarball), "-C", into, "--strip-components=1"]);
  rmSync(packed, { recursive: true, force: true });
  return into;
}

function step(label, action) {
  const started = Date.now();
  process.stdout.write(`\n== Node ${major}: ${label}\n`);
  const value = action();
  process.stdout.write(`== Node ${major}: ${label} ok (${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
  return value;
}

const started = Date.now();
const work = mkdtempSync(join(tmpdir(), `gatehouse-node${major}-`));
let failed = false;
try {
  const nodeDir = step(`fetch ${nodePackage}@${major}`, () => unpackNode(`${nodePackage}@${major}`, join(work, "node")));
  const headersDir = step(`fetch ${nodePackage}@${headersVersion} (addon headers)`, () =>
    unpackNode(`${nodePackage}@${headersVersion}`, join(work, "headers")),
  );

  const clone = join(work, "gatehouse");
  step("clone HEAD", () => {
    run("git", ["init", "--quiet", clone]);
    run("git", ["-C", clone, "fetch", "--quiet", "--depth=1", root, "HEAD"]);
    run("git", ["-C", clone, "checkout", "--quiet", "--detach", "FETCH_HEAD"]);
  });

  const env = { ...process.env, PATH: `${join(nodeDir, "bin")}:${process.env.PATH}`, npm_config_nodedir: headersDir };
  const inClone = { cwd: clone, env };

  const version = run("node", ["--version"], { ...inClone, stdio: "pipe", encoding: "utf8" }).stdout.trim();
  process.stdout.write(`node ${version}, addon headers ${headersVersion}\n`);

  step("npm install", () => {
    const install = run("npm", ["install", "--no-audit", "--no-fund"], { ...inClone, stdio: "pipe", encoding: "utf8" });
    const output = `${install.stdout}${install.stderr}`;
    process.stdout.write(output);
    const noise = output.split("\n").filter((line) => /EBADENGINE|install-scripts/.test(line));
    if (noise.length > 0) throw new Error(`npm install on Node ${version} is not quiet:\n${noise.join("\n")}`);
    const changed = run("git", ["status", "--porcelain"], { ...inClone, stdio: "pipe", encoding: "utf8" }).stdout.trim();
    if (changed) throw new Error(`npm install on Node ${version} changed tracked files:\n${changed}`);
  });

  step("npm test (SQLite)", () => {
    const testEnv = { ...env };
    delete testEnv.TEST_DATABASE_URL;
    run("npm", ["test"], { cwd: clone, env: testEnv });
  });
} catch (error) {
  failed = true;
  process.stderr.write(`\nNode ${major}: ${error.message}\n`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
process.stdout.write(`\n== Node ${major}: ${failed ? "failed" : "ok"} in ${((Date.now() - started) / 1000).toFixed(0)} s\n`);
process.exit(failed ? 1 : 0);
