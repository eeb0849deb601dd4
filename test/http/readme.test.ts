import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServe, type ServeProcess } from "../support/cli.js";
import { isBuilt } from "../support/config-process.js";
import { createTestDatabase, type TestDatabase } from "../support/database.js";
import { freePort } from "../support/free-port.js";

/**
 * The README is a walk-through that runs. This test takes every ```sh block of
 * README.md, in order, and runs it in ONE bash session (`set -euo pipefail`, so
 * the shell variables a block exports carry over to the next), against a fresh
 * `gatehouse serve` on a fresh data directory (and, with TEST_DATABASE_URL, a
 * fresh PostgreSQL database). A block fails the test when any command in it
 * exits non-zero; the README's curl calls use `--fail-with-body`, or check the
 * status they expect explicitly.
 *
 * Blocks the test must not run are fenced as ```sh skip (the info string after
 * the language): installing, `npm start`, `npm test`, choosing a data
 * directory, starting and stopping the walk-through's server, a browser page.
 * The test does their part itself: the session starts with GATEHOUSE_DATA_DIR
 * and DATABASE_URL of the fresh store, and where the README starts the server
 * (the skipped block that runs `gatehouse serve`) the test starts it, on free
 * ports: the default addresses in the blocks (127.0.0.1:8080, :8081, :8082,
 * :8000 and :8001) are rewritten to those ports before they run.
 * README_TRANSCRIPT=<file> writes the session's whole output there (to compare
 * with the outputs the README shows).
 */

interface Block {
  /** 1-based line of the opening fence. */
  line: number;
  skip: boolean;
  text: string;
}

const readme = readFileSync(join(process.cwd(), "README.md"), "utf8");

function shellBlocks(markdown: string): Block[] {
  const blocks: Block[] = [];
  const lines = markdown.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const open = /^(`{3,})(.*)$/.exec(lines[i] ?? "");
    if (!open) continue;
    const fence = open[1] ?? "```";
    const info = (open[2] ?? "").trim().split(/\s+/);
    const body: string[] = [];
    let j = i + 1;
    while (j < lines.length && !(lines[j] ?? "").startsWith(fence)) body.push(lines[j++] ?? "");
    if (info[0] === "sh") blocks.push({ line: i + 1, skip: info.includes("skip"), text: body.join("\n") });
    i = j;
  }
  return blocks;
}

/** One bash process fed block by block; each block runs with `source`, so its variables stay. */
function startSession(cwd: string, env: Record<string, string>, scratch: string) {
  const bash = spawn("bash", ["--noprofile", "--norc"], { cwd, env: { ...process.env, ...env }, stdio: ["pipe", "pipe", "pipe"] });
  let output = "";
  let exited: number | null | undefined;
  const waiters: (() => void)[] = [];
  const wake = () => {
    for (const waiter of waiters.splice(0)) waiter();
  };
  bash.stdout.on("data", (chunk: Buffer) => {
    output += chunk.toString();
    wake();
  });
  bash.stderr.on("data", (chunk: Buffer) => {
    output += chunk.toString();
    wake();
  });
  bash.once("exit", (code) => {
    exited = code;
    wake();
  });
  bash.stdin.write("set -euo pipefail\ntrap 'echo \"README block failed at line $LINENO: $BASH_COMMAND\" >&2' ERR\n");
  return {
    output: () => output,
    async run(block: Block, index: number): Promise<void> {
      const file = join(scratch, `block-${index}.sh`);
      writeFileSync(file, `${block.text}\n`);
      const done = `__readme_block_${index}_done__`;
      const from = output.length;
      // stdin of the block's commands is /dev/null: nothing they run can read the rest of the session.
      bash.stdin.write(`source ${file} < /dev/null\necho ${done}\n`);
      while (!output.includes(done, from)) {
        if (exited !== undefined) {
          throw new Error(
            `README.md line ${block.line}: the block exited with ${exited}:\n${block.text}\n--- output ---\n${output.slice(from)}`,
          );
        }
        await new Promise<void>((resolve) => waiters.push(resolve));
      }
    },
    async close(): Promise<void> {
      if (exited === undefined) {
        bash.stdin.end("exit 0\n");
        await new Promise<void>((resolve) => (exited !== undefined ? resolve() : bash.once("exit", () => resolve())));
      }
    },
  };
}

let db: TestDatabase;
let serve: ServeProcess | undefined;
let scratch: string;

beforeAll(async () => {
  if (!isBuilt()) throw new Error("dist/ is not built (npm test builds it)");
  db = await createTestDatabase();
  scratch = mkdtempSync(join(tmpdir(), "gatehouse-readme-"));
});

afterAll(async () => {
  await serve?.stop();
  await db?.drop();
  rmSync(scratch, { recursive: true, force: true });
});

describe("README.md", () => {
  test("starts with the quick start: npm install && npm start, and npm install && npm test", () => {
    const quick = shellBlocks(readme.slice(readme.indexOf("## Quick start"))).slice(0, 2);
    expect(quick.map((block) => [block.skip, block.text.trim()])).toEqual([
      [true, "npm install && npm start"],
      [true, "npm install && npm test"],
    ]);
    expect(readme).toMatch(/Node 20\.19\+, 22\.12\+ or 24/);
  });

  test("every sh block runs, in order, in one shell, against a fresh server", async () => {
    const blocks = shellBlocks(readme);
    const runnable = blocks.filter((block) => !block.skip);
    expect(runnable.length).toBeGreaterThan(10);
    const startsServer = blocks.findIndex((block) => block.skip && /gatehouse serve/.test(block.text));
    expect(startsServer).toBeGreaterThan(-1);

    const [port, samplePort, grpcPort, gatewayPort, gatewayAdminPort] = [
      await freePort(),
      await freePort(),
      await freePort(),
      await freePort(),
      await freePort(),
    ];
    const addresses: [RegExp, number][] = [
      [/127\.0\.0\.1:8080\b/g, port],
      [/127\.0\.0\.1:8081\b/g, samplePort],
      [/127\.0\.0\.1:8082\b/g, grpcPort],
      [/127\.0\.0\.1:8000\b/g, gatewayPort],
      [/127\.0\.0\.1:8001\b/g, gatewayAdminPort],
    ];
    const env = { DATABASE_URL: db.url, GATEHOUSE_DATA_DIR: db.dataDir, LOG_LEVEL: "warn" };
    const session = startSession(process.cwd(), env, scratch);
    let ran = 0;
    const timings: string[] = [];
    const started = performance.now();
    try {
      for (const [index, block] of blocks.entries()) {
        if (index === startsServer) {
          serve = await startServe({
            ...env,
            PORT: String(port),
            SAMPLE_PORT: String(samplePort),
            GRPC_PORT: String(grpcPort),
            GATEWAY_PORT: String(gatewayPort),
            GATEWAY_TLS_PORT: "0",
            GATEWAY_ADMIN_PORT: String(gatewayAdminPort),
          });
        }
        if (block.skip) continue;
        let text = block.text;
        for (const [pattern, address] of addresses) text = text.replace(pattern, `127.0.0.1:${address}`);
        const blockStarted = performance.now();
        await session.run({ ...block, text }, index);
        timings.push(`line ${block.line}: ${((performance.now() - blockStarted) / 1000).toFixed(1)} s`);
        ran++;
      }
    } catch (error) {
      console.log(`README walk-through output:\n${session.output()}`);
      throw error;
    } finally {
      if (process.env.README_TRANSCRIPT) writeFileSync(process.env.README_TRANSCRIPT, session.output());
      await session.close();
    }
    console.log(
      `README.md: ran ${ran} sh blocks in one shell (${blocks.length - ran} marked skip) in ${((performance.now() - started) / 1000).toFixed(1)} s (${timings.join(", ")})`,
    );
    expect(ran).toBe(runnable.length);
  }, 240_000);
});
