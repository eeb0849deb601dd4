import type { IncomingHttpHeaders } from "node:http";

/** A caller's `traceparent`, read (W3C Trace Context, https://www.w3.org/TR/trace-context/#traceparent-header). */
export interface TraceParent {
  /** 32 lower-case hex digits, not all zero. */
  readonly traceId: string;
  /** The caller's span: 16 lower-case hex digits, not all zero. */
  readonly parentId: string;
  /** The `sampled` flag: the caller may have recorded its part of the trace. */
  readonly sampled: boolean;
}

/**
 * version-format = trace-id "-" parent-id "-" trace-flags, lower-case hex
 * only ("Vendors MUST NOT ... upper case"); a later version may append
 * "-" and more, which a version-00 reader ignores (section 3.2.4,
 * "Versioning of traceparent").
 */
const traceparentSyntax = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-|$)/;
const zeroTraceId = "00000000000000000000000000000000";
const zeroSpanId = "0000000000000000";

/**
 * The `traceparent` of a request, or undefined when there is none or it is
 * malformed: the spec's answer to a malformed value is to start a new trace
 * (section 3.2.2, "If the vendor failed to parse traceparent, it MUST NOT
 * attempt to parse tracestate"). Node joins repeated fields with ", ", which
 * makes a repeated traceparent malformed, as section 3.2 asks.
 */
export function readTraceparent(value: string | string[] | undefined): TraceParent | undefined {
  if (typeof value !== "string" || value.length < 55) return undefined;
  const parts = traceparentSyntax.exec(value);
  if (parts === null) return undefined;
  const version = parts[1]!;
  // Version ff is invalid; version 00 is exactly 55 characters long.
  if (version === "ff" || (version === "00" && value.length !== 55)) return undefined;
  const traceId = parts[2]!;
  const parentId = parts[3]!;
  if (traceId === zeroTraceId || parentId === zeroSpanId) return undefined;
  // Only the sampled bit is defined; other flags are not propagated (section 3.2.2.5).
  return { traceId, parentId, sampled: (Number.parseInt(parts[4]!, 16) & 1) === 1 };
}

/** list-member characters: printable ASCII (section 3.3.1.3); a tracestate of anything else is dropped. */
const tracestateCharacters = /^[\x20-\x7e]*$/;

/**
 * Vendors "SHOULD propagate at least 512 characters of a combined header"
 * and truncate by removing whole entries from the end (section 3.3.1.5).
 */
const tracestateLimit = 512;

/**
 * The `tracestate` to pass on with a continued trace: the caller's, repeated
 * fields combined (section 3.3.1.1), cut to whole entries within 512
 * characters; undefined when there is none or it holds what no entry may.
 */
export function readTracestate(value: string | string[] | undefined): string | undefined {
  let state = Array.isArray(value) ? value.join(",") : value;
  if (state === undefined) return undefined;
  state = state.trim();
  if (state === "" || !tracestateCharacters.test(state)) return undefined;
  while (state.length > tracestateLimit) {
    const cut = state.lastIndexOf(",");
    if (cut === -1) return undefined;
    state = state.slice(0, cut).trimEnd();
  }
  return state === "" ? undefined : state;
}

/** A version-00 traceparent (section 3.2.2). */
export function formatTraceparent(traceId: string, spanId: string, sampled: boolean): string {
  return `00-${traceId}-${spanId}-${sampled ? "01" : "00"}`;
}

/** The caller's trace context from request headers: its traceparent and, only with a valid one, its tracestate. */
export function readTraceContext(headers: IncomingHttpHeaders): { parent: TraceParent; tracestate: string | undefined } | undefined {
  const parent = readTraceparent(headers.traceparent);
  if (parent === undefined) return undefined;
  return { parent, tracestate: readTracestate(headers.tracestate) };
}
