import { randomFillSync } from "node:crypto";
import { createPropagatingTracer } from "../../src/tracing/propagating-tracer.js";
import { formatTraceparent, readTraceparent, readTracestate } from "../../src/tracing/trace-context.js";
import { createTraceIds } from "../../src/tracing/trace-ids.js";
import { readTracingSettings } from "../../src/tracing/tracing-settings.js";

/** W3C Trace Context (https://www.w3.org/TR/trace-context/), as the gateway reads and writes it. */
const traceId = "0af7651916cd43dd8448eb211c80319c";
const parentId = "b7ad6b7169203331";
const valid = `00-${traceId}-${parentId}-01`;

describe("a traceparent is read as the spec says", () => {
  test("a valid version-00 value gives its trace id, parent id and sampled flag", () => {
    expect(readTraceparent(valid)).toEqual({ traceId, parentId, sampled: true });
    expect(readTraceparent(`00-${traceId}-${parentId}-00`)).toEqual({ traceId, parentId, sampled: false });
    // Flags other than sampled are not understood, and not carried on.
    expect(readTraceparent(`00-${traceId}-${parentId}-03`)).toEqual({ traceId, parentId, sampled: true });
  });

  test("a later version is read as version 00, with what it appends after a dash ignored", () => {
    expect(readTraceparent(`01-${traceId}-${parentId}-01-what-comes-next`)).toEqual({ traceId, parentId, sampled: true });
    expect(readTraceparent(`01-${traceId}-${parentId}-01`)).toEqual({ traceId, parentId, sampled: true });
  });

  test.each([
    ["upper-case hex", `00-${traceId.toUpperCase()}-${parentId}-01`],
    ["version ff", `ff-${traceId}-${parentId}-01`],
    ["an all-zero trace id", `00-${"0".repeat(32)}-${parentId}-01`],
    ["an all-zero parent id", `00-${traceId}-${"0".repeat(16)}-01`],
    ["version 00 with more after it", `${valid}-extra`],
    ["a later version followed by something other than a dash", `01-${traceId}-${parentId}-01x`],
    ["a short trace id", `00-${traceId.slice(1)}-${parentId}-01`],
    ["a non-hex character", `00-${traceId.slice(0, -1)}g-${parentId}-01`],
    ["no dashes", `00${traceId}${parentId}01`],
    ["two values joined (a repeated header)", `${valid}, ${valid}`],
    ["an empty value", ""],
  ])("%s is malformed (a new trace starts)", (_name, value) => {
    expect(readTraceparent(value)).toBeUndefined();
  });

  test("a repeated header Node kept as a list is malformed", () => {
    expect(readTraceparent([valid, valid])).toBeUndefined();
    expect(readTraceparent(undefined)).toBeUndefined();
  });

  test("what is written is version 00", () => {
    expect(formatTraceparent(traceId, parentId, true)).toBe(valid);
    expect(formatTraceparent(traceId, parentId, false)).toBe(`00-${traceId}-${parentId}-00`);
  });
});

describe("a tracestate is passed on within the spec's bounds", () => {
  test("repeated fields are combined and kept in order", () => {
    expect(readTracestate(["a=1,b=2", "c=3"])).toBe("a=1,b=2,c=3");
    expect(readTracestate(" vendor=opaque ")).toBe("vendor=opaque");
  });

  test("beyond 512 characters, whole entries are removed from the end", () => {
    const entries = Array.from({ length: 40 }, (_, i) => `k${i}=${"v".repeat(20)}`);
    const kept = readTracestate(entries.join(","))!;
    expect(kept.length).toBeLessThanOrEqual(512);
    expect(entries.join(",").startsWith(kept)).toBe(true);
    expect(kept.split(",").every((entry) => entries.includes(entry))).toBe(true);
  });

  test("a value with characters no entry may hold is dropped, as is an empty one", () => {
    expect(readTracestate("a=\u00e9")).toBeUndefined();
    expect(readTracestate("a=1\tb")).toBeUndefined();
    expect(readTracestate("")).toBeUndefined();
    expect(readTracestate(undefined)).toBeUndefined();
  });
});

describe("ids come from a pool of random bytes", () => {
  test("trace ids are 32 and span ids 16 lower-case hex digits, never all zero", () => {
    // The first draw is all zeros: those ids are skipped.
    let draws = 0;
    const ids = createTraceIds((bytes) => {
      bytes.fill(draws++ === 0 ? 0 : 0xab);
    });
    expect(ids.traceId()).toBe("ab".repeat(16));
    expect(ids.spanId()).toBe("ab".repeat(8));
  });

  test("the system's generator is drawn once per 4 KiB of ids", () => {
    let draws = 0;
    const ids = createTraceIds((bytes) => {
      draws++;
      randomFillSync(bytes);
    });
    const seen = new Set<string>();
    for (let i = 0; i < 1000; i++) seen.add(ids.spanId());
    expect(seen.size).toBe(1000);
    // 1000 span ids of 8 bytes: 8000 bytes, two draws of 4096.
    expect(draws).toBe(2);
    expect([...seen].every((id) => /^[0-9a-f]{16}$/.test(id))).toBe(true);
  });
});

describe("the gateway without exporting: W3C Trace Context only", () => {
  const ids = () => {
    let n = 0;
    return {
      traceId: () => `${"1".repeat(31)}${++n}`,
      spanId: () => `${"2".repeat(15)}${++n}`,
    };
  };

  test("a valid traceparent is continued with the gateway's span as parent; its tracestate goes along", () => {
    const span = createPropagatingTracer(ids()).request({ traceparent: valid, tracestate: "vendor=opaque" }, "GET");
    span.route("r");
    const first = span.tryStart("http://127.0.0.1:1", 1);
    expect(first.headers).toEqual(["traceparent", `00-${traceId}-${"2".repeat(15)}1-01`, "tracestate", "vendor=opaque"]);
    // A retry is the same span of the gateway's.
    expect(span.tryStart("http://127.0.0.1:2", 2).headers).toEqual(first.headers);
  });

  test("an unsampled caller stays unsampled", () => {
    const span = createPropagatingTracer(ids()).request({ traceparent: `00-${traceId}-${parentId}-00` }, "GET");
    expect(span.tryStart("http://127.0.0.1:1", 1).headers).toEqual(["traceparent", `00-${traceId}-${"2".repeat(15)}1-00`]);
  });

  test("without a valid traceparent a new, unsampled trace starts and a tracestate is not passed on", () => {
    for (const headers of [{}, { traceparent: valid.toUpperCase(), tracestate: "vendor=opaque" }]) {
      const span = createPropagatingTracer(ids()).request(headers, "GET");
      expect(span.tryStart("http://127.0.0.1:1", 1).headers).toEqual(["traceparent", `00-${"1".repeat(31)}1-${"2".repeat(15)}2-00`]);
    }
  });
});

describe("the OpenTelemetry variables", () => {
  const read = (env: Record<string, string>) => {
    const problems: { field: string; description: string }[] = [];
    return { settings: readTracingSettings(env, problems), problems };
  };

  test("without an endpoint nothing is exported", () => {
    expect(read({ OTEL_SERVICE_NAME: "x", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toEqual({ settings: undefined, problems: [] });
  });

  test("either endpoint turns exporting on; http/protobuf is the default protocol, the traces variable wins", () => {
    expect(read({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }).settings).toEqual({ protocol: "http/protobuf" });
    expect(
      read({
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://collector:4318/v1/traces",
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/json",
      }).settings,
    ).toEqual({ protocol: "http/json" });
  });

  test("OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn it off", () => {
    expect(read({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "TRUE" }).settings).toBeUndefined();
    expect(read({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_EXPORTER: "none" }).settings).toBeUndefined();
  });

  test("a protocol other than OTLP over HTTP, an endpoint that is no HTTP URL, another exporter: problems named by variable", () => {
    const { problems } = read({
      OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4317",
      OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
      OTEL_TRACES_EXPORTER: "zipkin",
    });
    expect(problems.map((problem) => problem.field)).toEqual([
      "OTEL_EXPORTER_OTLP_ENDPOINT",
      "OTEL_TRACES_EXPORTER",
      "OTEL_EXPORTER_OTLP_PROTOCOL",
    ]);
  });
});
