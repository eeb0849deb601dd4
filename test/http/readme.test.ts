import { writeFileSync } from "node:fs";
import type { ServeProcess } from "../support/cli.js";
import { isBuilt } from "../support/config-process.js";
import { createTestDatabase, type TestDatabase } from "../support/database.js";
import {
  freeAddresses,
  makeScratch,
  pathBlock,
  readme,
  repositoryRoot,
  type Scratch,
  shellBlocks,
  startPageServer,
  startSession,
  storeEnv,
  untrackedFiles,
} from "../support/docs-shell.js";

/**
 * The README is a walk-through that runs. This test takes every ```sh block of
 * README.md, in order, and runs it in ONE bash session (`set -euo pipefail`, so
 * the shell variables a block exports carry over to the next), against a fresh
 * `gatehouse serve` on a fresh data directory (and, with TEST_DATABASE_URL, a
 * fresh PostgreSQL database). A block fails the test when any command in it
 * exits non-zero; the README's curl calls use `--fail-with-body`, or check the
 * status they expect explicitly.
 *
 * The session starts in a scratch directory under the OS temp dir (with a HOME
 * and TMPDIR of its own there); the block that puts `gatehouse` on the PATH
 * runs in the project folder, as the README says, and moves to a new scratch
 * directory (`cd "$(mktemp -d)"`). Nothing is left in the repository.
 *
 * Blocks the test must not run are fenced as ```sh skip (the info string after
 * the language): installing, `npm start`, `npm test`, choosing a data
 * directory, starting and stopping the walk-through's server, a browser page.
 * The test does their part itself: the session starts with GATEHOUSE_DATA_DIR
 * and DATABASE_URL of the fresh store (and PUBLIC_URL of the server, so that
 * the links operator commands print point at it), and where the README starts the server
 * (the skipped block that runs `gatehouse serve`) the test starts it, on free
 * ports: the default addresses in the blocks (127.0.0.1:8080, :8081, :8082,
 * :8000 and :8001) are rewritten to those ports before they run.
 * README_TRANSCRIPT=<file> writes the session's whole output there (to compare
 * with the outputs the README shows).
 */

let db: TestDatabase;
let serve: ServeProcess | undefined;
let scratch: Scratch;
let untrackedBefore: string[];

beforeAll(async () => {
  if (!isBuilt()) throw new Error("dist/ is not built (npm test builds it)");
  db = await createTestDatabase();
  scratch = makeScratch("readme");
  untrackedBefore = untrackedFiles();
});

afterAll(async () => {
  await serve?.stop();
  await db?.drop();
  scratch?.remove();
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

    const addresses = await freeAddresses();
    const env = storeEnv(db, addresses);
    const session = startSession(scratch, env);
    const putsOnPath = blocks.findIndex((block) => block.line === pathBlock().line);
    expect(putsOnPath).toBeGreaterThan(-1);
    let ran = 0;
    const timings: string[] = [];
    const started = performance.now();
    try {
      for (const [index, block] of blocks.entries()) {
        if (index === startsServer) serve = await startPageServer(db, addresses);
        if (block.skip) continue;
        // "In the project folder": where a reader who cloned it stands.
        if (index === putsOnPath) await session.run({ line: block.line, skip: false, text: `cd '${repositoryRoot}'` }, -1, "README.md");
        const text = addresses.rewrite(block.text);
        const blockStarted = performance.now();
        await session.run({ ...block, text }, index, "README.md");
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
    expect(untrackedFiles()).toEqual(untrackedBefore);
  }, 240_000);
});
