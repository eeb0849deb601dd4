import type { Server } from "node:http";
import type { Http2Session } from "node:http2";
import type { AddressInfo, Server as NetServer } from "node:net";
import type { Duplex } from "node:stream";
import { Pool, type Dispatcher } from "undici";
import { noTrustedProxies, type TrustedProxies } from "../server/client-address.js";
import type { Logger } from "../server/logger.js";
import { createAccessLog, type AccessLog } from "./access-log.js";
import { createAdminServer } from "./admin-server.js";
import { compileGatewayState, type CompiledGatewayState } from "./compile-gateway-state.js";
import { createGatewayHandler } from "./gateway-handler.js";
import { createGatewayMetrics } from "./gateway-metrics.js";
import type { GatewayState } from "./gateway-state.js";
import { noTracer, type GatewayTracer } from "./gateway-tracer.js";
import { createClusterRateStore } from "./rate-limit/redis-store.js";
import { createHealthRegistry } from "./upstreams/health-registry.js";
import { certificateFor } from "./certificates.js";
import { defaultEdgeLimits, type EdgeLimits } from "./proxy/edge-limits.js";
import { connectionBudget, createEdgeServer, openFileLimit } from "./proxy/edge-server.js";
import { createHttp2Sessions } from "./proxy/grpc.js";
import { createAdmission, createHttp2Server, createPlainListener, createTlsListener, type RefusalReason } from "./proxy/listeners.js";
import { connectorWithin } from "./proxy/upstream-connect.js";

export interface GatewayOptions {
  /** Address of the proxy (default 127.0.0.1:8000; port 0 picks a free one). */
  host?: string;
  port?: number;
  /** Address of /healthz, /readyz and /metrics (default: the proxy's host, its port + 1; 0 when the proxy's port is 0). */
  adminHost?: string;
  adminPort?: number;
  logger: Logger;
  /** Access log lines (default: one pino line per request through `logger`). */
  accessLog?: AccessLog;
  /** How long an upstream may take to connect and to answer with its headers (default 30 s): then 504. */
  upstreamTimeoutMs?: number;
  /** How long close() lets requests in flight finish before cutting them (default 30 s). */
  drainTimeoutMs?: number;
  /** Epoch ms, for rate-limit windows and session expiry (default Date.now); a seam for tests. */
  clock?: () => number;
  /** Clients each rate-limit plugin of each route remembers at most (default 100,000). */
  maxClientsPerLimiter?: number;
  /** Verified session tokens kept (default 10,000). */
  sessionCacheSize?: number;
  /** Clock skew tolerated on session `exp` (default 5 s). */
  sessionLeewaySeconds?: number;
  /** Connections per upstream origin at most (default: as many as requests need). */
  upstreamConnections?: number;
  /** Whether the control plane is followed right now, for /metrics (a gateway fed by hand has none). */
  connected?: () => boolean;
  /** Connection, tunnel and request-head limits (defaults: defaultEdgeLimits, docs/gateway.md "Limits"). */
  limits?: Partial<EdgeLimits>;
  /** Proxies whose X-Forwarded-*, Forwarded and X-Real-IP are passed on (TRUSTED_PROXIES; default none). */
  trustedProxies?: TrustedProxies;
  /**
   * Open files other parts of the process may hold (the platform's own
   * connections, for the gateway `gatehouse serve` embeds): the connection
   * limit is fitted to the open-file limit less these.
   */
  sharedDescriptors?: number;
  /** How long an HTTP/2 session with no stream open stays (default max(30 s, the keep-alive time)); a seam for tests. */
  http2IdleTimeoutMs?: number;
  /** The process's open-file limit (default: read from the system); a seam for tests. */
  openFileLimit?: number;
  /** W3C Trace Context and spans (src/tracing/); default: none (a gateway fed by hand in tests). */
  tracer?: GatewayTracer;
  /** The TLS port (GATEWAY_TLS_PORT; 0 picks a free one); absent: no TLS listener. */
  tlsPort?: number;
  /** Cluster-wide rate limits (GATEWAY_REDIS_URL, GATEWAY_REDIS_TIMEOUT_MS); absent: `scope: cluster` counts per instance. */
  redis?: { url: string; timeoutMs: number };
}

export interface GatewayAddresses {
  url: string;
  adminUrl: string;
  port: number;
  adminPort: number;
  /** The TLS port, when there is one. */
  tlsUrl?: string;
  tlsPort?: number;
}

export interface Gateway {
  /**
   * Compiles a new state and swaps it in at once: requests that arrive from
   * now on are served by it, requests in flight finish on the state they
   * started with. Throws (keeping the state served so far) if it cannot compile.
   */
  apply(state: GatewayState): void;
  listen(): Promise<GatewayAddresses>;
  /** Stops accepting, lets requests in flight finish (up to drainTimeoutMs), ends tunnels, closes upstream connections. */
  close(): Promise<void>;
  /** The revision being served; undefined until a state is applied. */
  readonly revision: number | undefined;
}

/**
 * The data plane: a stateless HTTP proxy that enforces one organisation's
 * configuration (docs/gateway.md, "The data plane: how the gateway enforces it"). The follower hands it
 * a new GatewayState for every change; `apply` compiles it once and swaps it
 * in. Upstream connections are undici pools, one per origin, kept alive and
 * shared by every revision that routes to that origin.
 */
export function createGateway(options: GatewayOptions): Gateway {
  const logger = options.logger;
  const host = options.host ?? "127.0.0.1";
  const port = options.port ?? 8000;
  const adminHost = options.adminHost ?? host;
  const adminPort = options.adminPort ?? (port === 0 ? 0 : port + 1);
  const upstreamTimeoutMs = options.upstreamTimeoutMs ?? 30_000;
  const drainTimeoutMs = options.drainTimeoutMs ?? 30_000;
  const clock = options.clock ?? Date.now;
  const metrics = createGatewayMetrics();
  const pools = new Map<string, Pool>();
  const tunnels = new Set<Duplex>();
  /** States swapped out while requests they started were still in flight. */
  const retired = new Set<CompiledGatewayState>();
  let current: CompiledGatewayState | undefined;
  let changedAt: number | undefined;
  let closing = false;
  /** The TLS port once listening: a redirect to https names it when it is not 443. */
  let tlsPortBound: number | undefined;
  let drained: (() => void) | undefined;

  /** One keep-alive connection pool per origin and connect timeout, shared by every revision that sends there. */
  const dispatcherFor = (origin: string, connectTimeoutMs: number) => {
    const key = `${origin} ${connectTimeoutMs}`;
    let pool = pools.get(key);
    if (pool === undefined) {
      pool = new Pool(origin, {
        connections: options.upstreamConnections ?? null,
        connect: connectorWithin(connectTimeoutMs),
        keepAliveTimeout: 4_000,
      });
      pools.set(key, pool);
    }
    return pool;
  };
  const health = createHealthRegistry(logger);
  const http2Sessions = createHttp2Sessions({ connectTimeoutMs: () => upstreamTimeoutMs });
  const clusterRates =
    options.redis === undefined
      ? undefined
      : createClusterRateStore({
          url: options.redis.url,
          timeoutMs: options.redis.timeoutMs,
          onError: (() => {
            let loggedAt = 0;
            return (error: Error) => {
              // One line a minute at most: while Redis is gone every request would say it.
              if (Date.now() - loggedAt < 60_000) return;
              loggedAt = Date.now();
              logger.warn(
                { err: error.message },
                "Redis does not answer: cluster rate limits are counted by this gateway for itself until it does",
              );
            };
          })(),
        });

  const inFlight = () => {
    let total = current?.inFlight ?? 0;
    for (const state of retired) total += state.inFlight;
    return total;
  };

  /** Closes the connection pools and stops the probes of targets no state in use sends to any more. */
  const prunePools = () => {
    const inUse = [...(current?.routing.pools ?? [])];
    for (const state of retired) inUse.push(...state.routing.pools);
    const used = new Set<Dispatcher>();
    for (const pool of inUse) for (const target of pool.targets) used.add(target.dispatcher);
    for (const [key, pool] of pools) {
      if (used.has(pool)) continue;
      pools.delete(key);
      pool.close().catch(() => {});
    }
    health.retain(inUse);
  };

  const configured: EdgeLimits = { ...defaultEdgeLimits, ...options.limits };
  const fileLimit = options.openFileLimit ?? openFileLimit();
  const limits: EdgeLimits = {
    ...configured,
    maxConnections: connectionBudget(configured.maxConnections, fileLimit, options.sharedDescriptors ?? 0),
  };
  if (limits.maxConnections < configured.maxConnections) {
    // A few percent below the default is the usual open-file limit, not a problem: said quietly then.
    const log = limits.maxConnections < configured.maxConnections * 0.5 ? logger.warn.bind(logger) : logger.info.bind(logger);
    log(
      { configured: configured.maxConnections, limit: limits.maxConnections, openFileLimit: fileLimit },
      "the gateway holds fewer client connections than GATEWAY_MAX_CONNECTIONS: the process's open-file limit (ulimit -n) is too low for more",
    );
  }

  const handler = createGatewayHandler({
    current: () => current,
    settled(compiled) {
      if (compiled !== current && compiled.inFlight === 0 && retired.delete(compiled)) prunePools();
      if (drained !== undefined && inFlight() === 0) drained();
    },
    closing: () => closing,
    metrics,
    accessLog: options.accessLog ?? createAccessLog(logger),
    clock,
    upstreamTimeoutMs,
    tunnels,
    maxTunnels: limits.maxTunnels,
    sendTimeoutMs: limits.sendTimeoutMs,
    tunnelIdleTimeoutMs: limits.tunnelIdleTimeoutMs,
    trustedProxies: options.trustedProxies ?? noTrustedProxies,
    clusterRates,
    tracer: options.tracer ?? noTracer,
    tlsPort: () => tlsPortBound,
    http2Sessions,
  });

  const refused = (reason: RefusalReason) => metrics.refusedConnection(reason);
  const edge = createEdgeServer({
    limits,
    request: handler.request,
    upgrade: handler.upgrade,
    malformedBody: handler.malformedBody,
    refused,
    admitsConnections: false,
  });
  const http1: Server = edge.server;
  // Every port counts against one set of limits, and so does each HTTP/2 stream beyond a connection's first.
  const admission = createAdmission(limits, refused);
  const http2 = createHttp2Server({
    limits,
    request: handler.request,
    admission,
    ...(options.http2IdleTimeoutMs !== undefined ? { idleTimeoutMs: options.http2IdleTimeoutMs } : {}),
  });
  const plain = createPlainListener({ admission, http1, http2, headerTimeoutMs: limits.headerTimeoutMs });
  const secure =
    options.tlsPort === undefined
      ? undefined
      : createTlsListener({
          admission,
          http1,
          http2,
          handshakeTimeoutMs: limits.headerTimeoutMs,
          contextFor: (servername) => certificateFor(current?.routing.certificates, servername)?.context,
          failed: (reason) => metrics.tlsHandshakeFailed(reason),
        });
  const admin = createAdminServer({
    ready: () => current !== undefined,
    metrics: () =>
      metrics.text(
        {
          revision: current?.state.revision,
          changedAt,
          routes: current?.routing.routes.length ?? 0,
          inFlight: inFlight(),
          tunnels: tunnels.size,
          connections: admission.open(),
          certificates: current?.routing.certificates,
          targets: health.all(),
          maxConnections: limits.maxConnections,
          connected: options.connected?.(),
        },
        clock(),
      ),
    metricsContentType: metrics.contentType,
  });

  const listenOn = (target: NetServer, listenHost: string, listenPort: number) =>
    new Promise<number>((resolve, reject) => {
      target.once("error", reject);
      target.listen(listenPort, listenHost, () => {
        target.off("error", reject);
        resolve((target.address() as AddressInfo).port);
      });
    });
  const urlOf = (listenHost: string, listenPort: number) =>
    `http://${listenHost.includes(":") ? `[${listenHost}]` : listenHost}:${listenPort}`;

  return {
    get revision() {
      return current?.state.revision;
    },

    apply(state) {
      const previous = current;
      const next = compileGatewayState(state, {
        previous,
        pools: { dispatcherFor, health },
        clusterRateLimits: clusterRates !== undefined,
        notice: (message, fields) => logger.info({ ...fields, revision: state.revision }, message),
        upstreamTimeoutMs,
        warn: (message, fields) => logger.warn({ ...fields, revision: state.revision }, message),
        ...(options.maxClientsPerLimiter !== undefined ? { maxClientsPerLimiter: options.maxClientsPerLimiter } : {}),
        ...(options.sessionCacheSize !== undefined ? { sessionCacheSize: options.sessionCacheSize } : {}),
        ...(options.sessionLeewaySeconds !== undefined ? { sessionLeewaySeconds: options.sessionLeewaySeconds } : {}),
      });
      current = next;
      if (previous !== undefined && previous.inFlight > 0) retired.add(previous);
      if (previous?.state.revision !== state.revision || previous?.routing !== next.routing) changedAt = clock();
      prunePools();
    },

    async listen() {
      const opened: { close(callback: () => void): unknown }[] = [];
      try {
        const boundPort = await listenOn(plain, host, port);
        opened.push(plain);
        let boundTls: number | undefined;
        if (secure !== undefined) {
          boundTls = await listenOn(secure, host, options.tlsPort ?? 0);
          opened.push(secure);
        }
        const boundAdmin = await listenOn(admin, adminHost, adminPort);
        edge.startTimeouts();
        tlsPortBound = boundTls;
        return {
          url: urlOf(host, boundPort),
          adminUrl: urlOf(adminHost, boundAdmin),
          port: boundPort,
          adminPort: boundAdmin,
          ...(boundTls !== undefined ? { tlsUrl: urlOf(host, boundTls).replace(/^http:/, "https:"), tlsPort: boundTls } : {}),
        };
      } catch (error) {
        // All or nothing: a port left listening without the others would keep the process alive, failed.
        for (const server of opened) await new Promise<void>((resolve) => server.close(() => resolve()));
        throw error;
      }
    },

    async close() {
      closing = true;
      const stopped = [plain, ...(secure ? [secure] : [])].map(
        (server) => new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve())),
      );
      // Connections between requests close now; busy ones close after their answer (it says Connection: close).
      http1.closeIdleConnections();
      for (const session of http2.sessions) endSession(session, "close");
      if (inFlight() > 0) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, drainTimeoutMs);
          drained = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
      for (const tunnel of tunnels) tunnel.destroy();
      http1.closeAllConnections();
      for (const session of http2.sessions) endSession(session, "destroy");
      await Promise.all(stopped);
      health.close();
      http2Sessions.close();
      await clusterRates?.close();
      await Promise.all([...pools.values()].map((pool) => pool.close().catch(() => {})));
      pools.clear();
      await new Promise<void>((resolve) => (admin.listening ? admin.close(() => resolve()) : resolve()));
    },
  };
}

/**
 * Closes or destroys an HTTP/2 session at shutdown. A session that the peer is tearing
 * down at the same moment can make Node's http2 core throw an internal assertion from
 * `destroy()`; shutdown must go on whatever one session does.
 */
function endSession(session: Http2Session, how: "close" | "destroy"): void {
  if (session.destroyed || (how === "close" && session.closed)) return;
  try {
    if (how === "close") session.close();
    else session.destroy();
  } catch {
    // The session is going away already; nothing is left to release.
  }
}
