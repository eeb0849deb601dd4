import type { Config } from "../config.js";
import type { GatewayCredentials } from "../domain/gateway/gateway-credentials.js";
import type { Logger } from "../server/logger.js";
import type { TracingSettings } from "../tracing/tracing-settings.js";
import { tlsPortFor } from "./gateway-settings.js";
import { startGateway, type RunningGateway } from "./start-gateway.js";

/** What the embedded gateway needs of the platform beside it: its settings, a logger, and gateway keys. */
export interface EmbeddedGatewayDeps {
  config: Pick<Config, "host" | "dataDir" | "gateway" | "transport">;
  logger: Logger;
  gatewayCredentials: Pick<GatewayCredentials, "listGatewayKeys" | "revokeGatewayKey" | "createGatewayKey">;
  /** The organisation it serves: the one created first. */
  firstOrganizationId(): Promise<string | undefined>;
}

/** The name of the gateway key `gatehouse serve` makes for its own gateway. */
export const embeddedGatewayKeyName = "embedded gateway (gatehouse serve)";

/**
 * The gateway `gatehouse serve` starts beside the platform (GATEWAY_PORT,
 * default 8000; "off" disables it), for the organisation created by
 * `gatehouse init` or at first start (the oldest one). It is an ordinary
 * gateway following the platform over HTTP with a gateway key: the key is
 * stored only hashed, so each start makes a fresh one and revokes the one
 * the previous start made. Undefined when it is off or there is no organisation yet.
 */
export async function startEmbeddedGateway(
  deps: EmbeddedGatewayDeps,
  platformUrl: string,
  /** Spans exported over OTLP, as the platform's (docs/gateway.md, "Tracing"); undefined: W3C Trace Context only. */
  tracing?: TracingSettings,
): Promise<RunningGateway | undefined> {
  const { config } = deps;
  if (config.gateway.port === "off") return undefined;
  const organizationId = await deps.firstOrganizationId();
  if (organizationId === undefined) return undefined;
  const credentials = deps.gatewayCredentials;
  for (const key of await credentials.listGatewayKeys(organizationId)) {
    if (key.name === embeddedGatewayKeyName) await credentials.revokeGatewayKey(organizationId, key.id);
  }
  const { gatewayKey } = await credentials.createGatewayKey({ organizationId, name: embeddedGatewayKeyName });
  return startGateway(
    {
      host: config.host,
      port: config.gateway.port,
      adminPort: config.gateway.adminPort,
      urls: [platformUrl],
      gatewayKey,
      gatewayId: "embedded",
      cacheFile: config.gateway.cacheFile ?? { directory: config.dataDir },
      limits: config.gateway.environment.limits,
      trustedProxies: config.gateway.environment.trustedProxies,
      // The platform's own connections share the process's open files.
      sharedDescriptors: config.transport.maxConnections,
      redis: config.gateway.environment.redis,
      adminHost: config.gateway.environment.adminHost,
      tlsPort: tlsPortFor(config.gateway.environment.tlsPort, config.gateway.port),
      tracing,
    },
    deps.logger,
  );
}
