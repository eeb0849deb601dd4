import type { Logger } from "../server/logger.js";

/** One answered request, as the access log records it. */
export interface AccessEntry {
  reqId: string;
  /** The route's name; "_unmatched" when none served it. */
  route: string;
  method: string;
  status: number;
  /** The upstream's status, or null when the gateway answered itself. */
  upstreamStatus: number | null;
  ms: number;
  /** The TCP peer address. */
  client: string;
  /** The target the balancer chose (of the last try), or null when no target was asked. */
  target: string | null;
  /** Tries made: 0 when the gateway answered itself, more than 1 after retries. */
  tries: number;
}

export type AccessLog = (entry: AccessEntry) => void;

/**
 * One JSON line per request through the platform's pino logger: request id,
 * route, method, status, upstream status, duration, client address, and the
 * target the balancer chose with the number of tries. By
 * construction it holds nothing a request carried beyond its method, so no
 * Authorization header, token, key or secret value can reach it.
 */
export function createAccessLog(logger: Logger): AccessLog {
  // The entry's fields are fixed and none is sensitive, so the application logger's redaction
  // (a deep clone of every logged object, a visible cost per proxied request) is turned off here.
  const log = logger.child({ component: "gateway" }, { redact: { paths: [] } });
  if (!log.isLevelEnabled("info")) return () => {};
  return (entry) => log.info(entry, "request");
}
