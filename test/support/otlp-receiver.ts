import { BinaryReader, type WireType } from "@bufbuild/protobuf/wire";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { gunzipSync } from "node:zlib";

/** One exported span, whichever encoding carried it. */
export interface ReceivedSpan {
  /** The resource's service.name. */
  service: string;
  traceId: string;
  spanId: string;
  /** "" for a root span. */
  parentSpanId: string;
  traceState: string;
  name: string;
  kind: "internal" | "server" | "client" | "producer" | "consumer" | "unspecified";
  attributes: Record<string, string | number | boolean>;
  /** 0 unset, 1 ok, 2 error. */
  status: number;
}

export interface OtlpReceiver {
  /** The OTLP/HTTP base address: OTEL_EXPORTER_OTLP_ENDPOINT (traces arrive at /v1/traces). */
  url: string;
  spans: ReceivedSpan[];
  /** Each export request as received: its path, content type and (decompressed) body. */
  requests: { path: string; contentType: string; body: Buffer }[];
  close(): Promise<void>;
}

const kinds: ReceivedSpan["kind"][] = ["unspecified", "internal", "server", "client", "producer", "consumer"];

type AnyValue = { stringValue?: string; boolValue?: boolean; intValue?: string | number; doubleValue?: number };
interface JsonSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  traceState?: string;
  name: string;
  kind: number;
  attributes?: { key: string; value: AnyValue }[];
  status?: { code?: number };
}
interface JsonRequest {
  resourceSpans?: {
    resource?: { attributes?: { key: string; value: AnyValue }[] };
    scopeSpans?: { spans?: JsonSpan[] }[];
  }[];
}

function plainValue(value: AnyValue): string | number | boolean {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  return "";
}

const attributesOf = (list: { key: string; value: AnyValue }[] = []) =>
  Object.fromEntries(list.map(({ key, value }) => [key, plainValue(value)]));

/** OTLP/JSON (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding): ids are hex, enums numbers. */
function spansOfJson(request: JsonRequest): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of request.resourceSpans ?? []) {
    const service = String(attributesOf(resourceSpans.resource?.attributes)["service.name"] ?? "");
    for (const scope of resourceSpans.scopeSpans ?? []) {
      for (const span of scope.spans ?? []) {
        spans.push({
          service,
          traceId: span.traceId,
          spanId: span.spanId,
          parentSpanId: span.parentSpanId ?? "",
          traceState: span.traceState ?? "",
          name: span.name,
          kind: kinds[span.kind] ?? "unspecified",
          attributes: attributesOf(span.attributes),
          status: span.status?.code ?? 0,
        });
      }
    }
  }
  return spans;
}

/**
 * OTLP/protobuf read field by field from the wire format, with the field
 * numbers of opentelemetry-proto's trace/v1/trace.proto and
 * common/v1/common.proto: ExportTraceServiceRequest.resource_spans = 1;
 * ResourceSpans.resource = 1, scope_spans = 2; Resource.attributes = 1;
 * ScopeSpans.spans = 2; Span.trace_id = 1, span_id = 2, trace_state = 3,
 * parent_span_id = 4, name = 5, kind = 6, attributes = 9, status = 15;
 * Status.code = 3; KeyValue.key = 1, value = 2; AnyValue.string_value = 1,
 * bool_value = 2, int_value = 3, double_value = 4.
 */
function fields(bytes: Uint8Array, each: (field: number, reader: BinaryReader, wireType: WireType) => void): void {
  const reader = new BinaryReader(bytes);
  while (reader.pos < reader.len) {
    const [field, wireType] = reader.tag();
    const before = reader.pos;
    each(field, reader, wireType);
    if (reader.pos === before) reader.skip(wireType);
  }
}

function anyValueOf(bytes: Uint8Array): AnyValue {
  const value: AnyValue = {};
  fields(bytes, (field, reader) => {
    if (field === 1) value.stringValue = reader.string();
    else if (field === 2) value.boolValue = reader.bool();
    else if (field === 3) value.intValue = String(reader.int64());
    else if (field === 4) value.doubleValue = reader.double();
  });
  return value;
}

function keyValueOf(bytes: Uint8Array): { key: string; value: AnyValue } {
  let key = "";
  let value: AnyValue = {};
  fields(bytes, (field, reader) => {
    if (field === 1) key = reader.string();
    else if (field === 2) value = anyValueOf(reader.bytes());
  });
  return { key, value };
}

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");

function spanOf(bytes: Uint8Array): JsonSpan {
  const span: JsonSpan = { traceId: "", spanId: "", name: "", kind: 0, attributes: [] };
  fields(bytes, (field, reader) => {
    if (field === 1) span.traceId = hex(reader.bytes());
    else if (field === 2) span.spanId = hex(reader.bytes());
    else if (field === 3) span.traceState = reader.string();
    else if (field === 4) span.parentSpanId = hex(reader.bytes());
    else if (field === 5) span.name = reader.string();
    else if (field === 6) span.kind = reader.int32();
    else if (field === 9) span.attributes!.push(keyValueOf(reader.bytes()));
    else if (field === 15) {
      const status: { code?: number } = {};
      fields(reader.bytes(), (statusField, statusReader) => {
        if (statusField === 3) status.code = statusReader.int32();
      });
      span.status = status;
    }
  });
  return span;
}

function spansOfProtobuf(body: Uint8Array): ReceivedSpan[] {
  const request: JsonRequest = { resourceSpans: [] };
  fields(body, (field, reader) => {
    if (field !== 1) return;
    const resourceSpans: NonNullable<JsonRequest["resourceSpans"]>[number] = { resource: { attributes: [] }, scopeSpans: [] };
    fields(reader.bytes(), (rsField, rsReader) => {
      if (rsField === 1) {
        fields(rsReader.bytes(), (resourceField, resourceReader) => {
          if (resourceField === 1) resourceSpans.resource!.attributes!.push(keyValueOf(resourceReader.bytes()));
        });
      } else if (rsField === 2) {
        const spans: JsonSpan[] = [];
        fields(rsReader.bytes(), (scopeField, scopeReader) => {
          if (scopeField === 2) spans.push(spanOf(scopeReader.bytes()));
        });
        resourceSpans.scopeSpans!.push({ spans });
      }
    });
    request.resourceSpans!.push(resourceSpans);
  });
  return spansOfJson(request);
}

/**
 * A real OTLP/HTTP trace receiver (https://opentelemetry.io/docs/specs/otlp/#otlphttp):
 * POST /v1/traces in application/json or application/x-protobuf, gzip or
 * not, answered with an empty ExportTraceServiceResponse.
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests: OtlpReceiver["requests"] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const raw = Buffer.concat(chunks);
      const body = req.headers["content-encoding"] === "gzip" ? gunzipSync(raw) : raw;
      const contentType = req.headers["content-type"] ?? "";
      requests.push({ path: req.url ?? "", contentType, body });
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        res.writeHead(404).end();
        return;
      }
      try {
        if (contentType.startsWith("application/json")) {
          spans.push(...spansOfJson(JSON.parse(body.toString("utf8")) as JsonRequest));
          res.writeHead(200, { "content-type": "application/json" }).end("{}");
        } else if (contentType.startsWith("application/x-protobuf")) {
          spans.push(...spansOfProtobuf(body));
          res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
        } else {
          res.writeHead(415).end();
        }
      } catch {
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
