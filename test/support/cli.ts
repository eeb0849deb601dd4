import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from "node:child_process";
import { join } from "node:path";

export const gatehouseBin = join(process.cwd(), "bin", "gatehouse.js");

export interface ProcessOptions {
  /** The file mode creation mask the process starts with (octal, as the shell's `umask` takes it); the inherited one by default. */
  umask?: string;
  /** The process's open-file limit (the shell's `ulimit -n`); the inherited one by default. */
  openFiles?: number;
}

/** The command and arguments that run `gatehouse <args>`, under a shell that sets the umask or open-file limit first when one is given. */
function gatehouseProcess(args: string[], options: ProcessOptions): [string, string[]] {
  const setup: string[] = [];
  if (options.umask !== undefined) {
    if (!/^[0-7]{3,4}$/.test(options.umask)) throw new Error(`umask ${options.umask} is not an octal mask`);
    setup.push(`umask ${options.umask}`);
  }
  if (options.openFiles !== undefined) setup.push(`ulimit -n ${Math.trunc(options.openFiles)}`);
  if (setup.length === 0) return [process.execPath, [gatehouseBin, ...args]];
  return ["sh", ["-c", `${setup.join(" && ")} && exec "$0" "$@"`, process.execPath, gatehouseBin, ...args]];
}

/** Runs `gatehouse <args>` to completion (the built CLI, as a user runs it). */
export function runCli(args: string[], env: Record<string, string>, input?: string, options: ProcessOptions = {}) {
  const [command, argv] = gatehouseProcess(args, options);
  const result = spawnSync(command, argv, {
    env: { ...process.env, LOG_LEVEL: "warn", ...env },
    encoding: "utf8",
    input,
    timeout: 60_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/**
 * Runs `gatehouse <args>` without blocking this process's event loop (a test
 * that keeps a server busy from here while the command runs); resolves with
 * its exit status, output and wall time.
 */
export function runCliAsync(
  args: string[],
  env: Record<string, string>,
): Promise<{ status: number | null; stdout: string; stderr: string; ms: number }> {
  const started = Date.now();
  const child = spawn(process.execPath, [gatehouseBin, ...args], { env: { ...process.env, LOG_LEVEL: "warn", ...env } });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => {
    stdout += chunk;
  });
  child.stderr.on("data", (chunk) => {
    stderr += chunk;
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), 120_000);
    child.once("error", reject);
    child.once("close", (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr, ms: Date.now() - started });
    });
  });
}

/** A shell-quoted `node bin/gatehouse.js <args>`, for command lines with pipes. */
export function gatehouseCommand(args: string[]): string {
  const quote = (word: string) => `'${word.replace(/'/g, "'\\''")}'`;
  return [process.execPath, gatehouseBin, ...args].map(quote).join(" ");
}

/**
 * Runs a bash command line (`set -o pipefail`, so a pipeline's status is the
 * last non-zero status of its commands, gatehouse's included), as a user types it.
 */
export function runShell(script: string, env: Record<string, string>) {
  const result = spawnSync("bash", ["-c", `set -o pipefail; ${script}`], {
    env: { ...process.env, LOG_LEVEL: "warn", ...env },
    encoding: "utf8",
    timeout: 60_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

export interface ServeProcess {
  child: ChildProcessWithoutNullStreams;
  url: string;
  grpcUrl: string;
  output(): string;
  /** Sends a signal and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts `gatehouse serve` and resolves once it prints its addresses. */
export function startServe(env: Record<string, string>, options: ProcessOptions = {}): Promise<ServeProcess> {
  const [command, argv] = gatehouseProcess(["serve"], options);
  const child = spawn(command, argv, {
    env: { ...process.env, PORT: "0", GRPC_PORT: "0", SAMPLE_PORT: "0", LOG_LEVEL: "warn", ...env },
  });
  let out = "";
  child.stdout.on("data", (chunk) => {
    out += chunk;
  });
  child.stderr.on("data", (chunk) => {
    out += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start:\n${out}`)), 60_000);
    const poll = setInterval(() => {
      const platform = /Gatehouse platform API\s+(\S+)/.exec(out);
      const grpc = /gRPC \(h2c\)\s+(\S+)/.exec(out);
      const sample = /plant API\s+(\S+)/.exec(out);
      if (platform?.[1] && grpc?.[1] && sample) {
        clearInterval(poll);
        clearTimeout(timer);
        resolve({
          child,
          url: platform[1],
          grpcUrl: grpc[1],
          output: () => out,
          stop: async (signal = "SIGTERM") => {
            child.kill(signal);
            return exited;
          },
        });
      }
    }, 20);
    void exited.then((code) => {
      clearInterval(poll);
      clearTimeout(timer);
      reject(new Error(`serve exited with ${code}:\n${out}`));
    });
  });
}
