import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ServeProcess } from "../support/cli.js";
import { isBuilt } from "../support/config-process.js";
import { createTestDatabase } from "../support/database.js";
import {
  type Block,
  freeAddresses,
  makeScratch,
  pathBlock,
  repositoryRoot,
  shellBlocks,
  startPageServer,
  startSession,
  storeEnv,
  untrackedFiles,
  variablesBlock,
} from "../support/docs-shell.js";

/**
 * Docs that run (docs/development.md, "Docs that run"): every ```sh block of
 * every docs/*.md runs, in order, in one bash session per page, as the README's
 * do (test/http/readme.test.ts): the session starts in a scratch directory under
 * the OS temp dir, runs the README's block that puts `gatehouse` on the PATH in
 * the project folder (it moves on to a new scratch directory), then the README's
 * block that initialises a fresh store and sets the variables ($ORG, $API_KEY,
 * $SK, $GH, ...); the test starts a fresh `gatehouse serve` on that store, on
 * free ports (the docs' default addresses are rewritten to them), and runs the
 * page's blocks. A block fails the page when any command in it exits non-zero.
 *
 * A block the test cannot run is fenced ```sh skip, and must match one of the
 * reasons below; there are at most maxSkipped of them. DOCS_PAGE=<file.md> runs
 * one page; DOCS_TRANSCRIPT_DIR=<dir> writes each page's session output there.
 */
const skipReasons: { reason: string; matches: RegExp }[] = [
  { reason: "installs packages or a Node build", matches: /\bnpm (install|pack|rebuild)\b/ },
  {
    reason: "starts a long-running server (the test starts the page's gatehouse serve itself)",
    matches: /(^|[\s;&|])gatehouse (serve|gateway)\s*(&|$)|python3 -m http\.server|docker run/m,
  },
  { reason: "a server stream that does not end (WatchConfig)", matches: /\/WatchConfig"/ },
  { reason: "a benchmark that takes minutes", matches: /node bench\// },
  { reason: "calls a gRPC service of the reader's own behind the gateway", matches: /\/shop\.v1\.OrderService\// },
];
const maxSkipped = 10;

const pages = readdirSync(join(repositoryRoot, "docs"))
  .filter((file) => file.endsWith(".md"))
  .sort()
  .map((file) => ({ file, blocks: shellBlocks(readFileSync(join(repositoryRoot, "docs", file), "utf8")) }))
  .filter((page) => page.blocks.length > 0);
const selected = process.env.DOCS_PAGE ? pages.filter((page) => page.file === process.env.DOCS_PAGE) : pages;

let untrackedBefore: string[];
const counts: string[] = [];

beforeAll(() => {
  if (!isBuilt()) throw new Error("dist/ is not built (npm test builds it)");
  untrackedBefore = untrackedFiles();
});

afterAll(() => {
  if (counts.length > 0) console.log(`docs/*.md sh blocks:\n${counts.join("\n")}`);
});

test("every sh skip block of docs/ has a reason the test knows, and they are few", () => {
  const skipped = pages.flatMap((page) => page.blocks.filter((block) => block.skip).map((block) => ({ file: page.file, block })));
  for (const { file, block } of skipped) {
    const reason = skipReasons.find((candidate) => candidate.matches.test(block.text));
    if (!reason) throw new Error(`docs/${file} line ${block.line}: a sh skip block with no known reason to skip:\n${block.text}`);
  }
  expect(skipped.length).toBeLessThanOrEqual(maxSkipped);
  expect(pages.flatMap((page) => page.blocks).length - skipped.length).toBeGreaterThan(30);
});

describe.each(selected.map((page) => [page.file, page.blocks] as const))("docs/%s", (file, blocks) => {
  test("every sh block runs, in order, in one shell, in a scratch directory, against a fresh server", async () => {
    const db = await createTestDatabase();
    const scratch = makeScratch("docs");
    const addresses = await freeAddresses();
    const session = startSession(scratch, storeEnv(db, addresses));
    let serve: ServeProcess | undefined;
    let ran = 0;
    const runnable = blocks.filter((block) => !block.skip);
    const started = performance.now();
    try {
      const prelude: Block[] = [
        { line: 0, skip: false, text: `cd '${repositoryRoot}'` },
        pathBlock(),
        { ...variablesBlock(), text: addresses.rewrite(variablesBlock().text) },
      ];
      if (runnable.length > 0) {
        for (const [index, block] of prelude.entries()) await session.run(block, -1 - index, `README.md (before docs/${file})`);
        serve = await startPageServer(db, addresses);
      }
      for (const [index, block] of blocks.entries()) {
        if (block.skip) continue;
        await session.run({ ...block, text: addresses.rewrite(block.text) }, index, `docs/${file}`);
        ran++;
      }
    } catch (error) {
      console.log(`docs/${file} output:\n${session.output()}`);
      throw error;
    } finally {
      if (process.env.DOCS_TRANSCRIPT_DIR) writeFileSync(join(process.env.DOCS_TRANSCRIPT_DIR, `${file}.txt`), session.output());
      await session.close();
      await serve?.stop();
      await db.drop();
      scratch.remove();
    }
    const skipped = blocks.filter((block) => block.skip);
    counts.push(
      `docs/${file}: ran ${ran}, skipped ${skipped.length}${skipped
        .map((block) => ` (line ${block.line}: ${skipReasons.find((candidate) => candidate.matches.test(block.text))?.reason})`)
        .join("")} in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
    expect(ran).toBe(runnable.length);
  }, 240_000);
});

test("the runs left no new untracked file in the repository", () => {
  expect(untrackedFiles()).toEqual(untrackedBefore);
});
