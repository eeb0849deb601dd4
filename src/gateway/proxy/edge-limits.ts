// The limits' shape and defaults alone: read by the settings (gateway-settings.ts), which CLI commands
// that never start a gateway load, so nothing here may import the servers.

/**
 * The gateway's limits per process (docs/gateway.md, "Limits"; docs/security.md,
 * "The gateway"), so that no one client can make it, or a control plane in
 * the same process, stop answering others.
 */
export interface EdgeLimits {
  /** Open client connections at most (GATEWAY_MAX_CONNECTIONS, default 10,000). */
  readonly maxConnections: number;
  /** Open connections per client address, an IPv6 client counted by its /64 (GATEWAY_MAX_CONNECTIONS_PER_CLIENT, default 256). */
  readonly maxConnectionsPerClient: number;
  /** Open WebSocket tunnels at most (GATEWAY_MAX_TUNNELS, default 5,000). */
  readonly maxTunnels: number;
  /** Largest request head: request line and header fields (GATEWAY_MAX_HEADER_BYTES, default 16 KiB). */
  readonly maxHeaderBytes: number;
  /** Time to receive a request's head (GATEWAY_HEADER_TIMEOUT_MS, default 10 s). */
  readonly headerTimeoutMs: number;
  /** Time to receive a whole request, body included (GATEWAY_REQUEST_TIMEOUT_MS, default 300 s). */
  readonly requestTimeoutMs: number;
  /** How long an idle keep-alive connection stays open (default 5 s). */
  readonly keepAliveTimeoutMs: number;
  /** How long a client may stop reading an answer before the gateway gives up on it (GATEWAY_SEND_TIMEOUT_MS, default 60 s). */
  readonly sendTimeoutMs: number;
  /** How long a WebSocket tunnel may carry nothing either way before it is closed (GATEWAY_TUNNEL_IDLE_TIMEOUT_MS, default 300 s). */
  readonly tunnelIdleTimeoutMs: number;
}

export const defaultEdgeLimits: EdgeLimits = {
  maxConnections: 10_000,
  maxConnectionsPerClient: 256,
  maxTunnels: 5_000,
  maxHeaderBytes: 16 * 1024,
  headerTimeoutMs: 10_000,
  requestTimeoutMs: 300_000,
  keepAliveTimeoutMs: 5_000,
  sendTimeoutMs: 60_000,
  tunnelIdleTimeoutMs: 300_000,
};
