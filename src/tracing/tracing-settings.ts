/** The OTLP encodings the exporter speaks over HTTP (the `grpc` transport is not bundled). */
export type OtlpProtocol = "http/protobuf" | "http/json";

/**
 * Tracing as the standard OpenTelemetry variables configure it
 * (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/
 * and .../protocol/exporter/): read once at start. The endpoint, headers,
 * timeout and compression are read by the OTLP exporter itself, the sampler
 * (OTEL_TRACES_SAMPLER) and batching (OTEL_BSP_*) by the SDK, the resource
 * (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) by its environment detector.
 */
export interface TracingSettings {
  /** OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL, else the spec's default http/protobuf. */
  protocol: OtlpProtocol;
}

interface SettingProblem {
  field: string;
  description: string;
}

const protocols: readonly string[] = ["http/protobuf", "http/json"];

function readEndpoint(env: Record<string, string | undefined>, name: string, problems: SettingProblem[]): boolean {
  const raw = env[name]?.trim();
  if (!raw) return false;
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== "http:" && url.protocol !== "https:")) {
    problems.push({ field: name, description: "must be an http:// or https:// URL (an OTLP/HTTP receiver, e.g. http://127.0.0.1:4318)" });
  }
  return true;
}

/**
 * The tracing settings, or undefined when spans are not exported: neither
 * OTEL_EXPORTER_OTLP_ENDPOINT nor OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set,
 * OTEL_SDK_DISABLED is true, or OTEL_TRACES_EXPORTER is none. Problems are
 * added to `problems`.
 */
export function readTracingSettings(env: Record<string, string | undefined>, problems: SettingProblem[]): TracingSettings | undefined {
  const general = readEndpoint(env, "OTEL_EXPORTER_OTLP_ENDPOINT", problems);
  const traces = readEndpoint(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", problems);
  if (!general && !traces) return undefined;
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return undefined;
  const exporter = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase();
  if (exporter === "none") return undefined;
  if (exporter && exporter !== "otlp") {
    problems.push({ field: "OTEL_TRACES_EXPORTER", description: `must be otlp or none, got "${exporter}"` });
  }
  const specific = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim();
  const name = specific ? "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" : "OTEL_EXPORTER_OTLP_PROTOCOL";
  const protocol = (specific || env.OTEL_EXPORTER_OTLP_PROTOCOL?.trim()) ?? "";
  if (protocol !== "" && !protocols.includes(protocol)) {
    problems.push({ field: name, description: `must be http/protobuf or http/json (OTLP over HTTP), got "${protocol}"` });
  }
  return { protocol: protocol === "http/json" ? "http/json" : "http/protobuf" };
}
