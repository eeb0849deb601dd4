import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { GatewayService, ReferencedSecretSchema, WatchGatewayResponseSchema } from "../../gen/svc/v1/gateway_pb.js";
import type { AppDeps } from "../app-deps.js";
import { DomainError } from "../domain/errors.js";
import { gatewayChangePayload, gatewayTopic, parseGatewayChange, type GatewayChangeKind } from "../domain/gateway/gateway-changes.js";
import { createGatewayWatch, type GatewayEvent, type SecretVersion, type WatchedChange } from "../domain/gateway/watch-gateway.js";
import { principalKey } from "../interceptors/auth.js";
import type { ChangeFeed } from "../storage/change-feed.js";
import { createConfigStore } from "../storage/config-store.js";
import { createGatewayStore } from "../storage/gateway-store.js";
import { sessionsFor } from "./identity-service.js";

// Built in a module of its own, which operator commands load without the service.
export { gatewayCredentialsFor } from "./gateway-credentials-for.js";

/**
 * Tells every gateway stream of the organisation, on every instance, that
 * something of `kind` changed (they re-read it). For writes made outside the
 * functions above, e.g. revoking every session of an identity straight
 * through the identity store.
 */
export async function announceGatewayChange(
  deps: Pick<AppDeps, "changeFeed">,
  organizationId: string,
  kind: GatewayChangeKind,
): Promise<void> {
  await deps.changeFeed.transaction(async (_tx, notify) => notify(gatewayTopic, gatewayChangePayload(organizationId, kind)));
}

/** Every change of the topics a gateway stream follows, as the domain reads them. */
function subscribeChanges(feed: Pick<ChangeFeed, "subscribe">, listener: (change: WatchedChange | undefined) => void) {
  const beforeSpace = (payload: string, last: boolean) => {
    const space = last ? payload.lastIndexOf(" ") : payload.indexOf(" ");
    return space > 0 ? payload.slice(0, space) : undefined;
  };
  const subscriptions = [
    feed.subscribe("config", (event) => {
      const organizationId = event.kind === "gap" ? undefined : beforeSpace(event.payload, true);
      listener(organizationId === undefined ? undefined : { topic: "config", organizationId });
    }),
    feed.subscribe("secrets", (event) => {
      const organizationId = event.kind === "gap" ? undefined : beforeSpace(event.payload, false);
      listener(organizationId === undefined ? undefined : { topic: "secrets", organizationId });
    }),
    feed.subscribe(gatewayTopic, (event) => {
      const change = event.kind === "gap" ? undefined : parseGatewayChange(event.payload);
      listener(change === undefined ? undefined : { topic: "gateway", ...change });
    }),
  ];
  return {
    ready: Promise.all(subscriptions.map((s) => s.ready)).then(() => undefined),
    close: () => {
      for (const s of subscriptions) s.close();
    },
  };
}

type Response = MessageInitShape<typeof WatchGatewayResponseSchema>;

const toSecret = (secret: SecretVersion): MessageInitShape<typeof ReferencedSecretSchema> => ({
  environment: secret.environment,
  name: secret.name,
  version: secret.version,
});

function toResponse(event: GatewayEvent): Response {
  switch (event.kind) {
    case "snapshot":
      return {
        event: {
          case: "snapshot",
          value: {
            organizationId: event.organizationId,
            issuer: event.issuer,
            audience: event.audience,
            revision: event.revision,
            ...(event.yaml !== undefined ? { yaml: event.yaml } : {}),
            signingKeys: event.signingKeys,
            revokedSessions: event.revokedSessions.map((s) => ({ sessionId: s.id, expiresAt: timestampFromDate(s.expiresAt) })),
            consumers: event.consumers.map((c) => ({ consumerId: c.id, name: c.name, keySha256: c.hash })),
            secrets: event.secrets.map(toSecret),
            heartbeatSeconds: event.heartbeatSeconds,
          },
        },
      };
    case "config":
      return { event: { case: "config", value: { revision: event.revision, yaml: event.yaml, secrets: event.secrets.map(toSecret) } } };
    case "signing_keys":
      return { event: { case: "signingKeys", value: { keys: event.keys } } };
    case "sessions_revoked":
      return {
        event: {
          case: "sessionsRevoked",
          value: { sessions: event.sessions.map((s) => ({ sessionId: s.id, expiresAt: timestampFromDate(s.expiresAt) })) },
        },
      };
    case "consumer_created":
      return {
        event: {
          case: "consumerCreated",
          value: { consumerId: event.consumer.id, name: event.consumer.name, keySha256: event.consumer.hash },
        },
      };
    case "consumer_revoked":
      return { event: { case: "consumerRevoked", value: { consumerId: event.consumerId } } };
    case "secret_changed":
      return { event: { case: "secretChanged", value: toSecret(event.secret) } };
    case "heartbeat":
      return { event: { case: "heartbeat", value: { sentAt: timestampFromDate(event.at) } } };
  }
}

export interface GatewayServiceOptions {
  /** Between heartbeats and last-seen refreshes (default 20 s). */
  heartbeatMs?: number;
}

/** svc.v1.GatewayService: what a data-plane gateway follows. */
export function createGatewayService(deps: AppDeps, options: GatewayServiceOptions = {}): Partial<ServiceImpl<typeof GatewayService>> {
  const { database } = deps;
  const watch = createGatewayWatch({
    gatewayStore: createGatewayStore(database.client),
    configStore: createConfigStore(database.client, database.provider),
    subscribe: (listener) => subscribeChanges(deps.changeFeed, listener),
    signingKeys: async (organizationId) => (await sessionsFor(deps).publishedKeys(organizationId)).keys,
    issuer: deps.config.publicUrl,
    clock: deps.clock,
    ...(options.heartbeatMs !== undefined ? { heartbeatMs: options.heartbeatMs } : {}),
    onError: (error) => deps.logger.warn({ err: error }, "gateway stream bookkeeping failed"),
  });

  return {
    async *watchGateway(req, ctx) {
      const gateway = gatewayOf(ctx);
      for await (const event of watch.watch({
        organizationId: gateway.organizationId,
        gatewayKeyId: gateway.keyId,
        gatewayId: req.gatewayId,
        sinceRevision: req.sinceRevision,
        signal: ctx.signal,
      })) {
        yield toResponse(event);
      }
    },
  };
}

/** The gateway key the auth interceptor established. */
function gatewayOf(ctx: HandlerContext) {
  const principal = ctx.values.get(principalKey);
  if (principal.kind !== "gateway_key") {
    throw new DomainError("permission_denied", "wrong_credential_kind", "this operation needs a gateway key (gw_...)");
  }
  return principal;
}
