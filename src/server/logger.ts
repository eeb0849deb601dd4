import { pino, type DestinationStream, type Logger } from "pino";

export type { Logger };

export interface Loggers {
  /** The application's logger; redacts credential-bearing fields should one ever be logged. */
  app: Logger;
  /**
   * Request logs: method, route pattern, status and timing only, never headers or
   * bodies, so they skip the redaction pass (a measurable cost on every request).
   */
  requests: Logger;
  /** Writes out whatever is buffered, synchronously: call it last, before the process exits. */
  flush(): void;
}

/**
 * Log lines are gathered into writes of up to this many bytes instead of one
 * system call per line (under load, a line per request is most of a cheap
 * request's cost); a timer writes out what a quiet server has gathered.
 */
const bufferBytes = 8 * 1024;
const flushIntervalMs = 250;

const redactPaths = [
  "authorization",
  "*.authorization",
  "headers",
  "*.headers",
  "password",
  "*.password",
  "new_password",
  "token",
  "*.token",
  "value",
  "encrypted_value",
  "*.encrypted_value",
];

/** Structured JSON logs on one stream. */
export function createLoggers(level: string, destination?: DestinationStream): Loggers {
  const stdout = destination ? undefined : pino.destination({ dest: 1, sync: false, minLength: bufferBytes });
  if (stdout) {
    const timer = setInterval(() => stdout.flush(), flushIntervalMs);
    timer.unref();
    stdout.once("close", () => clearInterval(timer));
    // Whatever is still gathered when the process ends (a fatal error, process.exit) is written out.
    process.once("exit", () => flushQuietly(stdout));
  }
  const base = pino(
    {
      level,
      base: { service: "gatehouse" },
      // Milliseconds since the epoch (pino's default): a fraction of the cost of an ISO string on every line.
      timestamp: pino.stdTimeFunctions.epochTime,
      serializers: { err: pino.stdSerializers.err },
    },
    destination ?? stdout,
  );
  return {
    app: base.child({}, { redact: { paths: redactPaths, censor: "[redacted]" } }),
    requests: base,
    flush() {
      if (stdout) flushQuietly(stdout);
      else base.flush();
    },
  };
}

function flushQuietly(stream: { flushSync(): void }): void {
  try {
    stream.flushSync();
  } catch {
    // Not open yet, or already closed: nothing gathered can be written any more.
  }
}
