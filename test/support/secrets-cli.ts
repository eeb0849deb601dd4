import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** The built `gatehouse` command (bin/gatehouse.js runs dist/, which `npm install` or `npm run build` produce). */
export const gatehouseBin = fileURLToPath(new URL("../../bin/gatehouse.js", import.meta.url));
const builtMain = fileURLToPath(new URL("../../dist/src/cli/main.js", import.meta.url));

export function requireBuiltCli(): void {
  if (!existsSync(builtMain)) throw new Error("the CLI is not built: run `npm run build` (npx tsc -p tsconfig.build.json) first");
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Starts `gatehouse ...args` with the given environment (on top of a clean copy of ours). */
export function startCli(
  args: string[],
  env: Record<string, string>,
  stdin?: string | Buffer,
): { child: ChildProcess; done: Promise<CliResult> } {
  const { GATEHOUSE_URL: _u, GATEHOUSE_API_KEY: _k, GATEHOUSE_ORG: _o, NODE_OPTIONS: _n, ...inherited } = process.env;
  const child = spawn(process.execPath, [gatehouseBin, ...args], { env: { ...inherited, ...env }, stdio: ["pipe", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  if (stdin !== undefined) child.stdin?.end(stdin);
  else child.stdin?.end();
  const done = new Promise<CliResult>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  return { child, done };
}

export function runCli(args: string[], env: Record<string, string>, stdin?: string | Buffer): Promise<CliResult> {
  return startCli(args, env, stdin).done;
}
