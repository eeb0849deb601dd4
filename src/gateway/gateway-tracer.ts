import type { IncomingHttpHeaders } from "node:http";

/**
 * What the gateway tells a tracer about each request (docs/gateway.md,
 * "Tracing"): W3C Trace Context (https://www.w3.org/TR/trace-context/) is
 * taken part in always, spans are exported over OTLP only when the standard
 * OpenTelemetry variables are set (src/tracing/). Nothing here ever sees a
 * credential, a token, a secret or a body.
 */
export interface GatewayTracer {
  /** A request arrived (its headers carry the caller's traceparent and tracestate, if any). */
  request(headers: IncomingHttpHeaders, method: string): RequestSpan;
}

/** The server span of one request through the gateway. */
export interface RequestSpan {
  /** The route that serves the request (its name is `http.route`). */
  route(name: string): void;
  /** The step of the pipeline that answered the request itself (a plugin type, `rules`, or the gateway's own refusal). */
  answeredBy(step: string): void;
  /** A try to a target: a client span, and the headers (traceparent, tracestate) its upstream request carries. */
  tryStart(target: string, attempt: number): TrySpan;
  /** The request is answered (or the client left: 499). */
  end(status: number): void;
}

/** The client span of one try to one target. */
export interface TrySpan {
  /** traceparent and, when the caller sent one, tracestate: [name, value, ...]. */
  readonly headers: readonly string[];
  /** The try ended: the target's status, or 0 with the kind of failure (refused, reset, timeout). */
  end(status: number, failure?: string): void;
}

/** For a gateway built without a tracer (tests that feed it by hand): nothing recorded, nothing propagated. */
export const noTracer: GatewayTracer = {
  request: () => noSpan,
};
const noTry: TrySpan = { headers: [], end() {} };
const noSpan: RequestSpan = {
  route() {},
  answeredBy() {},
  tryStart: () => noTry,
  end() {},
};
