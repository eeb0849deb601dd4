import { parseTrustedProxies, type TrustedProxies } from "../server/client-address.js";
import { defaultEdgeLimits, type EdgeLimits } from "./proxy/edge-limits.js";

/** The settings every gateway reads from its environment, embedded or standalone (docs/gateway.md, "Limits"). */
export interface GatewayEnvironment {
  limits: EdgeLimits;
  /** TRUSTED_PROXIES: peers whose X-Forwarded-*, Forwarded and X-Real-IP are passed on. */
  trustedProxies: TrustedProxies;
  /** GATEWAY_REDIS_URL and GATEWAY_REDIS_TIMEOUT_MS (default 50): cluster-wide rate limits; undefined without a URL. */
  redis: { url: string; timeoutMs: number } | undefined;
  /** GATEWAY_ADMIN_HOST: the admin port's interface (default: the proxy's HOST). */
  adminHost: string | undefined;
  /** GATEWAY_TLS_PORT: "off", a port, or undefined for the default (tlsPortFor). */
  tlsPort: number | "off" | undefined;
}

/** The TLS port a gateway listens on: GATEWAY_TLS_PORT, else 8443 (0, any free port, when the proxy's port is 0); undefined: off. */
export function tlsPortFor(setting: number | "off" | undefined, proxyPort: number): number | undefined {
  if (setting === "off") return undefined;
  if (setting !== undefined) return setting;
  return proxyPort === 0 ? 0 : 8443;
}

export interface SettingProblem {
  field: string;
  description: string;
}

/** One setting: its variable, bounds and the EdgeLimits field it fills. */
const limitSettings: readonly { name: string; field: keyof EdgeLimits; min: number; max: number }[] = [
  { name: "GATEWAY_MAX_CONNECTIONS", field: "maxConnections", min: 1, max: 1_000_000 },
  { name: "GATEWAY_MAX_CONNECTIONS_PER_CLIENT", field: "maxConnectionsPerClient", min: 1, max: 1_000_000 },
  { name: "GATEWAY_MAX_TUNNELS", field: "maxTunnels", min: 0, max: 1_000_000 },
  { name: "GATEWAY_MAX_HEADER_BYTES", field: "maxHeaderBytes", min: 1024, max: 1024 * 1024 },
  { name: "GATEWAY_HEADER_TIMEOUT_MS", field: "headerTimeoutMs", min: 100, max: 600_000 },
  { name: "GATEWAY_REQUEST_TIMEOUT_MS", field: "requestTimeoutMs", min: 100, max: 86_400_000 },
  { name: "GATEWAY_SEND_TIMEOUT_MS", field: "sendTimeoutMs", min: 100, max: 86_400_000 },
  { name: "GATEWAY_TUNNEL_IDLE_TIMEOUT_MS", field: "tunnelIdleTimeoutMs", min: 1_000, max: 86_400_000 },
];

function readWhole(
  env: Record<string, string | undefined>,
  name: string,
  min: number,
  max: number,
  problems: SettingProblem[],
): number | undefined {
  const raw = env[name]?.trim();
  if (!raw) return undefined;
  const value = Number(raw);
  if (!/^[0-9]+$/.test(raw) || value < min || value > max) {
    problems.push({ field: name, description: `must be a whole number from ${min} to ${max}, got "${raw}"` });
    return undefined;
  }
  return value;
}

/** Reads the gateway's settings; problems are added to `problems` (the defaults stand in for a bad value). */
export function readGatewayEnvironment(
  env: Record<string, string | undefined>,
  problems: SettingProblem[],
  /** TRUSTED_PROXIES as the caller read it already (the platform reads it too): not read, nor reported, twice. */
  trustedProxies?: TrustedProxies,
): GatewayEnvironment {
  const limits: EdgeLimits = { ...defaultEdgeLimits };
  for (const setting of limitSettings) {
    const value = readWhole(env, setting.name, setting.min, setting.max, problems);
    if (value !== undefined) (limits as Record<keyof EdgeLimits, number>)[setting.field] = value;
  }
  if (limits.requestTimeoutMs < limits.headerTimeoutMs) {
    problems.push({
      field: "GATEWAY_REQUEST_TIMEOUT_MS",
      description: "must be at least GATEWAY_HEADER_TIMEOUT_MS (a request includes its head)",
    });
  }
  const redis = readRedis(env, problems);
  const adminHost = env.GATEWAY_ADMIN_HOST?.trim() || undefined;
  const tlsPort = readTlsPort(env.GATEWAY_TLS_PORT, problems);
  if (trustedProxies !== undefined) return { limits, trustedProxies, redis, adminHost, tlsPort };
  const trusted = parseTrustedProxies(env.TRUSTED_PROXIES);
  for (const description of trusted.problems) problems.push({ field: "TRUSTED_PROXIES", description });
  return { limits, trustedProxies: trusted.proxies, redis, adminHost, tlsPort };
}

function readRedis(env: Record<string, string | undefined>, problems: SettingProblem[]): GatewayEnvironment["redis"] {
  const timeoutMs = readWhole(env, "GATEWAY_REDIS_TIMEOUT_MS", 1, 10_000, problems) ?? 50;
  const raw = env.GATEWAY_REDIS_URL?.trim();
  if (!raw) return undefined;
  try {
    const url = new URL(raw);
    if (url.protocol !== "redis:" && url.protocol !== "rediss:") throw new Error("scheme");
    if (url.pathname !== "" && url.pathname !== "/" && !/^\/\d{1,2}$/.test(url.pathname)) throw new Error("database");
  } catch {
    problems.push({
      field: "GATEWAY_REDIS_URL",
      description: "must be redis://host:port/db or rediss://host:port/db (e.g. redis://127.0.0.1:6379/0)",
    });
    return undefined;
  }
  return { url: raw, timeoutMs };
}

function readTlsPort(raw: string | undefined, problems: SettingProblem[]): number | "off" | undefined {
  const text = raw?.trim().toLowerCase();
  if (!text) return undefined;
  if (text === "off") return "off";
  const value = Number(text);
  if (!/^[0-9]+$/.test(text) || value > 65535) {
    problems.push({ field: "GATEWAY_TLS_PORT", description: `must be a port number from 0 to 65535, or "off", got "${raw}"` });
    return undefined;
  }
  return value;
}
