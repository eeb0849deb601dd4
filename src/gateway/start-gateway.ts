import { hostname } from "node:os";
import { DomainError } from "../domain/errors.js";
import { isGatewayId } from "../domain/gateway/watch-gateway.js";
import type { TrustedProxies } from "../server/client-address.js";
import type { Logger } from "../server/logger.js";
import { createFollower, type Follower } from "./follower/follower.js";
import { createGateway, type GatewayAddresses } from "./gateway.js";
import type { EdgeLimits } from "./proxy/edge-limits.js";
import { createTracing } from "../tracing/create-tracing.js";
import type { TracingSettings } from "../tracing/tracing-settings.js";

/** What a running gateway needs to know (docs/gateway.md, "Gateways: embedded and standalone": addresses and settings). */
export interface GatewaySettings {
  host: string;
  port: number;
  /** Default: the proxy's port + 1 (0 with an ephemeral proxy port). */
  adminPort?: number | undefined;
  /** The control planes to follow, in order of preference (GATEHOUSE_URL). */
  urls: readonly string[];
  /** GATEHOUSE_GATEWAY_KEY (gw_...). */
  gatewayKey: string;
  /** How the gateway is listed among the organisation's connected gateways. */
  gatewayId: string;
  /** GATEWAY_CACHE: the last-known-good file, or the folder where it is gateway-<organization_id>.json. */
  cacheFile: string | { directory: string } | undefined;
  /** How long an upstream may take to answer (default 30 s): then 504. */
  upstreamTimeoutMs?: number;
  /** Connection, tunnel and request-head limits (docs/gateway.md, "Limits"). */
  limits?: Partial<EdgeLimits>;
  /** TRUSTED_PROXIES: peers whose forwarding headers are passed on. */
  trustedProxies?: TrustedProxies;
  /** Open files other parts of the process hold (the platform's connections, for the embedded gateway). */
  sharedDescriptors?: number;
  /** The TLS port (tlsPortFor); undefined: none. */
  tlsPort?: number | undefined;
  /** GATEWAY_ADMIN_HOST: the admin port's interface (default: `host`). */
  adminHost?: string | undefined;
  /** Cluster-wide rate limits in Redis (GATEWAY_REDIS_URL). */
  redis?: { url: string; timeoutMs: number } | undefined;
  /** Spans exported over OTLP (the OpenTelemetry variables); undefined: W3C Trace Context only (docs/gateway.md, "Tracing"). */
  tracing?: TracingSettings | undefined;
}

export interface RunningGateway {
  addresses: GatewayAddresses;
  follower: Follower;
  /** Stops following, lets requests in flight finish, closes the listeners. */
  close(): Promise<void>;
}

/** The default name of a gateway process among its organisation's connected gateways. */
export function defaultGatewayId(): string {
  // Host names may hold characters an id may not (a gateway id is what the dashboard lists).
  const host =
    hostname()
      .replace(/[^A-Za-z0-9._:-]/g, "-")
      .replace(/^[^A-Za-z0-9]+/, "") || "gateway";
  return `${host.slice(0, 100)}-${process.pid}`;
}

/**
 * Starts a gateway: the data plane on its two ports, fed by a follower of the
 * control plane. The proxy listens at once (answering 503 until the first
 * state arrives, from the control plane or the cache file); /readyz turns
 * 200 with it.
 */
export async function startGateway(settings: GatewaySettings, logger: Logger): Promise<RunningGateway> {
  if (!isGatewayId(settings.gatewayId)) {
    // The control plane would refuse every stream of this gateway: say so now, not after a silent wait.
    throw new DomainError(
      "invalid_argument",
      "invalid_gateway_id",
      'GATEWAY_ID must be 1 to 128 letters, digits, ".", "_", ":" or "-", starting with a letter or digit (e.g. the host name)',
    );
  }
  const tracing = await createTracing(settings.tracing, "gatehouse-gateway");
  // The follower is made after the gateway it feeds; /metrics is scraped only once both exist.
  let follower: Follower | undefined;
  const gateway = createGateway({
    connected: () => follower?.status().connected ?? false,
    host: settings.host,
    port: settings.port,
    ...(settings.adminPort !== undefined ? { adminPort: settings.adminPort } : {}),
    ...(settings.upstreamTimeoutMs !== undefined ? { upstreamTimeoutMs: settings.upstreamTimeoutMs } : {}),
    ...(settings.limits !== undefined ? { limits: settings.limits } : {}),
    ...(settings.trustedProxies !== undefined ? { trustedProxies: settings.trustedProxies } : {}),
    ...(settings.sharedDescriptors !== undefined ? { sharedDescriptors: settings.sharedDescriptors } : {}),
    ...(settings.redis !== undefined ? { redis: settings.redis } : {}),
    ...(settings.adminHost !== undefined ? { adminHost: settings.adminHost } : {}),
    ...(settings.tlsPort !== undefined ? { tlsPort: settings.tlsPort } : {}),
    tracer: tracing.gateway,
    logger,
  });
  follower = createFollower({
    urls: settings.urls,
    gatewayKey: settings.gatewayKey,
    gatewayId: settings.gatewayId,
    cacheFile: settings.cacheFile,
    logger,
    onState(state) {
      try {
        gateway.apply(state);
      } catch (error) {
        // The state served so far stays: a document that cannot compile never half-applies.
        logger.error(
          { err: error, revision: state.revision },
          "gateway could not apply a configuration revision; serving the previous one",
        );
      }
    },
  });
  let addresses: GatewayAddresses;
  try {
    addresses = await gateway.listen();
    try {
      await follower.start();
    } catch (error) {
      await gateway.close();
      throw error;
    }
  } catch (error) {
    await tracing.shutdown();
    throw error;
  }
  const following = follower;
  return {
    addresses,
    follower: following,
    async close() {
      await following.close();
      await gateway.close();
      // The spans of the last requests leave before the process does.
      await tracing.shutdown();
    },
  };
}
