import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { WebhookDeliveryStatus, type WebhooksService } from "../../gen/svc/v1/webhooks_pb.js";
import { DomainError } from "../domain/errors.js";
import type { AttemptRecord, DeliveryRecord } from "../domain/webhooks/webhook-store.js";
import type { EndpointView, Webhooks } from "../domain/webhooks/webhooks.js";
import { principalKey } from "../interceptors/auth.js";

export interface WebhooksServiceParts {
  /** The webhooks domain (src/composition/webhooks.ts). */
  webhooks: Webhooks;
}

const statuses = {
  pending: WebhookDeliveryStatus.PENDING,
  delivered: WebhookDeliveryStatus.DELIVERED,
  failed: WebhookDeliveryStatus.FAILED,
} as const;

function toEndpoint(endpoint: EndpointView) {
  return {
    endpointId: endpoint.id,
    url: endpoint.url,
    description: endpoint.description,
    eventTypes: endpoint.eventTypes,
    enabled: endpoint.enabled,
    disabledReason: endpoint.disabledReason ?? "",
    createdAt: timestampFromDate(endpoint.createdAt),
    updatedAt: timestampFromDate(endpoint.updatedAt),
    ...(endpoint.previousSecretExpiresAt ? { previousSecretExpiresAt: timestampFromDate(endpoint.previousSecretExpiresAt) } : {}),
  };
}

function toAttempt(attempt: AttemptRecord) {
  return {
    attemptId: attempt.id,
    number: attempt.number,
    attemptedAt: timestampFromDate(attempt.attemptedAt),
    durationMs: attempt.durationMs,
    ...(attempt.statusCode !== null ? { statusCode: attempt.statusCode } : {}),
    error: attempt.error ?? "",
  };
}

function toDelivery(delivery: DeliveryRecord) {
  return {
    deliveryId: delivery.id,
    eventId: delivery.eventId,
    eventType: delivery.eventType,
    status: statuses[delivery.status],
    attempts: delivery.attempts,
    nextAttemptAt: timestampFromDate(delivery.nextAttemptAt),
    createdAt: timestampFromDate(delivery.createdAt),
    updatedAt: timestampFromDate(delivery.updatedAt),
    ...(delivery.lastAttempt ? { lastAttempt: toAttempt(delivery.lastAttempt) } : {}),
  };
}

/** The organisation the auth interceptor checked the admin's membership of. */
function organizationOf(ctx: HandlerContext): string {
  const principal = ctx.values.get(principalKey);
  if (principal.kind !== "api_key" && principal.kind !== "dashboard") {
    throw new DomainError("permission_denied", "wrong_credential_kind", "webhooks are managed with an admin API key or the dashboard");
  }
  return principal.organizationId;
}

/** svc.v1.WebhooksService: thin mapping between the RPC messages and the webhooks domain. */
export function createWebhooksService(parts: WebhooksServiceParts): Partial<ServiceImpl<typeof WebhooksService>> {
  const { webhooks } = parts;

  /** A delivery of the endpoint named in the request (one of another endpoint is as unknown as none). */
  async function deliveryOf(ctx: HandlerContext, endpointId: string, deliveryId: string) {
    const found = await webhooks.listAttempts(organizationOf(ctx), deliveryId);
    if (endpointId !== "" && found.delivery.endpointId !== endpointId.trim().toLowerCase()) {
      throw new DomainError("not_found", "webhook_delivery_not_found", `the endpoint has no webhook delivery ${found.delivery.id}`);
    }
    return found;
  }

  return {
    async createWebhookEndpoint(req, ctx) {
      const created = await webhooks.createEndpoint(organizationOf(ctx), {
        url: req.url,
        description: req.description,
        eventTypes: req.eventTypes,
        enabled: req.enabled,
      });
      return { endpoint: toEndpoint(created.endpoint), secret: created.secret };
    },
    async listWebhookEndpoints(_req, ctx) {
      return { endpoints: (await webhooks.listEndpoints(organizationOf(ctx))).map(toEndpoint) };
    },
    async getWebhookEndpoint(req, ctx) {
      return { endpoint: toEndpoint(await webhooks.getEndpoint(organizationOf(ctx), req.endpointId)) };
    },
    async updateWebhookEndpoint(req, ctx) {
      const updated = await webhooks.updateEndpoint(organizationOf(ctx), req.endpointId, {
        url: req.url,
        description: req.description,
        enabled: req.enabled,
        eventTypes: req.eventTypes?.types,
      });
      return { endpoint: toEndpoint(updated) };
    },
    async deleteWebhookEndpoint(req, ctx) {
      await webhooks.deleteEndpoint(organizationOf(ctx), req.endpointId);
      return {};
    },
    async rotateWebhookSecret(req, ctx) {
      const rotated = await webhooks.rotateSecret(organizationOf(ctx), req.endpointId);
      return { endpoint: toEndpoint(rotated.endpoint), secret: rotated.secret };
    },
    async listWebhookDeliveries(req, ctx) {
      const page = await webhooks.listDeliveries(organizationOf(ctx), req.endpointId, { pageSize: req.pageSize, pageToken: req.pageToken });
      return { deliveries: page.deliveries.map(toDelivery), nextPageToken: page.nextPageToken };
    },
    async listWebhookAttempts(req, ctx) {
      const found = await deliveryOf(ctx, req.endpointId, req.deliveryId);
      return { delivery: toDelivery(found.delivery), attempts: found.attempts.map(toAttempt) };
    },
    async redeliverWebhook(req, ctx) {
      await deliveryOf(ctx, req.endpointId, req.deliveryId);
      return { delivery: toDelivery(await webhooks.redeliver(organizationOf(ctx), req.deliveryId)) };
    },
    async sendWebhookTestEvent(req, ctx) {
      return webhooks.sendTestEvent(organizationOf(ctx), req.endpointId);
    },
  };
}
