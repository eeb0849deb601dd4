import { pino, type DestinationStream, type Logger } from "pino";

export type { Logger };

/**
 * Structured JSON logs. Request logs carry method, route pattern, status and
 * timing, never headers or bodies; the redact list is a second line of defence
 * should a credential-bearing object ever be logged.
 */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: "gatehouse" },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: {
        paths: [
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
        ],
        censor: "[redacted]",
      },
      serializers: { err: pino.stdSerializers.err },
    },
    destination ?? pino.destination({ dest: 1, sync: false }),
  );
}
