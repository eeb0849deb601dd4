import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServe, type ServeProcess } from "./cli.js";
import type { TestDatabase } from "./database.js";
import { freePort } from "./free-port.js";

/**
 * Runs the ```sh blocks of the project's Markdown as a reader types them
 * (README.md, "A walk-through"; docs/development.md, "Docs that run"): one
 * bash session per page (`set -euo pipefail`, so a block's variables carry
 * over to the next and any failing command fails the page), in a scratch
 * directory under the OS temp dir, never the repository, with `gatehouse` on
 * the PATH the way the README puts it there, against a fresh `gatehouse serve`
 * on a fresh store. Blocks fenced ```sh skip are not run.
 */

export interface Block {
  /** 1-based line of the opening fence. */
  line: number;
  skip: boolean;
  text: string;
}

export const repositoryRoot = process.cwd();
export const readme = readFileSync(join(repositoryRoot, "README.md"), "utf8");

/** The ```sh blocks of a Markdown page, in order (```sh skip ones marked). */
export function shellBlocks(markdown: string): Block[] {
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

/** The README block that puts `gatehouse` on the PATH, run in the project folder (README.md, "One set of variables"). */
export function pathBlock(): Block {
  const block = shellBlocks(readme).find((candidate) => !candidate.skip && /^export PATH=.*\/bin:/m.test(candidate.text));
  if (!block) throw new Error("README.md has no sh block that exports PATH with the project's bin directory");
  return block;
}

/** The README block that initialises the store and sets the variables every page uses. */
export function variablesBlock(): Block {
  const block = shellBlocks(readme).find((candidate) => !candidate.skip && /gatehouse init --json/.test(candidate.text));
  if (!block) throw new Error("README.md has no sh block that runs gatehouse init --json");
  return block;
}

/** The untracked files of the repository (git status), to compare before and after a run. */
export function untrackedFiles(): string[] {
  const result = spawnSync("git", ["status", "--porcelain", "--untracked-files=all"], { cwd: repositoryRoot, encoding: "utf8" });
  if (result.status !== 0) throw new Error(`git status failed: ${result.stderr}`);
  return result.stdout
    .split("\n")
    .filter((line) => line.startsWith("?? "))
    .map((line) => line.slice(3));
}

/** A scratch area: `work` (the session's directory), `home` (its HOME), `tmp` (its TMPDIR), and the block files beside them. */
export interface Scratch {
  root: string;
  work: string;
  remove(): void;
}

export function makeScratch(label: string): Scratch {
  const root = mkdtempSync(join(tmpdir(), `gatehouse-${label}-`));
  for (const dir of ["work", "home", "tmp", "blocks"]) mkdirSync(join(root, dir));
  return { root, work: join(root, "work"), remove: () => rmSync(root, { recursive: true, force: true }) };
}

export interface ShellSession {
  output(): string;
  /** Runs a block with `source` (its variables stay); rejects when the session exits (a command failed). */
  run(block: Block, index: number, page: string): Promise<void>;
  close(): Promise<void>;
}

/** One bash process fed block by block, started in the scratch's work directory. */
export function startSession(scratch: Scratch, env: Record<string, string>): ShellSession {
  const bash = spawn("bash", ["--noprofile", "--norc"], {
    cwd: scratch.work,
    env: { ...process.env, HOME: join(scratch.root, "home"), TMPDIR: join(scratch.root, "tmp"), ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let output = "";
  let exited: number | null | undefined;
  const waiters: (() => void)[] = [];
  const wake = () => {
    for (const waiter of waiters.splice(0)) waiter();
  };
  const take = (chunk: Buffer) => {
    output += chunk.toString();
    wake();
  };
  bash.stdout.on("data", take);
  bash.stderr.on("data", take);
  bash.once("exit", (code) => {
    exited = code;
    wake();
  });
  bash.stdin.write("set -euo pipefail\ntrap 'echo \"block failed at line $LINENO: $BASH_COMMAND\" >&2' ERR\n");
  return {
    output: () => output,
    async run(block, index, page) {
      const file = join(scratch.root, "blocks", `block-${index}.sh`);
      writeFileSync(file, `${block.text}\n`);
      const done = `__docs_block_${index}_done__`;
      const from = output.length;
      // stdin of the block's commands is /dev/null: nothing they run can read the rest of the session.
      bash.stdin.write(`source ${file} < /dev/null\necho ${done}\n`);
      while (!output.includes(done, from)) {
        if (exited !== undefined) {
          throw new Error(
            `${page} line ${block.line}: the block exited with ${exited}:\n${block.text}\n--- output ---\n${output.slice(from)}`,
          );
        }
        await new Promise<void>((resolve) => waiters.push(resolve));
      }
    },
    async close() {
      if (exited === undefined) {
        bash.stdin.end("exit 0\n");
        await new Promise<void>((resolve) => (exited !== undefined ? resolve() : bash.once("exit", () => resolve())));
      }
    },
  };
}

/** Free ports for the default addresses of the docs, and the rewriting of those addresses in a block. */
export interface Addresses {
  /** The server's ports. */
  env: Record<string, string>;
  /** PUBLIC_URL: the platform's address, which the operator commands of a session print links to. */
  publicUrl: string;
  rewrite(text: string): string;
}

export async function freeAddresses(): Promise<Addresses> {
  const [port, samplePort, grpcPort, gatewayPort, gatewayAdminPort] = [
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
  ];
  const addresses: [RegExp, number][] = [
    [/(127\.0\.0\.1|localhost):8080\b/g, port],
    [/(127\.0\.0\.1|localhost):8081\b/g, samplePort],
    [/(127\.0\.0\.1|localhost):8082\b/g, grpcPort],
    [/(127\.0\.0\.1|localhost):8000\b/g, gatewayPort],
    [/(127\.0\.0\.1|localhost):8001\b/g, gatewayAdminPort],
  ];
  return {
    env: {
      PORT: String(port),
      SAMPLE_PORT: String(samplePort),
      GRPC_PORT: String(grpcPort),
      GATEWAY_PORT: String(gatewayPort),
      GATEWAY_TLS_PORT: "0",
      GATEWAY_ADMIN_PORT: String(gatewayAdminPort),
    },
    publicUrl: `http://127.0.0.1:${port}`,
    rewrite(text) {
      let rewritten = text;
      for (const [pattern, address] of addresses) rewritten = rewritten.replace(pattern, `$1:${address}`);
      return rewritten;
    },
  };
}

/** The environment of a page's session and server: the fresh store, the server's address, quiet logs. */
export function storeEnv(db: TestDatabase, addresses: Addresses): Record<string, string> {
  return { DATABASE_URL: db.url, GATEHOUSE_DATA_DIR: db.dataDir, PUBLIC_URL: addresses.publicUrl, LOG_LEVEL: "warn" };
}

/** Starts the page's `gatehouse serve` on the free ports, over the page's store. */
export function startPageServer(db: TestDatabase, addresses: Addresses, env: Record<string, string> = {}): Promise<ServeProcess> {
  return startServe({ ...storeEnv(db, addresses), ...addresses.env, ...env });
}
