import { Counter, Histogram, Registry, collectDefaultMetrics } from "prom-client";

/** Prometheus metrics of one app: requests, errors and latency per RPC and per REST route. */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "gatehouse_" });
  const labelNames = ["route", "protocol", "status"] as const;
  const requests = new Counter({
    name: "gatehouse_requests_total",
    help: "Requests served, by route (RPC path or REST pattern), protocol and HTTP status.",
    labelNames,
    registers: [registry],
  });
  const errors = new Counter({
    name: "gatehouse_request_errors_total",
    help: "Requests answered with an error status (>= 400).",
    labelNames,
    registers: [registry],
  });
  const duration = new Histogram({
    name: "gatehouse_request_duration_seconds",
    help: "Time from request to the end of the response.",
    labelNames: ["route", "protocol"] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });

  // Label sets are few (served routes x protocols x statuses): keep their bound
  // children instead of hashing the labels on every request.
  type Series = { requests: { inc(): void }; errors?: { inc(): void }; duration: { observe(value: number): void } };
  const series = new Map<string, Series>();
  function seriesOf(route: string, protocol: string, status: number): Series {
    const key = `${route}\u0000${protocol}\u0000${status}`;
    let found = series.get(key);
    if (!found) {
      const code = String(status);
      found = {
        requests: requests.labels(route, protocol, code),
        ...(status >= 400 ? { errors: errors.labels(route, protocol, code) } : {}),
        duration: duration.labels(route, protocol),
      };
      series.set(key, found);
    }
    return found;
  }

  return {
    registry,
    observe(route: string, protocol: string, status: number, seconds: number) {
      const s = seriesOf(route, protocol, status);
      s.requests.inc();
      s.errors?.inc();
      s.duration.observe(seconds);
    },
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
