import { type ErrorReport, formatErrorJson, formatErrorText } from "./errors.js";

/** The streams a run writes to (process.stdout and process.stderr, or test doubles). */
export interface OutputStreams {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
}

export interface OutputOptions extends OutputStreams {
  /** The global --json: results as JSON on stdout, errors as one JSON line on stderr. */
  json: boolean;
  /** How long work runs before a progress line appears (on a terminal only). */
  progressDelayMs?: number;
}

/** Where a command's results, errors and progress go. */
export interface Output {
  readonly json: boolean;
  /** Text on stdout; nothing once its reader has gone (`| head -1`). */
  write(text: string): void;
  /** A command's result: `value` as JSON with --json, else `text` (rendered only then). */
  result(value: unknown, text: () => string): void;
  /** Text on stderr that is not an error (a prompt); never in --json mode. */
  note(text: string): void;
  /** An error, printed once: one JSON line with --json, else `gatehouse: ...` lines. */
  error(report: ErrorReport, hint?: string): void;
  /**
   * Runs `work`; if it takes longer than about a second and stderr is a
   * terminal, shows `message` on stderr meanwhile and clears it afterwards.
   * Never on stdout, and never on a pipe or a file (a log gains nothing from it).
   */
  progress<T>(message: string, work: () => Promise<T>): Promise<T>;
  /**
   * A progress line for long work that can count (a rotation's batches): each
   * update replaces the line on stderr, at most every 200 ms, and done() erases
   * it. Only when stderr is a terminal, as for progress().
   */
  meter(): { update(text: string): void; done(): void };
}

/**
 * Makes writes to a closed pipe harmless. A reader that stops early (`| head -1`)
 * closes the pipe; the next write fails with EPIPE, which Node reports as an
 * 'error' event that would otherwise crash the process with a stack trace.
 * (SIGPIPE itself is ignored by Node, so EPIPE is the only way it shows.) The
 * command finishes its work and exits with its own code; its remaining output
 * is dropped, which is what the reader asked for.
 */
export function guardPipes(streams: OutputStreams): { closed(stream: "stdout" | "stderr"): boolean } {
  const closed = { stdout: false, stderr: false };
  for (const name of ["stdout", "stderr"] as const) {
    streams[name].on("error", (error: NodeJS.ErrnoException) => {
      closed[name] = true;
      // Anything else (EIO on a vanished terminal) has nowhere left to be reported either.
      if (error.code !== "EPIPE" && error.code !== "ERR_STREAM_DESTROYED") process.exitCode ||= 1;
    });
  }
  return { closed: (name) => closed[name] };
}

export function createOutput(options: OutputOptions, pipes = guardPipes(options)): Output {
  const { stdout, stderr, json } = options;
  const delayMs = options.progressDelayMs ?? 1000;
  const toStdout = (text: string) => {
    if (!pipes.closed("stdout")) stdout.write(text);
  };
  const toStderr = (text: string) => {
    if (!pipes.closed("stderr")) stderr.write(text);
  };
  return {
    json,
    write: toStdout,
    result(value, text) {
      toStdout(json ? `${JSON.stringify(value, null, 2)}\n` : text());
    },
    note(text) {
      if (!json) toStderr(text);
    },
    error(report, hint) {
      if (json) toStderr(formatErrorJson(report));
      else toStderr(`${formatErrorText(report)}${hint ? `${hint}\n` : ""}`);
    },
    meter() {
      let shown = false;
      let last = 0;
      return {
        update(text) {
          if (stderr.isTTY !== true || Date.now() - last < 200) return;
          last = Date.now();
          shown = true;
          toStderr(`\r\x1b[Kgatehouse: ${text}`);
        },
        done() {
          if (shown) toStderr("\r\x1b[K");
          shown = false;
        },
      };
    },
    async progress(message, work) {
      if (stderr.isTTY !== true) return work();
      let shown = false;
      const timer = setTimeout(() => {
        shown = true;
        toStderr(`gatehouse: ${message}…`);
      }, delayMs);
      timer.unref();
      try {
        return await work();
      } finally {
        clearTimeout(timer);
        // Erase the line, so what follows starts on a clean one.
        if (shown) toStderr("\r\x1b[K");
      }
    },
  };
}
