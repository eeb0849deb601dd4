import { randomFillSync } from "node:crypto";

/** Where trace and span ids come from (a seam: tests give fixed bytes). */
export interface TraceIds {
  /** 32 lower-case hex digits, not all zero (W3C Trace Context section 3.2.2.3). */
  traceId(): string;
  /** 16 lower-case hex digits, not all zero (section 3.2.2.4). */
  spanId(): string;
}

/** Random bytes drawn at once: one draw serves 256 span ids. */
const poolBytes = 4096;

/**
 * Ids cut from a pool of random hex refilled 4 KiB at a time: trace ids
 * should be random (section 3.2.2.3 and "Privacy considerations") but are
 * no secret, and a draw from the system's generator per request would cost
 * more than the rest of the propagation.
 */
export function createTraceIds(fill: (bytes: Uint8Array) => void = randomFillSync): TraceIds {
  const bytes = Buffer.allocUnsafe(poolBytes);
  let pool = "";
  let at = 0;
  const take = (length: number, zero: string): string => {
    for (;;) {
      if (at + length > pool.length) {
        fill(bytes);
        pool = bytes.toString("hex");
        at = 0;
      }
      const id = pool.slice(at, at + length);
      at += length;
      if (id !== zero) return id;
    }
  };
  return {
    traceId: () => take(32, "00000000000000000000000000000000"),
    spanId: () => take(16, "0000000000000000"),
  };
}
