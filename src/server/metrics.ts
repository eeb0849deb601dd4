import { Registry, collectDefaultMetrics } from "prom-client";

/** Latency buckets in seconds, from a cheap cached read to a slow import. */
export const latencyBuckets = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const;

/** A counter with a latency histogram, as plain numbers (rendered only on scrape). */
export class Sample {
  count = 0;
  sum = 0;
  /** Observations per bucket (not cumulative); the last slot is above the largest bound. */
  readonly perBucket = new Float64Array(latencyBuckets.length + 1);

  add(seconds: number): void {
    this.count++;
    this.sum += seconds;
    let i = 0;
    while (i < latencyBuckets.length && seconds > (latencyBuckets[i] as number)) i++;
    this.perBucket[i] = (this.perBucket[i] ?? 0) + 1;
  }
}

/**
 * Label sets -> samples, found through nested maps of the label values: the
 * values are the same few strings on every call, so each lookup reuses their
 * cached hashes (a joined key would be built and hashed anew).
 */
class SampleTree {
  private readonly root = new Map<string, unknown>();
  readonly all: { labels: string; sample: Sample }[] = [];

  constructor(private readonly names: readonly string[]) {}

  /** Up to four label values, in the order of `names`. */
  get(a: string, b: string, c?: string, d?: string): Sample {
    const values = this.names.length === 2 ? [a, b] : [a, b, c as string, d as string];
    let node: Map<string, unknown> = this.root;
    for (let i = 0; i < values.length - 1; i++) {
      const value = values[i] as string;
      let next = node.get(value) as Map<string, unknown> | undefined;
      if (!next) {
        next = new Map();
        node.set(value, next);
      }
      node = next;
    }
    const last = values[values.length - 1] as string;
    let sample = node.get(last) as Sample | undefined;
    if (!sample) {
      sample = new Sample();
      node.set(last, sample);
      this.all.push({ labels: this.names.map((name, i) => `${name}="${escapeLabel(values[i] as string)}"`).join(","), sample });
    }
    return sample;
  }
}

/**
 * Renders a counter and a histogram over the same label sets in the text
 * exposition format (0.0.4), as `promtool check metrics` wants them: HELP and
 * TYPE once per family, `_total` only on counters, seconds as the base unit.
 */
export function renderFamily(
  tree: { all: readonly { labels: string; sample: Sample }[] },
  counter: { name: string; help: string },
  histogram: { name: string; help: string },
): string {
  const lines = [`# HELP ${counter.name} ${counter.help}`, `# TYPE ${counter.name} counter`];
  for (const { labels, sample } of tree.all) lines.push(`${counter.name}{${labels}} ${sample.count}`);
  lines.push(`# HELP ${histogram.name} ${histogram.help}`, `# TYPE ${histogram.name} histogram`);
  for (const { labels, sample } of tree.all) {
    let cumulative = 0;
    latencyBuckets.forEach((bound, i) => {
      cumulative += sample.perBucket[i] ?? 0;
      lines.push(`${histogram.name}_bucket{${labels},le="${bound}"} ${cumulative}`);
    });
    lines.push(`${histogram.name}_bucket{${labels},le="+Inf"} ${sample.count}`);
    lines.push(`${histogram.name}_sum{${labels}} ${sample.sum}`);
    lines.push(`${histogram.name}_count{${labels}} ${sample.count}`);
  }
  return `${lines.join("\n")}\n`;
}

/**
 * Prometheus metrics of one platform process (docs/api.md, "Protocols: one
 * implementation, several front doors": GET /metrics):
 *
 * - `gatehouse_rpc_requests_total{service, method, protocol, code}` and
 *   `gatehouse_rpc_duration_seconds` over the same labels: every RPC call on
 *   every door and port, counted once, `code` the Connect code of its outcome;
 * - `gatehouse_http_requests_total{route, code}` and
 *   `gatehouse_http_duration_seconds`: the answers that are not RPC calls
 *   (pages, the JWKS, the SDK, metrics, unknown paths), `code` the HTTP status;
 * - the process metrics of prom-client, named `gatehouse_...`.
 *
 * The per-call series are plain counters rather than prom-client metrics:
 * prom-client hashes the label set on every observation, which on the
 * cheapest calls cost more than the rest of the bookkeeping together.
 */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "gatehouse_" });
  // prom-client names three gauges `..._total`, a suffix the exposition rules keep for counters
  // (`promtool check metrics`: "non-counter metrics should not have _total suffix"). Their figures
  // remain in the per-type gauges nodejs_active_handles, nodejs_active_requests and nodejs_active_resources.
  for (const name of ["nodejs_active_handles_total", "nodejs_active_requests_total", "nodejs_active_resources_total"]) {
    registry.removeSingleMetric(`gatehouse_${name}`);
  }
  const rpc = new SampleTree(["service", "method", "protocol", "code"]);
  const http = new SampleTree(["route", "code"]);
  const extra: (() => string)[] = [];

  return {
    registry,
    contentType: "text/plain; version=0.0.4; charset=utf-8",
    /** Labels of an RPC call; service and method come from the server's own tables, never from a raw path. */
    rpcSample(service: string, method: string, protocol: string, code: string): Sample {
      return rpc.get(service, method, protocol, code);
    },
    httpSample(route: string, code: string): Sample {
      return http.get(route, code);
    },
    /** Adds families rendered by another part of the process (the embedded gateway). */
    addFamilies(render: () => string): void {
      extra.push(render);
    },
    async text(): Promise<string> {
      const processMetrics = await registry.metrics();
      return [
        processMetrics.endsWith("\n") ? processMetrics : `${processMetrics}\n`,
        renderFamily(
          rpc,
          { name: "gatehouse_rpc_requests_total", help: "RPC calls on every door and port, by outcome (Connect code)." },
          { name: "gatehouse_rpc_duration_seconds", help: "Time from the request to the RPC's outcome." },
        ),
        renderFamily(
          http,
          {
            name: "gatehouse_http_requests_total",
            help: "HTTP answers that are not RPC calls (pages, JWKS, SDK, unknown paths), by status.",
          },
          { name: "gatehouse_http_duration_seconds", help: "Time from the request to the end of the answer." },
        ),
        ...extra.map((render) => render()),
      ].join("");
    },
  };
}

/** Label values escape backslash, double quote and line feed (text exposition format 0.0.4). */
export function escapeLabel(value: string): string {
  return /[\\"\n]/.test(value) ? value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n") : value;
}

export type Metrics = ReturnType<typeof createMetrics>;
