// bench/cli: how long the gatehouse command takes to start and answer, as a user runs
// it (`node bin/gatehouse.js ...`, a new process each time), against a bare `node -e 0`
// measured in the same run, so that the ratio says what the command itself adds.
//
//   npm run build && node bench/cli.mjs [--runs 15]
//
// The commands take turns, round after round, so that a slower moment of a shared
// machine falls on all of them alike; the table gives each command's median wall time
// and its ratio to the bare node start. `keys list --json` reads a small SQLite store
// (one organisation, a few keys) made at the start in a scratch folder. Targets:
// --version at most 150 ms, keys list --json at most 600 ms.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { median, printTable, root } from "./support.mjs";

const args = process.argv.slice(2);
const runsAt = args.indexOf("--runs");
const runs = runsAt === -1 ? 15 : Number(args[runsAt + 1]);
const bin = join(root, "bin", "gatehouse.js");
if (!existsSync(join(root, "dist", "src", "cli", "main.js"))) {
  console.error("build first: npm run build");
  process.exit(1);
}

const dataDir = mkdtempSync(join(tmpdir(), "gatehouse-bench-cli-"));
const env = { ...process.env, GATEHOUSE_DATA_DIR: dataDir, LOG_LEVEL: "warn" };
delete env.DATABASE_URL;

function run(argv) {
  const started = performance.now();
  const result = spawnSync(process.execPath, argv, { cwd: dataDir, env, encoding: "utf8" });
  const ms = performance.now() - started;
  if (result.status !== 0) throw new Error(`${argv.join(" ")} exited ${result.status}:\n${result.stderr}`);
  return { ms, stdout: result.stdout };
}

try {
  const organizationId = JSON.parse(run([bin, "init", "--json"]).stdout).organization_id;
  for (const role of ["admin", "member", "member"]) {
    run([bin, "keys", "create", "--org", organizationId, "--name", `bench ${role}`, "--role", role, "--json"]);
  }
  const commands = [
    ["node -e 0 (baseline)", ["-e", "0"]],
    ["gatehouse --version", [bin, "--version"]],
    ["gatehouse --help", [bin, "--help"]],
    ["gatehouse completion bash", [bin, "completion", "bash"]],
    ["gatehouse keys list --json", [bin, "keys", "list", "--org", organizationId, "--json"]],
  ];
  const times = new Map(commands.map(([label]) => [label, []]));
  for (const [, argv] of commands) run(argv); // warm the file cache
  for (let round = 0; round < runs; round++) {
    for (const [label, argv] of commands) times.get(label).push(run(argv).ms);
  }
  const baseline = median(times.get(commands[0][0]));
  printTable(
    `gatehouse start-up, median of ${runs} runs each (node ${process.version}, a new process per run)`,
    commands.map(([label]) => {
      const ms = median(times.get(label));
      return { command: label, "median ms": ms.toFixed(0), "x node -e 0": (ms / baseline).toFixed(2) };
    }),
  );
} finally {
  rmSync(dataDir, { recursive: true, force: true });
}
