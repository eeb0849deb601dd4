import type { IncomingHttpHeaders } from "node:http";
import type { GatewayTracer, RequestSpan, TrySpan } from "../gateway/gateway-tracer.js";
import { formatTraceparent, readTraceContext } from "./trace-context.js";
import { createTraceIds, type TraceIds } from "./trace-ids.js";

/**
 * W3C Trace Context without exporting anything (no OpenTelemetry variables):
 * a caller's valid traceparent is continued (same trace id, the gateway's
 * span as the new parent id, its sampled flag and tracestate kept), anything
 * else starts a trace that is not sampled, since nothing records it
 * (https://www.w3.org/TR/trace-context/#sampled-flag). Work is done only for
 * requests that reach a target, once per request: every try carries the
 * same traceparent.
 */
export function createPropagatingTracer(ids: TraceIds = createTraceIds()): GatewayTracer {
  return {
    request: (headers) => new PropagatedRequest(ids, headers),
  };
}

class PropagatedRequest implements RequestSpan, TrySpan {
  private trace: readonly string[] | undefined = undefined;

  constructor(
    private readonly ids: TraceIds,
    private readonly incoming: IncomingHttpHeaders,
  ) {}

  get headers(): readonly string[] {
    if (this.trace === undefined) {
      const context = readTraceContext(this.incoming);
      if (context === undefined) {
        this.trace = ["traceparent", formatTraceparent(this.ids.traceId(), this.ids.spanId(), false)];
      } else {
        const traceparent = formatTraceparent(context.parent.traceId, this.ids.spanId(), context.parent.sampled);
        this.trace =
          context.tracestate === undefined ? ["traceparent", traceparent] : ["traceparent", traceparent, "tracestate", context.tracestate];
      }
    }
    return this.trace;
  }

  route(): void {}
  answeredBy(): void {}
  /** The request's end and a try's end alike: nothing is recorded. */
  end(): void {}

  tryStart(): TrySpan {
    return this;
  }
}
