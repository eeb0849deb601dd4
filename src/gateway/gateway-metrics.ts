import { Counter, Registry, collectDefaultMetrics } from "prom-client";

/** Upper bounds of the latency buckets, in seconds (the last one is the default upstream timeout). */
const buckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30] as const;

export type UpstreamErrorKind = "refused" | "reset" | "timeout";

/**
 * One route's series, as plain numbers counted on every request and turned
 * into text only when scraped (as src/server/metrics.ts does for the
 * platform): no label hashing on the hot path.
 */
export class RouteMetrics {
  /** Answers per status class: index 1 to 5 for 1xx to 5xx. */
  readonly byClass = [0, 0, 0, 0, 0, 0];
  /** Observations per latency bucket (not cumulative); the last slot is above the largest bound. */
  readonly perBucket = new Float64Array(buckets.length + 1);
  sum = 0;
  count = 0;
  refused = 0;
  reset = 0;
  timeout = 0;
  rateLimited = 0;
  /** Tries after the first (retries on another target). */
  retries = 0;

  constructor(readonly route: string) {}

  observe(status: number, seconds: number): void {
    const cls = (status / 100) | 0;
    this.byClass[cls >= 1 && cls <= 5 ? cls : 5]++;
    this.count++;
    this.sum += seconds;
    let i = 0;
    while (i < buckets.length && seconds > buckets[i]!) i++;
    this.perBucket[i]!++;
  }

  upstreamError(kind: UpstreamErrorKind): void {
    this[kind]++;
  }
}

/** Gauges the gateway reads at scrape time. */
export interface GatewayGauges {
  revision: number | undefined;
  /** Epoch ms of the last applied change. */
  changedAt: number | undefined;
  routes: number;
  inFlight: number;
  tunnels: number;
  /** Client connections open on the proxy port. */
  connections: number;
  /** The certificates of the domains served over TLS, by domain. */
  certificates: ReadonlyMap<string, { readonly expiresAt: number }> | undefined;
  /** The health of every upstream target this gateway sends to. */
  targets: Iterable<{ readonly upstream: string; readonly target: string; readonly healthy: boolean }>;
  /** The most client connections this gateway holds (its limit, fitted to the open-file limit). */
  maxConnections: number;
  /** Whether a stream to a control plane is open; undefined for a gateway that follows none (fed by hand). */
  connected: boolean | undefined;
}

/** A label value in the exposition format: backslash, double quote and line feed escaped. */
function escapeLabel(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

/**
 * Prometheus metrics of a gateway, served on its admin port. Names follow
 * the exposition rules `promtool check metrics` applies: counters end in
 * `_total`, gauges do not, durations are in seconds, each family has HELP and
 * TYPE. Routes appear once they have answered a request; answers that match
 * no route count under route="_unmatched" (not a valid route name).
 */
export function createGatewayMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "gatehouse_gateway_" });
  // prom-client names three of its gauges `..._total` (nodejs_active_handles_total, ...), which
  // promtool refuses ("non-counter metrics should not have _total suffix"): they are left out.
  for (const metric of registry.getMetricsAsArray()) {
    const name = (metric as { name?: string }).name;
    if (name?.endsWith("_total") && !(metric instanceof Counter)) registry.removeSingleMetric(name);
  }
  const routes = new Map<string, RouteMetrics>();

  function route(name: string): RouteMetrics {
    let metrics = routes.get(name);
    if (metrics === undefined) {
      metrics = new RouteMetrics(name);
      routes.set(name, metrics);
    }
    return metrics;
  }
  const unmatched = route("_unmatched");
  /** Connections closed at once by a limit, by which. */
  const refusedConnections = { connections: 0, client_connections: 0, client_streams: 0 };
  /** Requests whose cluster rate limits this gateway counted itself because Redis did not answer in time. */
  let storeFallbacks = 0;
  /** TLS handshakes that failed, by reason (no certificate for the name, protocol errors...). */
  const handshakeFailures = new Map<string, number>();

  function render(gauges: GatewayGauges, now: number): string {
    const all = [...routes.values()].filter((m) => m.count > 0 || m.refused + m.reset + m.timeout + m.rateLimited + m.retries > 0);
    const lines: string[] = [];
    const family = (name: string, type: string, help: string) => lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);

    family("gatehouse_gateway_requests_total", "counter", "Requests answered, by route and status class.");
    for (const m of all) {
      for (let cls = 1; cls <= 5; cls++) {
        if (m.byClass[cls]! > 0)
          lines.push(`gatehouse_gateway_requests_total{route="${m.route}",status_class="${cls}xx"} ${m.byClass[cls]}`);
      }
    }
    family("gatehouse_gateway_request_duration_seconds", "histogram", "Time from a request's arrival to the end of its answer, by route.");
    for (const m of all) {
      if (m.count === 0) continue;
      let cumulative = 0;
      buckets.forEach((bound, i) => {
        cumulative += m.perBucket[i]!;
        lines.push(`gatehouse_gateway_request_duration_seconds_bucket{route="${m.route}",le="${bound}"} ${cumulative}`);
      });
      lines.push(`gatehouse_gateway_request_duration_seconds_bucket{route="${m.route}",le="+Inf"} ${m.count}`);
      lines.push(`gatehouse_gateway_request_duration_seconds_sum{route="${m.route}"} ${m.sum}`);
      lines.push(`gatehouse_gateway_request_duration_seconds_count{route="${m.route}"} ${m.count}`);
    }
    family(
      "gatehouse_gateway_upstream_errors_total",
      "counter",
      "Requests whose upstream refused or reset the connection (502) or did not answer in time (504), by route and kind.",
    );
    for (const m of all) {
      for (const kind of ["refused", "reset", "timeout"] as const) {
        if (m[kind] > 0) lines.push(`gatehouse_gateway_upstream_errors_total{route="${m.route}",kind="${kind}"} ${m[kind]}`);
      }
    }
    family("gatehouse_gateway_upstream_retries_total", "counter", "Tries after a request's first (retries on another target), by route.");
    for (const m of all) if (m.retries > 0) lines.push(`gatehouse_gateway_upstream_retries_total{route="${m.route}"} ${m.retries}`);
    family(
      "gatehouse_gateway_upstream_target_healthy",
      "gauge",
      "1 while an upstream target is in rotation at this gateway (active and passive checks), else 0.",
    );
    for (const t of gauges.targets)
      lines.push(
        `gatehouse_gateway_upstream_target_healthy{upstream="${escapeLabel(t.upstream)}",target="${escapeLabel(t.target)}"} ${t.healthy ? 1 : 0}`,
      );
    family(
      "gatehouse_gateway_rate_limit_store_errors_total",
      "counter",
      "Requests whose cluster rate limits this gateway counted itself, Redis not answering within GATEWAY_REDIS_TIMEOUT_MS.",
    );
    lines.push(`gatehouse_gateway_rate_limit_store_errors_total ${storeFallbacks}`);
    family("gatehouse_gateway_rate_limited_requests_total", "counter", "Requests refused with 429 by a rate-limit plugin, by route.");
    for (const m of all)
      if (m.rateLimited > 0) lines.push(`gatehouse_gateway_rate_limited_requests_total{route="${m.route}"} ${m.rateLimited}`);

    family(
      "gatehouse_gateway_certificate_expiry_timestamp_seconds",
      "gauge",
      "When the certificate a domain is served with over TLS expires, in Unix seconds.",
    );
    for (const [domain, certificate] of gauges.certificates ?? [])
      lines.push(
        `gatehouse_gateway_certificate_expiry_timestamp_seconds{domain="${escapeLabel(domain)}"} ${Math.floor(certificate.expiresAt / 1000)}`,
      );
    family("gatehouse_gateway_tls_handshake_failures_total", "counter", "TLS handshakes that failed, by Node's error code.");
    for (const [reason, count] of handshakeFailures)
      lines.push(`gatehouse_gateway_tls_handshake_failures_total{reason="${reason}"} ${count}`);
    family("gatehouse_gateway_config_loaded", "gauge", "1 once a configuration is loaded, else 0.");
    lines.push(`gatehouse_gateway_config_loaded ${gauges.revision === undefined ? 0 : 1}`);
    family("gatehouse_gateway_config_revision", "gauge", "The configuration revision being served.");
    if (gauges.revision !== undefined) lines.push(`gatehouse_gateway_config_revision ${gauges.revision}`);
    family("gatehouse_gateway_config_age_seconds", "gauge", "Seconds since the gateway last applied a configuration change.");
    if (gauges.changedAt !== undefined) lines.push(`gatehouse_gateway_config_age_seconds ${Math.max(0, (now - gauges.changedAt) / 1000)}`);
    if (gauges.connected !== undefined) {
      family("gatehouse_gateway_control_plane_connected", "gauge", "1 while a stream to a control plane is open, else 0.");
      lines.push(`gatehouse_gateway_control_plane_connected ${gauges.connected ? 1 : 0}`);
    }
    family("gatehouse_gateway_routes", "gauge", "Routes in the configuration being served.");
    lines.push(`gatehouse_gateway_routes ${gauges.routes}`);
    family("gatehouse_gateway_requests_in_flight", "gauge", "Requests being handled.");
    lines.push(`gatehouse_gateway_requests_in_flight ${gauges.inFlight}`);
    family("gatehouse_gateway_websocket_tunnels", "gauge", "WebSocket tunnels open.");
    lines.push(`gatehouse_gateway_websocket_tunnels ${gauges.tunnels}`);
    family("gatehouse_gateway_connections", "gauge", "Client connections open on the proxy port.");
    lines.push(`gatehouse_gateway_connections ${gauges.connections}`);
    family(
      "gatehouse_gateway_connections_limit",
      "gauge",
      "Client connections the gateway holds at most (GATEWAY_MAX_CONNECTIONS, fitted to the open-file limit).",
    );
    lines.push(`gatehouse_gateway_connections_limit ${gauges.maxConnections}`);
    family(
      "gatehouse_gateway_connections_refused_total",
      "counter",
      "Client connections closed at once by a limit: the process's (connections) or one client address's (client_connections); HTTP/2 streams beyond a connection's first reset with REFUSED_STREAM by either (client_streams).",
    );
    for (const reason of ["connections", "client_connections", "client_streams"] as const)
      lines.push(`gatehouse_gateway_connections_refused_total{reason="${reason}"} ${refusedConnections[reason]}`);
    return `${lines.join("\n")}\n`;
  }

  return {
    route,
    unmatched,
    refusedConnection(reason: keyof typeof refusedConnections): void {
      refusedConnections[reason]++;
    },
    rateLimitStoreFallback(): void {
      storeFallbacks++;
    },
    tlsHandshakeFailed(reason: string): void {
      // Reasons are Node's error codes (a closed set): never text a client chose.
      const key = /^[A-Z0-9_]{1,64}$/.test(reason) ? reason : "OTHER";
      handshakeFailures.set(key, (handshakeFailures.get(key) ?? 0) + 1);
    },
    contentType: registry.contentType,
    async text(gauges: GatewayGauges, now: number): Promise<string> {
      return `${await registry.metrics()}\n${render(gauges, now)}`;
    },
  };
}

export type GatewayMetrics = ReturnType<typeof createGatewayMetrics>;
