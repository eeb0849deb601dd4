import type { AppDeps } from "../app-deps.js";
import { gatewayChangePayload, gatewayTopic } from "../domain/gateway/gateway-changes.js";
import { createGatewayCredentials, type GatewayCredentials } from "../domain/gateway/gateway-credentials.js";
import { createGatewayStore } from "../storage/gateway-store.js";

type CredentialsDeps = Pick<AppDeps, "database" | "changeFeed" | "clock" | "random" | "credentialsChanged">;

const built = new WeakMap<object, GatewayCredentials>();

/**
 * The gateway-key and consumer-key functions of one app (or of an operator
 * command's process: pass its database, a change feed on it, and its
 * credentialsChanged), so that what they change reaches every instance's
 * gateway streams and credential caches.
 */
export function gatewayCredentialsFor(deps: CredentialsDeps): GatewayCredentials {
  let credentials = built.get(deps);
  if (!credentials) {
    const { database, changeFeed: feed } = deps;
    credentials = createGatewayCredentials({
      store: createGatewayStore(database.client),
      transaction: (fn) =>
        feed.transaction((tx, notify) =>
          fn(createGatewayStore(tx), (organizationId, kind) => notify(gatewayTopic, gatewayChangePayload(organizationId, kind))),
        ),
      credentialsChanged: () => deps.credentialsChanged(),
      clock: deps.clock,
      random: deps.random,
    });
    built.set(deps, credentials);
  }
  return credentials;
}
