import type { App } from "../app.js";
import { createTenancyStore } from "../storage/tenancy-store.js";
import { startGateway, type RunningGateway } from "./start-gateway.js";

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
export async function startEmbeddedGateway(app: App, platformUrl: string): Promise<RunningGateway | undefined> {
  const { config } = app;
  if (config.gateway.port === "off") return undefined;
  const [organization] = await createTenancyStore(app.database.client).listOrganizations();
  if (!organization) return undefined;
  const credentials = app.gatewayCredentials;
  for (const key of await credentials.listGatewayKeys(organization.id)) {
    if (key.name === embeddedGatewayKeyName) await credentials.revokeGatewayKey(organization.id, key.id);
  }
  const { gatewayKey } = await credentials.createGatewayKey({ organizationId: organization.id, name: embeddedGatewayKeyName });
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
    },
    app.logger,
  );
}
