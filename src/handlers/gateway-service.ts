import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { GatewayService, ReferencedSecretSchema, WatchGatewayResponseSchema } from "../../gen/svc/v1/gateway_pb.js";
import { DomainError } from "../domain/errors.js";
import type { GatewayEvent, GatewayWatch, SecretVersion } from "../domain/gateway/watch-gateway.js";
import { principalKey } from "../interceptors/auth.js";

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

export interface GatewayServiceParts {
  /** The gateways' streams (src/composition/gateway.ts). */
  watch: GatewayWatch;
}

/** svc.v1.GatewayService: what a data-plane gateway follows. */
export function createGatewayService(parts: GatewayServiceParts): Partial<ServiceImpl<typeof GatewayService>> {
  const { watch } = parts;
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
