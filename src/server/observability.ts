import type { Code } from "@connectrpc/connect";
import type { Call, Protocol } from "./call.js";
import { codeName } from "./error-body.js";
import type { RequestLog, RpcLog } from "./logger.js";
import type { Metrics, Sample } from "./metrics.js";
import type { Procedure } from "./procedures.js";

export interface ObservabilityDeps {
  metrics: Metrics;
  logRpc: RpcLog;
  logRequest: RequestLog;
  /** A span per call when spans are exported (src/tracing/, docs/gateway.md "Tracing"); undefined: none. */
  traceRpc?: ((call: Call) => void) | undefined;
}

/** Per procedure and protocol, the sample of each outcome code (index 0: ok). */
type OutcomeSamples = Record<Protocol, (Sample | undefined)[]>;

/**
 * Counting and logging, written once: every RPC call on every door is one
 * metric sample and one log line with its request id (docs/api.md, "Protocols:
 * one implementation, several front doors"); every other answer of the platform port is one HTTP
 * sample and one log line. With spans exported, each call is one server
 * span too (docs/gateway.md, "Tracing").
 */
export function createObservability(deps: ObservabilityDeps) {
  const samples = new WeakMap<Procedure, OutcomeSamples>();

  function sampleOf(procedure: Procedure, protocol: Protocol, code: Code | undefined): Sample {
    let byProtocol = samples.get(procedure);
    if (!byProtocol) {
      byProtocol = { connect: [], grpc: [], grpc_web: [], rest: [] };
      samples.set(procedure, byProtocol);
    }
    const index = code ?? 0;
    const byCode = byProtocol[protocol];
    let sample = byCode[index];
    if (!sample) {
      sample = deps.metrics.rpcSample(procedure.service.typeName, procedure.method.name, protocol, codeName(code));
      byCode[index] = sample;
    }
    return sample;
  }

  return {
    /** The pipeline's observer: once per call, when its outcome is known. */
    call(call: Call): void {
      const seconds = (performance.now() - call.startedAt) / 1e3;
      sampleOf(call.procedure, call.protocol, call.code).add(seconds);
      deps.logRpc(
        call.requestId,
        call.requestMethod,
        call.route,
        call.procedure.path,
        call.protocol,
        codeName(call.code),
        Math.round(seconds * 1e4) / 10,
      );
      deps.traceRpc?.(call);
    },

    /**
     * A call to a path that names no served RPC (gRPC, gRPC-Web). Counted as
     * service and method "unknown": raw paths would let any client grow the
     * label set without bound, and are not logged either.
     */
    unknownRpc(requestId: string, protocol: Protocol, startedAt: number): void {
      const seconds = (performance.now() - startedAt) / 1e3;
      deps.metrics.rpcSample("unknown", "unknown", protocol, "unimplemented").add(seconds);
      deps.logRpc(requestId, "POST", "unknown", "unknown", protocol, "unimplemented", Math.round(seconds * 1e4) / 10);
    },

    /** An answer that is not an RPC call: route is a label from the server's own tables. */
    http(requestId: string, method: string, route: string, status: number, startedAt: number): void {
      const seconds = (performance.now() - startedAt) / 1e3;
      deps.metrics.httpSample(route, String(status)).add(seconds);
      deps.logRequest(requestId, method, route, status, Math.round(seconds * 1e4) / 10);
    },
  };
}

export type Observability = ReturnType<typeof createObservability>;
