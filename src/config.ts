import { resolve } from "node:path";
import { DomainError } from "./domain/errors.js";
import { defaultSignInLimits, type SignInLimits } from "./domain/identity/sign-in-limits.js";
import { readGatewayEnvironment, type GatewayEnvironment } from "./gateway/gateway-settings.js";
import { parseTrustedProxies, type TrustedProxies } from "./server/client-address.js";

/** Everything Gatehouse reads from its environment, validated once at start. */
export interface Config {
  /** Address the platform API listens on. */
  host: string;
  port: number;
  /** Port of the sample plant API. */
  samplePort: number;
  /** Port of the gRPC (HTTP/2 cleartext) listener. */
  grpcPort: number;
  /** The platform's public base address: JWT issuer, default WebAuthn origin. */
  publicUrl: string;
  /** Folder holding the SQLite file and the generated master key. */
  dataDir: string;
  database: DatabaseConfig;
  /** Base64 master key from GATEHOUSE_MASTER_KEY, or undefined to use the data directory's. */
  masterKeyBase64: string | undefined;
  /**
   * Base64 master keys being retired (GATEHOUSE_PREVIOUS_MASTER_KEYS,
   * comma-separated): they unwrap, never wrap (docs/secrets.md, "Rotating the master key").
   */
  previousMasterKeysBase64: string[];
  /**
   * SQLite: how long an operator command's write waits for another process's
   * write lock (a busy server's) before it gives up (GATEHOUSE_LOCK_WAIT_SECONDS,
   * default 60 s; docs/cli.md, "Beside a running server").
   */
  operatorLockWaitMs: number;
  logLevel: string;
  /** Request body limits in bytes. */
  limits: { jsonBody: number; configBody: number };
  /** Connection and stream limits of both ports (docs/configuration.md, "Limits on unauthenticated work"). */
  transport: TransportLimits;
  /** The gateway started by `gatehouse serve` (and the defaults of `gatehouse gateway`). */
  gateway: GatewayConfig;
  /**
   * How long authentication may reuse what it read about a credential when no
   * change notification reaches it (0: read the database on every request).
   */
  credentialCacheMs: number;
  /** Reverse proxies whose X-Forwarded-For names the client (TRUSTED_PROXIES; default none: the TCP peer is the client). */
  trustedProxies: TrustedProxies;
  /** Bounds on the work anyone can cause before authenticating (password hashing, sign-in attempts). */
  signIn: SignInLimits;
  /** Webhook deliveries (docs/events.md). */
  webhooks: WebhooksConfig;
}

export interface WebhooksConfig {
  /**
   * WEBHOOKS_ALLOW_PRIVATE_NETWORKS=true: endpoints may be http URLs and
   * loopback, private or link-local addresses (development, or receivers on
   * the operator's own network; docs/security.md, "Events (webhooks)").
   */
  allowPrivateNetworks: boolean;
  /**
   * WEBHOOKS_LEASE_SECONDS (default 30): how long an instance's claim on a
   * delivery lasts unless renewed; a killed instance's deliveries are taken
   * over by another within it.
   */
  leaseMs: number;
}

/**
 * What a client may hold open before it has authenticated, and for how long,
 * so that slow or half-open requests cannot pile up (slowloris, HTTP/2 stream floods).
 */
export interface TransportLimits {
  /** HTTP/1.1: time to receive a request's headers. */
  headersTimeoutMs: number;
  /** HTTP/1.1: time to receive a whole request (headers and body). */
  requestTimeoutMs: number;
  /** HTTP/1.1: how long an idle keep-alive connection stays open. */
  keepAliveTimeoutMs: number;
  /** Open connections per port (HTTP/1.1) or HTTP/2 sessions (gRPC port). */
  maxConnections: number;
  /** HTTP/2: streams a session may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxConcurrentStreams: number;
  /** HTTP/2: streams of a session still waiting for their first message (not yet authenticated). */
  maxPendingStreams: number;
  /** HTTP/2: time from a stream's headers to its first complete message. */
  firstMessageTimeoutMs: number;
  /** HTTP/2: how long a session with no open stream stays open. */
  idleTimeoutMs: number;
}

export interface GatewayConfig {
  /** GATEWAY_PORT: the proxy's port; "off" starts no embedded gateway. Default 8000 (0 when PORT is 0). */
  port: number | "off";
  /** GATEWAY_ADMIN_PORT: /healthz, /readyz and /metrics. Default: the proxy's port + 1. */
  adminPort: number | undefined;
  /** GATEWAY_CACHE: the last-known-good file; default gateway-<organization_id>.json in the data directory. */
  cacheFile: string | undefined;
  /** Limits and trusted proxies (GATEWAY_MAX_*, GATEWAY_*_TIMEOUT_MS, TRUSTED_PROXIES). */
  environment: GatewayEnvironment;
}

export type DatabaseConfig = { provider: "sqlite"; file: string } | { provider: "postgresql"; url: string };

type Env = Record<string, string | undefined>;

/** Reads the configuration from environment variables, with embedded defaults. */
export function loadConfig(env: Env = process.env, cwd = process.cwd()): Config {
  const problems: { field: string; description: string }[] = [];
  const port = readPort(env, "PORT", 8080, problems);
  const samplePort = readPort(env, "SAMPLE_PORT", 8081, problems);
  const grpcPort = readPort(env, "GRPC_PORT", 8082, problems);
  const host = env.HOST?.trim() || "127.0.0.1";
  const dataDir = resolve(cwd, env.GATEHOUSE_DATA_DIR?.trim() || "data");
  const publicUrl = readPublicUrl(env.PUBLIC_URL, host, port, problems);
  const database = readDatabase(env.DATABASE_URL, dataDir, cwd, problems);
  const credentialCacheMs = readInteger(env, "CREDENTIAL_CACHE_MS", 5_000, 0, 60_000, problems);
  const operatorLockWaitMs = readInteger(env, "GATEHOUSE_LOCK_WAIT_SECONDS", 60, 1, 3600, problems) * 1000;
  const transport: TransportLimits = {
    headersTimeoutMs: readInteger(env, "HTTP_HEADERS_TIMEOUT_MS", 10_000, 100, 600_000, problems),
    requestTimeoutMs: readInteger(env, "HTTP_REQUEST_TIMEOUT_MS", 30_000, 100, 3_600_000, problems),
    keepAliveTimeoutMs: readInteger(env, "HTTP_KEEP_ALIVE_TIMEOUT_MS", 65_000, 100, 3_600_000, problems),
    maxConnections: readInteger(env, "MAX_CONNECTIONS", 10_000, 1, 1_000_000, problems),
    maxConcurrentStreams: readInteger(env, "GRPC_MAX_CONCURRENT_STREAMS", 100, 1, 10_000, problems),
    maxPendingStreams: readInteger(env, "GRPC_MAX_PENDING_STREAMS", 16, 1, 10_000, problems),
    firstMessageTimeoutMs: readInteger(env, "GRPC_FIRST_MESSAGE_TIMEOUT_MS", 10_000, 100, 600_000, problems),
    idleTimeoutMs: readInteger(env, "GRPC_IDLE_TIMEOUT_MS", 300_000, 1_000, 3_600_000, problems),
  };
  const trusted = parseTrustedProxies(env.TRUSTED_PROXIES);
  for (const description of trusted.problems) problems.push({ field: "TRUSTED_PROXIES", description });
  const gatewayPortRaw = env.GATEWAY_PORT?.trim().toLowerCase();
  const gateway: GatewayConfig = {
    port: gatewayPortRaw === "off" ? "off" : readPort(env, "GATEWAY_PORT", port === 0 ? 0 : 8000, problems),
    adminPort: env.GATEWAY_ADMIN_PORT?.trim() ? readPort(env, "GATEWAY_ADMIN_PORT", 8001, problems) : undefined,
    cacheFile: env.GATEWAY_CACHE?.trim() ? resolve(cwd, env.GATEWAY_CACHE.trim()) : undefined,
    environment: readGatewayEnvironment(env, problems, trusted.proxies),
  };
  if (transport.requestTimeoutMs < transport.headersTimeoutMs) {
    problems.push({
      field: "HTTP_REQUEST_TIMEOUT_MS",
      description: "must be at least HTTP_HEADERS_TIMEOUT_MS (a request includes its headers)",
    });
  }
  const signIn: SignInLimits = {
    hashingQueueLimit: readInteger(env, "HASHING_QUEUE_LIMIT", defaultSignInLimits.hashingQueueLimit, 1, 100_000, problems),
    hashingQueuePerClient: readInteger(env, "HASHING_QUEUE_PER_CLIENT", defaultSignInLimits.hashingQueuePerClient, 1, 100_000, problems),
    concurrencyPerClient: readInteger(env, "SIGN_IN_CONCURRENCY_PER_CLIENT", defaultSignInLimits.concurrencyPerClient, 1, 10_000, problems),
    dashboardPerMinute: readInteger(
      env,
      "DASHBOARD_SIGN_IN_LIMIT_PER_MINUTE",
      defaultSignInLimits.dashboardPerMinute,
      1,
      1_000_000,
      problems,
    ),
    refusalDelayMs: readInteger(env, "SIGN_IN_REFUSAL_DELAY_MS", defaultSignInLimits.refusalDelayMs, 0, 10_000, problems),
  };
  const allowPrivateRaw = env.WEBHOOKS_ALLOW_PRIVATE_NETWORKS?.trim().toLowerCase() ?? "";
  if (!["", "true", "false"].includes(allowPrivateRaw)) {
    problems.push({
      field: "WEBHOOKS_ALLOW_PRIVATE_NETWORKS",
      description: `must be true or false, got "${env.WEBHOOKS_ALLOW_PRIVATE_NETWORKS}"`,
    });
  }
  const webhooks: WebhooksConfig = {
    allowPrivateNetworks: allowPrivateRaw === "true",
    leaseMs: readInteger(env, "WEBHOOKS_LEASE_SECONDS", 30, 2, 300, problems) * 1000,
  };
  const masterKeyBase64 = env.GATEHOUSE_MASTER_KEY?.trim() || undefined;
  if (masterKeyBase64 !== undefined && Buffer.from(masterKeyBase64, "base64").length !== 32) {
    problems.push({
      field: "GATEHOUSE_MASTER_KEY",
      description: "must be 32 bytes, base64-encoded (e.g. `openssl rand -base64 32`)",
    });
  }
  const previousMasterKeysBase64 = (env.GATEHOUSE_PREVIOUS_MASTER_KEYS ?? "")
    .split(",")
    .map((key) => key.trim())
    .filter((key) => key !== "");
  previousMasterKeysBase64.forEach((key, i) => {
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(key) || Buffer.from(key, "base64").length !== 32) {
      problems.push({
        field: `GATEHOUSE_PREVIOUS_MASTER_KEYS[${i}]`,
        description: "must be 32 bytes, base64-encoded; separate the keys with commas",
      });
    }
  });
  if (problems.length > 0) {
    throw new DomainError("invalid_argument", "invalid_configuration", "invalid configuration", problems);
  }
  return {
    host,
    port,
    samplePort,
    grpcPort,
    publicUrl,
    dataDir,
    database,
    masterKeyBase64,
    previousMasterKeysBase64,
    operatorLockWaitMs,
    logLevel: env.LOG_LEVEL?.trim() || "info",
    limits: { jsonBody: 1024 * 1024, configBody: 5 * 1024 * 1024 },
    credentialCacheMs,
    transport,
    gateway,
    trustedProxies: trusted.proxies,
    signIn,
    webhooks,
  };
}

function readInteger(
  env: Env,
  name: string,
  fallback: number,
  min: number,
  max: number,
  problems: { field: string; description: string }[],
): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (!/^[0-9]+$/.test(raw) || value < min || value > max) {
    problems.push({ field: name, description: `must be a whole number from ${min} to ${max}, got "${raw}"` });
    return fallback;
  }
  return value;
}

function readPort(env: Env, name: string, fallback: number, problems: { field: string; description: string }[]): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0 || value > 65535) {
    problems.push({ field: name, description: `must be a port number from 0 to 65535, got "${raw}"` });
    return fallback;
  }
  return value;
}

function readPublicUrl(raw: string | undefined, host: string, port: number, problems: { field: string; description: string }[]): string {
  const fallback = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  if (!raw?.trim()) return fallback;
  try {
    const url = new URL(raw.trim());
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error("scheme");
    return url.origin;
  } catch {
    problems.push({ field: "PUBLIC_URL", description: `must be an http(s) origin such as https://auth.example.com, got "${raw}"` });
    return fallback;
  }
}

function readDatabase(
  raw: string | undefined,
  dataDir: string,
  cwd: string,
  problems: { field: string; description: string }[],
): DatabaseConfig {
  const url = raw?.trim();
  if (!url) return { provider: "sqlite", file: resolve(dataDir, "gatehouse.db") };
  if (url.startsWith("postgresql://") || url.startsWith("postgres://")) return { provider: "postgresql", url };
  if (url.startsWith("file:")) return { provider: "sqlite", file: resolve(cwd, url.slice("file:".length)) };
  problems.push({
    field: "DATABASE_URL",
    description: "must start with file: (SQLite) or postgresql:// (PostgreSQL)",
  });
  return { provider: "sqlite", file: resolve(dataDir, "gatehouse.db") };
}
