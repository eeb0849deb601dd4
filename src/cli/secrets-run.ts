import { spawn } from "node:child_process";
import { constants } from "node:os";

/** Signals passed on to the child, so it can shut down cleanly when we are asked to. */
const forwarded: NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR2"];

/**
 * Runs a command with extra environment variables, passing our signals on to it,
 * and resolves to its exit code: its own code, 128 + the signal number when a
 * signal ended it (the shell convention), 127 when it cannot be found and 126
 * when it cannot be executed.
 */
export function runWithEnvironment(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  /** Told why the command could not start (before the exit code is resolved). */
  onStartFailure: (code: "command_not_found" | "command_not_executable", message: string) => void,
): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: "inherit", env });
    const forward = (signal: NodeJS.Signals) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    };
    for (const signal of forwarded) process.on(signal, forward);
    const done = (code: number) => {
      for (const signal of forwarded) process.off(signal, forward);
      resolve(code);
    };
    child.on("error", (error: NodeJS.ErrnoException) => {
      // After a successful start, an error (a failed kill) does not end the child: wait for its exit.
      if (child.pid !== undefined) return;
      const notFound = error.code === "ENOENT";
      onStartFailure(
        notFound ? "command_not_found" : "command_not_executable",
        `cannot run "${command}": ${notFound ? "command not found" : error.message}`,
      );
      done(notFound ? 127 : 126);
    });
    child.once("exit", (code, signal) => {
      if (code !== null) done(code);
      else done(128 + (signal ? (constants.signals[signal] ?? 0) : 0));
    });
  });
}
