import {
  createTraceState,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Attributes,
  type Context,
  type Span,
  type SpanContext,
  type Tracer,
} from "@opentelemetry/api";
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import type { IncomingHttpHeaders } from "node:http";
import type { GatewayTracer, RequestSpan, TrySpan } from "../gateway/gateway-tracer.js";
import { packageVersion } from "../cli/program.js";
import { codeName } from "../server/error-body.js";
import type { RpcTracer, Tracing } from "./create-tracing.js";
import { formatTraceparent, readTraceContext } from "./trace-context.js";
import type { TracingSettings } from "./tracing-settings.js";

/**
 * Spans exported over OTLP with the OpenTelemetry SDK, loaded only when the
 * OpenTelemetry variables ask for it (create-tracing.ts). Parents are passed
 * explicitly, so no context manager (AsyncLocalStorage) runs and nothing
 * global is registered. Attribute names follow the OpenTelemetry semantic
 * conventions for HTTP and RPC spans
 * (https://opentelemetry.io/docs/specs/semconv/http/http-spans/,
 * https://opentelemetry.io/docs/specs/semconv/rpc/); what may never be an
 * attribute is listed in docs/security.md, "Tracing".
 */
export async function createOtelTracing(settings: TracingSettings, defaultServiceName: string): Promise<Tracing> {
  const version = packageVersion();
  const { OTLPTraceExporter } =
    settings.protocol === "http/json"
      ? await import("@opentelemetry/exporter-trace-otlp-http")
      : await import("@opentelemetry/exporter-trace-otlp-proto");
  // Later resources win: the default name, then OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
  const resource = defaultResource()
    .merge(resourceFromAttributes({ "service.name": defaultServiceName, "service.version": version }))
    .merge(detectResources({ detectors: [envDetector] }));
  const provider = new BasicTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  const tracer = provider.getTracer("gatehouse", version);
  return {
    exporting: true,
    gateway: createGatewaySpans(tracer),
    rpc: createRpcSpans(tracer),
    shutdown: () => provider.shutdown(),
  };
}

/** The caller's span as the parent of ours, or none (a new trace). */
function parentOf(headers: IncomingHttpHeaders): Context {
  const context = readTraceContext(headers);
  if (context === undefined) return ROOT_CONTEXT;
  const parent: SpanContext = {
    traceId: context.parent.traceId,
    spanId: context.parent.parentId,
    traceFlags: context.parent.sampled ? TraceFlags.SAMPLED : TraceFlags.NONE,
    isRemote: true,
  };
  if (context.tracestate !== undefined) parent.traceState = createTraceState(context.tracestate);
  return trace.setSpanContext(ROOT_CONTEXT, parent);
}

/** Methods the HTTP conventions name; any other is `_OTHER`, with the method in `http.request.method_original`. */
const knownMethods: ReadonlyMap<string, Attributes> = new Map(
  ["CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE", "QUERY"].map((method) => [
    method,
    Object.freeze({ "http.request.method": method }),
  ]),
);

/** A span's method attributes: for a known method, one object made once (the SDK copies what it is given). */
function methodAttributes(method: string): Attributes {
  return knownMethods.get(method) ?? { "http.request.method": "_OTHER", "http.request.method_original": method };
}

/**
 * A target's attributes: its host and port, from its URL as configured
 * (which holds no credentials, query or fragment: docs/gateway.md). The
 * request's own path and query are never recorded (`url.full` is left out):
 * they can carry tokens. Few attributes on purpose: each one is encoded in
 * every export, and spans are made per request.
 */
function targetAttributes(target: string): Attributes {
  try {
    const url = new URL(target);
    const address = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
    return { "server.address": address, "server.port": url.port === "" ? (url.protocol === "https:" ? 443 : 80) : Number(url.port) };
  } catch {
    return {};
  }
}

/** One server span per request through the gateway, one client span per try. */
function createGatewaySpans(tracer: Tracer): GatewayTracer {
  /** Targets come from the configuration: a few, parsed once (forgotten when a configuration names many). */
  const targets = new Map<string, Attributes>();
  const attributesOf = (target: string): Attributes => {
    let attributes = targets.get(target);
    if (attributes === undefined) {
      if (targets.size >= 1024) targets.clear();
      attributes = targetAttributes(target);
      targets.set(target, attributes);
    }
    return attributes;
  };
  return {
    request(headers, method) {
      const span = tracer.startSpan(method, { kind: SpanKind.SERVER, attributes: methodAttributes(method) }, parentOf(headers));
      return new ServerSpan(tracer, span, method, attributesOf);
    },
  };
}

class ServerSpan implements RequestSpan {
  /** The parent of this request's client spans, made on the first try. */
  private context: Context | undefined = undefined;

  constructor(
    private readonly tracer: Tracer,
    private readonly span: Span,
    private readonly method: string,
    private readonly targetAttributes: (target: string) => Attributes,
  ) {}

  route(name: string): void {
    // The route's name stands for the path template (`http.route`); the span is named after it.
    this.span.setAttribute("http.route", name);
    this.span.updateName(`${this.method} ${name}`);
  }

  answeredBy(step: string): void {
    this.span.setAttribute("gatehouse.gateway.answered_by", step);
  }

  tryStart(target: string, attempt: number): TrySpan {
    const attributes: Attributes = { ...methodAttributes(this.method), ...this.targetAttributes(target) };
    // The conventions count resends: the first try is not one.
    if (attempt > 1) attributes["http.request.resend_count"] = attempt - 1;
    this.context ??= trace.setSpan(ROOT_CONTEXT, this.span);
    const span = this.tracer.startSpan(this.method, { kind: SpanKind.CLIENT, attributes }, this.context);
    return new ClientSpan(span);
  }

  end(status: number): void {
    this.span.setAttribute("http.response.status_code", status);
    // Server spans: a 5xx is an error, a 4xx is the client's (HTTP conventions, "Status").
    if (status >= 500) {
      this.span.setAttribute("error.type", String(status));
      this.span.setStatus({ code: SpanStatusCode.ERROR });
    }
    this.span.end();
  }
}

class ClientSpan implements TrySpan {
  readonly headers: readonly string[];

  constructor(private readonly span: Span) {
    const context = span.spanContext();
    const traceparent = formatTraceparent(
      context.traceId,
      context.spanId,
      (context.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED,
    );
    const tracestate = context.traceState?.serialize();
    this.headers = tracestate ? ["traceparent", traceparent, "tracestate", tracestate] : ["traceparent", traceparent];
  }

  end(status: number, failure?: string): void {
    const span = this.span;
    if (status > 0) span.setAttribute("http.response.status_code", status);
    // Client spans: a 4xx or 5xx, or no answer at all, is an error.
    if (failure !== undefined || status >= 400) {
      span.setAttribute("error.type", failure ?? String(status));
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
  }
}

/** Codes a server's span marks as errors: the server's failures, not the caller's (RPC conventions, gRPC and Connect status). */
const serverErrorCodes: ReadonlySet<string> = new Set([
  "unknown",
  "deadline_exceeded",
  "unimplemented",
  "internal",
  "unavailable",
  "data_loss",
]);

/** One server span per platform RPC, on every door, made when the pipeline counts the call (observability.ts). */
function createRpcSpans(tracer: Tracer): RpcTracer {
  const origin = performance.timeOrigin;
  return (call) => {
    const procedure = call.procedure;
    const service = procedure.service.typeName;
    const method = procedure.method.name;
    const code = codeName(call.code);
    const grpc = call.protocol === "grpc" || call.protocol === "grpc_web";
    const attributes: Attributes = {
      "rpc.system": grpc ? "grpc" : "connect_rpc",
      "rpc.service": service,
      "rpc.method": method,
      "gatehouse.rpc.protocol": call.protocol,
      "gatehouse.rpc.code": code,
    };
    if (grpc) attributes["rpc.grpc.status_code"] = call.code ?? 0;
    else if (call.code !== undefined) attributes["rpc.connect_rpc.error_code"] = code;
    if (call.protocol === "rest") {
      // The REST shim's pattern (its path template, ids as {placeholders}), never the path as sent.
      Object.assign(attributes, methodAttributes(call.requestMethod));
      attributes["http.route"] = call.route;
    }
    const span = tracer.startSpan(
      `${service}/${method}`,
      { kind: SpanKind.SERVER, attributes, startTime: origin + call.startedAt },
      parentOf(call.source.headers),
    );
    if (serverErrorCodes.has(code)) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  };
}
