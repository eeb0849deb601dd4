import { pino, type DestinationStream, type Logger } from "pino";

export type { Logger };

/**
 * Logs one answered HTTP request that is not an RPC call (a page, the JWKS,
 * an unknown path). reqId is the server's or a validated client id; route is
 * a label from the server's own tables, never the raw path.
 */
export type RequestLog = (reqId: string, method: string, route: string, status: number, ms: number) => void;

/**
 * Logs one RPC call, whatever its door: its procedure, protocol and outcome
 * (the Connect code, "ok" on success). route is the REST pattern or the RPC path.
 */
export type RpcLog = (reqId: string, method: string, route: string, procedure: string, protocol: string, code: string, ms: number) => void;

export interface Loggers {
  /** The application's logger; redacts credential-bearing fields should one ever be logged. */
  app: Logger;
  /**
   * The line logged for every request that is not an RPC call: method, route
   * label, status and timing only, never headers or bodies. The same JSON line
   * pino would write at info level, rendered by one template: on the cheapest
   * requests pino's generic serialisation was the largest cost we control.
   */
  request: RequestLog;
  /** The line logged once for every RPC call, on every door (same template approach). */
  rpc: RpcLog;
  /** Writes out whatever is buffered, synchronously: call it last, before the process exits. */
  flush(): void;
}

/**
 * Log lines are gathered into writes of up to this many bytes instead of one
 * system call per line (under load, a line per request is most of a cheap
 * request's cost); a timer writes out what a quiet server has gathered.
 */
const bufferBytes = 64 * 1024;
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

/**
 * Gathers log lines and hands them to the output stream as one string per
 * `bufferBytes`. The stream's own gathering (sonic-boom's minLength) measures
 * the UTF-8 length of everything gathered so far on every line, which under
 * load cost more than the line itself.
 */
class LineBatch implements DestinationStream {
  private lines: string[] = [];
  private chars = 0;

  constructor(private readonly out: ReturnType<typeof pino.destination>) {}

  write(line: string): void {
    this.lines.push(line);
    this.chars += line.length;
    if (this.chars >= bufferBytes) this.drain();
  }

  /** Hands what is gathered to the stream, which writes it without blocking. */
  drain(): void {
    if (this.lines.length === 0) return;
    const chunk = this.lines.length === 1 ? (this.lines[0] as string) : this.lines.join("");
    this.lines = [];
    this.chars = 0;
    this.out.write(chunk);
  }

  flushSync(): void {
    this.drain();
    this.out.flushSync();
  }

  once(event: "close", listener: () => void): void {
    this.out.once(event, listener);
  }
}

/** Structured JSON logs on one stream. */
export function createLoggers(level: string, destination?: DestinationStream): Loggers {
  const stdout = destination ? undefined : new LineBatch(pino.destination({ dest: 1, sync: false }));
  if (stdout) {
    const timer = setInterval(() => stdout.drain(), flushIntervalMs);
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
  const out: DestinationStream = destination ?? (stdout as DestinationStream);
  const infoLevel = pino.levels.values.info as number;
  const quiet = base.levelVal > infoLevel;
  const head = () => `{"level":${infoLevel},"time":${Date.now()},"service":"gatehouse","reqId":`;
  const request: RequestLog = quiet
    ? () => {}
    : (reqId, method, route, status, ms) => {
        out.write(
          `${head()}${JSON.stringify(reqId)},"method":${quoted(method)},"route":${quoted(route)},"status":${status},"ms":${ms},"msg":"request"}\n`,
        );
      };
  const rpc: RpcLog = quiet
    ? () => {}
    : (reqId, method, route, procedure, protocol, code, ms) => {
        out.write(
          `${head()}${JSON.stringify(reqId)},"method":${quoted(method)},"route":${quoted(route)},"rpc":${quoted(procedure)},` +
            `"protocol":${quoted(protocol)},"code":${quoted(code)},"ms":${ms},"msg":"rpc"}\n`,
        );
      };
  return {
    app: base.child({}, { redact: { paths: redactPaths, censor: "[redacted]" } }),
    request,
    rpc,
    flush() {
      if (stdout) flushQuietly(stdout);
      else base.flush();
    },
  };
}

/**
 * JSON strings of the few values a request line repeats (methods, route
 * patterns, protocols), each quoted once; a bounded number, so an unexpected
 * variety is quoted every time rather than kept.
 */
const quotedValues = new Map<string, string>();
function quoted(value: string): string {
  let json = quotedValues.get(value);
  if (json === undefined) {
    json = JSON.stringify(value);
    if (quotedValues.size < 4096) quotedValues.set(value, json);
  }
  return json;
}

function flushQuietly(stream: { flushSync(): void }): void {
  try {
    stream.flushSync();
  } catch {
    // Not open yet, or already closed: nothing gathered can be written any more.
  }
}
