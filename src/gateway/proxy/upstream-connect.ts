import type { Socket } from "node:net";
import { buildConnector, errors } from "undici";

/**
 * undici's connector with the connect timeout on a native timer. undici runs
 * its own connect timeout on its coarse timers, which tick about every half
 * second: a `timeouts.connect_ms` of 300 would wait about a second, and the
 * documented minimum of 10 ms would mean the same second (docs/gateway.md,
 * "Upstreams, health and retries": `connect_ms` bounds the connection). The
 * error is undici's own (UND_ERR_CONNECT_TIMEOUT), so a try that timed out
 * connecting is known never to have reached its target.
 */
export function connectorWithin(timeoutMs: number): buildConnector.connector {
  const connect = buildConnector({ timeout: 0 });
  return (options, callback) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    // undici's connector returns the socket it opens (its type says void).
    const socket = connect(options, (...args) => {
      settled = true;
      clearTimeout(timer);
      callback(...args);
    }) as unknown as Socket | undefined;
    if (settled || socket === undefined) return;
    timer = setTimeout(() => {
      // As undici does: an error the socket reports in this turn of the loop wins over the time-out.
      setImmediate(() => {
        if (!settled) {
          socket.destroy(
            new errors.ConnectTimeoutError(`Connect Timeout Error (${options.hostname}:${options.port}, timeout: ${timeoutMs}ms)`),
          );
        }
      });
    }, timeoutMs);
  };
}
