import { Registry, collectDefaultMetrics } from "prom-client";

const buckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const;

/** One route x protocol x status: plain numbers, turned into text only when scraped. */
interface Series {
  route: string;
  protocol: string;
  status: number;
  count: number;
  sum: number;
  /** Observations per bucket (not cumulative); the last slot is above the largest bound. */
  perBucket: Float64Array;
}

/**
 * Prometheus metrics of one app: requests, errors and latency per RPC and per
 * REST route, plus the process metrics of prom-client.
 *
 * The per-request series are kept here as plain counters rather than as
 * prom-client metrics: prom-client hashes the label set on every increment and
 * observation, which on the cheapest requests cost more than the rest of the
 * bookkeeping together. The label sets are few (served routes x protocols x
 * statuses), so each one is found in nested maps and rendered in the
 * exposition format on scrape.
 */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "gatehouse_" });
  const series: Series[] = [];
  // route -> protocol -> status: the route and protocol strings are the same few objects on every
  // request, so each lookup reuses their cached hashes (a joined key would be built and hashed anew).
  const index = new Map<string, Map<string, Map<number, Series>>>();

  function seriesOf(route: string, protocol: string, status: number): Series {
    let protocols = index.get(route);
    if (!protocols) {
      protocols = new Map();
      index.set(route, protocols);
    }
    let statuses = protocols.get(protocol);
    if (!statuses) {
      statuses = new Map();
      protocols.set(protocol, statuses);
    }
    let found = statuses.get(status);
    if (!found) {
      found = { route, protocol, status, count: 0, sum: 0, perBucket: new Float64Array(buckets.length + 1) };
      statuses.set(status, found);
      series.push(found);
    }
    return found;
  }

  function render(): string {
    const all = series;
    const lines: string[] = [
      "# HELP gatehouse_requests_total Requests served, by route (RPC path or REST pattern), protocol and HTTP status.",
      "# TYPE gatehouse_requests_total counter",
    ];
    for (const s of all) lines.push(`gatehouse_requests_total{${labels(s.route, s.protocol)},status="${s.status}"} ${s.count}`);
    lines.push(
      "",
      "# HELP gatehouse_request_errors_total Requests answered with an error status (>= 400).",
      "# TYPE gatehouse_request_errors_total counter",
    );
    for (const s of all) {
      if (s.status >= 400) lines.push(`gatehouse_request_errors_total{${labels(s.route, s.protocol)},status="${s.status}"} ${s.count}`);
    }
    lines.push(
      "",
      "# HELP gatehouse_request_duration_seconds Time from request to the end of the response.",
      "# TYPE gatehouse_request_duration_seconds histogram",
    );
    // The histogram is by route and protocol: statuses of one pair are added up.
    const byRoute = new Map<string, { route: string; protocol: string; count: number; sum: number; perBucket: Float64Array }>();
    for (const s of all) {
      const key = `${s.route}\u0000${s.protocol}`;
      let entry = byRoute.get(key);
      if (!entry) {
        entry = { route: s.route, protocol: s.protocol, count: 0, sum: 0, perBucket: new Float64Array(buckets.length + 1) };
        byRoute.set(key, entry);
      }
      entry.count += s.count;
      entry.sum += s.sum;
      for (let i = 0; i < s.perBucket.length; i++) entry.perBucket[i] = (entry.perBucket[i] ?? 0) + (s.perBucket[i] ?? 0);
    }
    for (const entry of byRoute.values()) {
      const routeLabels = labels(entry.route, entry.protocol);
      let cumulative = 0;
      buckets.forEach((bound, i) => {
        cumulative += entry.perBucket[i] ?? 0;
        lines.push(`gatehouse_request_duration_seconds_bucket{le="${bound}",${routeLabels}} ${cumulative}`);
      });
      lines.push(`gatehouse_request_duration_seconds_bucket{le="+Inf",${routeLabels}} ${entry.count}`);
      lines.push(`gatehouse_request_duration_seconds_sum{${routeLabels}} ${entry.sum}`);
      lines.push(`gatehouse_request_duration_seconds_count{${routeLabels}} ${entry.count}`);
    }
    return `${lines.join("\n")}\n`;
  }

  return {
    registry,
    contentType: registry.contentType,
    observe(route: string, protocol: string, status: number, seconds: number) {
      const s = seriesOf(route, protocol, status);
      s.count++;
      s.sum += seconds;
      let i = 0;
      while (i < buckets.length && seconds > (buckets[i] as number)) i++;
      s.perBucket[i] = (s.perBucket[i] ?? 0) + 1;
    },
    /** The exposition text: process metrics, then the request series. */
    async text(): Promise<string> {
      return `${await registry.metrics()}\n${render()}`;
    },
  };
}

function labels(route: string, protocol: string): string {
  return `route="${escapeLabel(route)}",protocol="${escapeLabel(protocol)}"`;
}

/** Label values escape backslash, double quote and line feed (text exposition format 0.0.4). */
function escapeLabel(value: string): string {
  return /[\\"\n]/.test(value) ? value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n") : value;
}

export type Metrics = ReturnType<typeof createMetrics>;
