import { gatewayChanges } from "../domain/changes/topics.js";
import { createGatewayCredentials, type GatewayCredentials } from "../domain/gateway/gateway-credentials.js";
import { createGatewaySecretScope, type GatewaySecretScope } from "../domain/gateway/gateway-secret-scope.js";
import { createGatewayWatch } from "../domain/gateway/watch-gateway.js";
import { createConfigStore } from "../storage/config-store.js";
import { createGatewayStore } from "../storage/gateway-store.js";
import type { Platform } from "./platform.js";
import { transact } from "./transactions.js";

/**
 * Gateway keys and consumer keys (the dashboard, `gatehouse keys --kind
 * gateway`, `gatehouse consumers`, the embedded gateway): what they change
 * reaches every instance's gateway streams and credential caches.
 */
export function gatewayCredentialsOf(platform: Platform): GatewayCredentials {
  return platform.memo("gateway-credentials", () =>
    createGatewayCredentials({
      store: createGatewayStore(platform.database.client),
      transaction: (fn) =>
        transact(platform, ({ tx, publish, events }) =>
          fn(createGatewayStore(tx), (organizationId, kind) => publish(gatewayChanges, { organizationId, kind }), events),
        ),
      credentialsChanged: () => platform.credentialsChanged(),
      clock: platform.clock,
      random: platform.random,
    }),
  );
}

/** What a gateway key may retrieve: the secrets its organisation's current configuration references. */
export function gatewaySecretScopeOf(platform: Platform): GatewaySecretScope {
  return platform.memo("gateway-secret-scope", () => {
    const store = createGatewayStore(platform.database.client);
    return createGatewaySecretScope({ plugins: (organizationId) => store.listSecretHolders(organizationId) });
  });
}

/** The gateways' streams (GatewayService.WatchGateway). */
export function gatewayWatchOf(
  platform: Platform,
  parts: { signingKeys(organizationId: string): Promise<import("../domain/identity/session-token.js").PublicJwk[]> },
  options: { heartbeatMs?: number } = {},
) {
  const { database } = platform;
  return createGatewayWatch({
    gatewayStore: createGatewayStore(database.client),
    configStore: createConfigStore(database.client, database.provider),
    changes: platform.changes,
    signingKeys: parts.signingKeys,
    issuer: platform.config.publicUrl,
    clock: platform.clock,
    ...(options.heartbeatMs !== undefined ? { heartbeatMs: options.heartbeatMs } : {}),
    onError: (error) => platform.logger.warn({ err: error }, "gateway stream bookkeeping failed"),
  });
}
