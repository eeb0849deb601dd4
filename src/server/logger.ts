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
}

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
  const base = pino(
    {
      level,
      base: { service: "gatehouse" },
      timestamp: pino.stdTimeFunctions.isoTime,
      serializers: { err: pino.stdSerializers.err },
    },
    destination ?? pino.destination({ dest: 1, sync: false }),
  );
  return { app: base.child({}, { redact: { paths: redactPaths, censor: "[redacted]" } }), requests: base };
}
