import { CliError } from "../errors.js";
import { type CommandGroup, examples, helpGroups } from "../program.js";

/** `gatehouse gateway`: a standalone data-plane process (docs/cli.md, "`gatehouse gateway`"). */
export const registerGateway: CommandGroup = (program, cli) => {
  const gateway = program
    .command("gateway")
    .helpGroup(helpGroups.operator)
    .description("run a stateless gateway that follows the control plane and enforces one organisation's configuration")
    .addHelpText(
      "after",
      "\nSettings (environment):\n" +
        "  GATEHOUSE_GATEWAY_KEY  the gateway key (gw_...; gatehouse keys create --kind gateway); required\n" +
        "  GATEHOUSE_URL          control plane(s), comma-separated, followed in order with failover\n" +
        "                         (default http://127.0.0.1:8080)\n" +
        "  GATEWAY_PORT, HOST     the proxy's address (default 127.0.0.1:8000)\n" +
        "  GATEWAY_ADMIN_PORT     /healthz, /readyz and /metrics (default: GATEWAY_PORT + 1)\n" +
        "  GATEWAY_ADMIN_HOST     the admin port's interface (default: HOST; bind it to a private one)\n" +
        "  GATEWAY_TLS_PORT       TLS (h2 and http/1.1 by ALPN) for domains with a certificate\n" +
        "                         (default 8443; 0 when GATEWAY_PORT is 0; off disables it)\n" +
        "  GATEWAY_CACHE          last-known-good file (default ./data/gateway-<organization_id>.json)\n" +
        "  GATEWAY_ID             its name among the organisation's connected gateways (default host-pid)\n" +
        "  GATEWAY_UPSTREAM_TIMEOUT_MS\n" +
        "                         how long an upstream may take to answer before the gateway answers 504\n" +
        "                         (100 to 600000; default 30000)\n" +
        "  GATEWAY_MAX_CONNECTIONS (10000), GATEWAY_MAX_CONNECTIONS_PER_CLIENT (256), GATEWAY_MAX_TUNNELS (5000),\n" +
        "  GATEWAY_MAX_HEADER_BYTES (16384), GATEWAY_HEADER_TIMEOUT_MS (10000), GATEWAY_REQUEST_TIMEOUT_MS (300000),\n" +
        "  GATEWAY_SEND_TIMEOUT_MS (60000), GATEWAY_TUNNEL_IDLE_TIMEOUT_MS (300000)\n" +
        "                         limits per gateway process (docs/gateway.md, Limits)\n" +
        "  GATEWAY_REDIS_URL      redis://host:port/db: rate limits of scope cluster, one count across gateways\n" +
        "  GATEWAY_REDIS_TIMEOUT_MS\n" +
        "                         how long a cluster check may take before the gateway counts for itself (default 50)\n" +
        "  TRUSTED_PROXIES        proxies in front of the gateway whose X-Forwarded-*, Forwarded and X-Real-IP\n" +
        "                         are passed on (comma-separated addresses or CIDR blocks; default none)\n" +
        "  OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL\n" +
        "                         (http/protobuf or http/json), OTEL_SERVICE_NAME (default gatehouse-gateway)\n" +
        "                         export spans over OTLP (docs/gateway.md, Tracing); W3C traceparent is passed on always\n" +
        "The gateway opens no database: it learns the organisation, the session issuer and keys, the\n" +
        "configuration, consumers, revocations and referenced secrets from the control plane.\n" +
        "With --json: one line {gateway_url, gateway_admin_url} once listening.",
    )
    .action(async () => {
      const env = process.env;
      const gatewayKey = env.GATEHOUSE_GATEWAY_KEY?.trim();
      if (!gatewayKey) {
        throw new CliError(
          "missing_configuration",
          "set GATEHOUSE_GATEWAY_KEY to a gateway key (gatehouse keys create --org <id> --kind gateway --name <name>)",
        );
      }
      const [
        { startGateway, defaultGatewayId },
        { readGatewayEnvironment, tlsPortFor },
        { readTracingSettings },
        { createLoggers },
        { resolve },
      ] = await Promise.all([
        import("../../gateway/start-gateway.js"),
        import("../../gateway/gateway-settings.js"),
        import("../../tracing/tracing-settings.js"),
        import("../../server/logger.js"),
        import("node:path"),
      ]);
      const port = readPort(env.GATEWAY_PORT, "GATEWAY_PORT", 8000);
      const adminPort = env.GATEWAY_ADMIN_PORT?.trim() ? readPort(env.GATEWAY_ADMIN_PORT, "GATEWAY_ADMIN_PORT", 8001) : undefined;
      const dataDir = resolve(env.GATEHOUSE_DATA_DIR?.trim() || "data");
      const upstreamTimeoutMs = readInteger(env.GATEWAY_UPSTREAM_TIMEOUT_MS, "GATEWAY_UPSTREAM_TIMEOUT_MS", 100, 600_000);
      const problems: { field: string; description: string }[] = [];
      const { limits, trustedProxies, redis, adminHost, tlsPort } = readGatewayEnvironment(env, problems);
      const tracing = readTracingSettings(env, problems);
      const [problem] = problems;
      if (problem !== undefined) throw new CliError("invalid_configuration", `${problem.field} ${problem.description}`);
      const loggers = createLoggers(env.LOG_LEVEL?.trim() || "info");
      const running = await startGateway(
        {
          host: env.HOST?.trim() || "127.0.0.1",
          port,
          adminPort,
          urls: (env.GATEHOUSE_URL?.trim() || "http://127.0.0.1:8080").split(","),
          gatewayKey,
          gatewayId: env.GATEWAY_ID?.trim() || defaultGatewayId(),
          cacheFile: env.GATEWAY_CACHE?.trim() ? resolve(env.GATEWAY_CACHE.trim()) : { directory: dataDir },
          ...(upstreamTimeoutMs !== undefined ? { upstreamTimeoutMs } : {}),
          limits,
          trustedProxies,
          redis,
          adminHost,
          tlsPort: tlsPortFor(tlsPort, port),
          tracing,
        },
        loggers.app,
      );
      if (cli.out.json) {
        cli.out.write(
          `${JSON.stringify({
            gateway_url: running.addresses.url,
            gateway_admin_url: running.addresses.adminUrl,
            ...(running.addresses.tlsUrl !== undefined ? { gateway_tls_url: running.addresses.tlsUrl } : {}),
          })}\n`,
        );
      } else {
        cli.out.write(
          `Gatehouse gateway  ${running.addresses.url}\n           admin    ${running.addresses.adminUrl}\n` +
            (running.addresses.tlsUrl !== undefined ? `           TLS      ${running.addresses.tlsUrl}\n` : ""),
        );
      }
      await new Promise<void>((done) => {
        process.once("SIGTERM", () => done());
        process.once("SIGINT", () => done());
      });
      await running.close();
      loggers.flush();
    });
  examples(gateway, [
    "GATEHOUSE_GATEWAY_KEY=gw_... gatehouse gateway",
    "GATEHOUSE_URL=https://cp1.example.com,https://cp2.example.com GATEWAY_PORT=80 GATEHOUSE_GATEWAY_KEY=gw_... gatehouse gateway",
  ]);
};

/** An integer setting from min to max, or undefined when it is not set (the default applies). */
function readInteger(raw: string | undefined, name: string, min: number, max: number): number | undefined {
  const text = raw?.trim();
  if (!text) return undefined;
  const value = Number(text);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new CliError("invalid_configuration", `${name} must be a whole number of milliseconds from ${min} to ${max}`);
  }
  return value;
}

function readPort(raw: string | undefined, name: string, fallback: number): number {
  const text = raw?.trim();
  if (!text) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 0 || value > 65535) {
    throw new CliError("invalid_configuration", `${name} must be a port number from 0 to 65535`);
  }
  return value;
}
