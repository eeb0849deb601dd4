import type { GatewayTracer } from "../gateway/gateway-tracer.js";
import type { Call } from "../server/call.js";
import { createPropagatingTracer } from "./propagating-tracer.js";
import type { TracingSettings } from "./tracing-settings.js";

/** What a platform RPC's span is made of: the call as the pipeline counts it (src/server/observability.ts). */
export type TracedCall = Pick<Call, "procedure" | "protocol" | "code" | "startedAt" | "route" | "requestMethod" | "source">;

/** Records one platform RPC, once its outcome is known. */
export type RpcTracer = (call: TracedCall) => void;

/** Tracing for one process part (the platform, or a gateway). */
export interface Tracing {
  /** Whether spans are exported (the OpenTelemetry variables are set). */
  readonly exporting: boolean;
  /** The gateway's tracer: W3C Trace Context always, spans when exporting. */
  readonly gateway: GatewayTracer;
  /** Platform RPC spans; undefined when not exporting (nothing to do per call). */
  readonly rpc: RpcTracer | undefined;
  /** Exports what is left and stops (SIGTERM, close). */
  shutdown(): Promise<void>;
}

/**
 * Tracing from the OpenTelemetry variables (docs/gateway.md, "Tracing").
 * Without them (settings undefined) no module of the OpenTelemetry SDK is
 * loaded and nothing is exported: the gateway only takes part in W3C Trace
 * Context (https://www.w3.org/TR/trace-context/). With them the SDK is
 * imported here, once, at start.
 */
export async function createTracing(
  settings: TracingSettings | undefined,
  /** The service's name unless OTEL_SERVICE_NAME says otherwise. */
  serviceName: string,
): Promise<Tracing> {
  if (settings === undefined) {
    return { exporting: false, gateway: createPropagatingTracer(), rpc: undefined, shutdown: async () => {} };
  }
  const { createOtelTracing } = await import("./otel-tracing.js");
  return createOtelTracing(settings, serviceName);
}
