import { randomUUID } from "node:crypto";
import { isIP } from "node:net";
import type { MasterKeyring } from "../../crypto/envelope.js";
import type { RandomSource } from "../../crypto/tokens.js";
import { refusedAddress } from "../../net/address-policy.js";
import type { Publish } from "../changes/topic.js";
import { webhookDeliveriesDue } from "../changes/topics.js";
import type { Clock } from "../clock.js";
import { DomainError, invalidArgument, type Violation } from "../errors.js";
import { eventBody, eventTypes, isEventType, type EventType } from "../events/catalogue.js";
import { newEventId } from "../events/record-events.js";
import { readUuid } from "../identity/identifiers.js";
import { unwrapSecrets, wrapSecrets } from "./endpoint-secrets.js";
import { newWebhookSecret } from "./signature.js";
import type { AttemptRecord, DeliveryRecord, WebhookEndpointPatch, WebhookEndpointRecord, WebhookStore } from "./webhook-store.js";

export interface WebhooksDeps {
  /** Reads outside a transaction. */
  store: WebhookStore;
  /** Runs fn with a store bound to one transaction; what it publishes reaches every instance once it commits. */
  transaction<T>(fn: (store: WebhookStore, publish: Publish) => Promise<T>): Promise<T>;
  keyring: MasterKeyring;
  clock: Clock;
  random: RandomSource;
  /** WEBHOOKS_ALLOW_PRIVATE_NETWORKS: http URLs and loopback, private and link-local addresses. */
  allowPrivateNetworks: boolean;
}

/** An endpoint as admins see it: never its secret (shown once, at creation and rotation). */
export interface EndpointView {
  id: string;
  url: string;
  description: string;
  eventTypes: EventType[];
  enabled: boolean;
  /** Why the platform disabled it ("gone": the receiver answered 410). */
  disabledReason: string | null;
  /** Until when the previous secret signs too, after a rotation. */
  previousSecretExpiresAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface EndpointInput {
  url: string;
  description: string;
  eventTypes: readonly string[];
  enabled?: boolean | undefined;
}

export interface EndpointChange {
  url?: string | undefined;
  description?: string | undefined;
  /** Replaces the list (empty: every type). */
  eventTypes?: readonly string[] | undefined;
  enabled?: boolean | undefined;
}

/** A delivery page and the token of the next one (empty: none). */
export interface DeliveryPage {
  deliveries: DeliveryRecord[];
  nextPageToken: string;
}

/** After a rotation the previous secret keeps signing this long (two signatures on every delivery). */
export const previousSecretGraceMs = 24 * 3600_000;
export const maxEndpointsPerOrganization = 50;
const maxUrlLength = 2048;
const maxDescriptionLength = 500;
const defaultPageSize = 20;
const maxPageSize = 100;

/**
 * Webhook endpoints and their deliveries, managed by an organisation's admins
 * (WebhooksService, the dashboard, `gatehouse webhooks`): docs/events.md.
 */
export function createWebhooks(deps: WebhooksDeps) {
  function view(record: WebhookEndpointRecord): EndpointView {
    const now = deps.clock().getTime();
    return {
      id: record.id,
      url: record.url,
      description: record.description,
      eventTypes: record.eventTypes.filter(isEventType),
      enabled: record.enabled,
      disabledReason: record.disabledReason,
      previousSecretExpiresAt: record.previousSecretUntil && record.previousSecretUntil.getTime() > now ? record.previousSecretUntil : null,
      createdAt: record.createdAt,
      updatedAt: record.updatedAt,
    };
  }

  function readUrl(raw: string, violations: Violation[]): string {
    const field = "url";
    const text = raw.trim();
    const before = violations.length;
    const allowed = deps.allowPrivateNetworks ? "an absolute https or http URL" : "an absolute https URL";
    if (text === "") violations.push({ field, description: `is required: ${allowed}` });
    else if (text.length > maxUrlLength) violations.push({ field, description: `must be at most ${maxUrlLength} characters` });
    if (violations.length > before) return text;
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      violations.push({ field, description: `must be ${allowed}, such as https://example.com/webhooks` });
      return text;
    }
    if (url.protocol !== "https:" && !(url.protocol === "http:" && deps.allowPrivateNetworks)) {
      violations.push({
        field,
        description:
          url.protocol === "http:"
            ? "must be https (http only with WEBHOOKS_ALLOW_PRIVATE_NETWORKS=true)"
            : `must be ${allowed}, such as https://example.com/webhooks`,
      });
    } else if (url.username !== "" || url.password !== "") {
      violations.push({
        field,
        description: "must not carry a user name or password: receivers authenticate deliveries by their signature",
      });
    } else if (url.hash !== "") {
      violations.push({ field, description: "must not have a fragment (#...)" });
    } else {
      const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
      // A name is the same with its trailing dots ("localhost." is fully qualified localhost).
      const name = host.replace(/\.+$/, "");
      const loopbackName = name === "localhost" || name.endsWith(".localhost");
      const refused = isIP(host) ? refusedAddress(host, deps.allowPrivateNetworks) : null;
      if (refused) violations.push({ field, description: `must not name ${refused}` });
      else if (loopbackName && !deps.allowPrivateNetworks) {
        violations.push({ field, description: "must not name localhost (allowed only with WEBHOOKS_ALLOW_PRIVATE_NETWORKS=true)" });
      }
    }
    return url.href;
  }

  function readDescription(raw: string, violations: Violation[]): string {
    const text = raw.trim();
    if (text.length > maxDescriptionLength)
      violations.push({ field: "description", description: `must be at most ${maxDescriptionLength} characters` });
    else if (/[\x00-\x1f\x7f]/.test(text)) violations.push({ field: "description", description: "must not contain control characters" });
    return text;
  }

  function readEventTypes(raw: readonly string[], violations: Violation[]): EventType[] {
    const chosen = new Set<string>();
    raw.forEach((type, i) => {
      const trimmed = type.trim();
      if (!isEventType(trimmed)) {
        violations.push({
          field: `event_types[${i}]`,
          description: `must be one of the event types of docs/events.md (${eventTypes.join(", ")})`,
        });
      } else chosen.add(trimmed);
    });
    return eventTypes.filter((type) => chosen.has(type));
  }

  function readId(raw: string, field: string): string {
    const violations: Violation[] = [];
    const id = readUuid(raw, field, violations);
    if (violations.length > 0) throw invalidArgument(violations);
    return id;
  }

  const endpointNotFound = (id: string) =>
    new DomainError("not_found", "webhook_endpoint_not_found", `the organisation has no webhook endpoint ${id}`);
  const deliveryNotFound = (id: string) =>
    new DomainError("not_found", "webhook_delivery_not_found", `the organisation has no webhook delivery ${id}`);

  async function requireEndpoint(store: WebhookStore, organizationId: string, id: string): Promise<WebhookEndpointRecord> {
    const found = await store.findEndpoint(organizationId, id);
    if (!found) throw endpointNotFound(id);
    return found;
  }

  function requireEnabled(endpoint: WebhookEndpointRecord, doing: string): void {
    if (!endpoint.enabled) {
      throw new DomainError(
        "failed_precondition",
        "webhook_endpoint_disabled",
        `the endpoint is disabled${endpoint.disabledReason === "gone" ? " (its receiver answered 410 Gone)" : ""}: enable it before ${doing}`,
      );
    }
  }

  return {
    /** A new endpoint and its signing secret (`whsec_...`), returned once. */
    async createEndpoint(organizationId: string, input: EndpointInput): Promise<{ endpoint: EndpointView; secret: string }> {
      const violations: Violation[] = [];
      const url = readUrl(input.url, violations);
      const description = readDescription(input.description, violations);
      const types = readEventTypes(input.eventTypes, violations);
      if (violations.length > 0) throw invalidArgument(violations);
      const id = randomUUID();
      const secret = newWebhookSecret(deps.random);
      const now = deps.clock();
      const record: WebhookEndpointRecord = {
        id,
        organizationId,
        url,
        description,
        eventTypes: types,
        enabled: input.enabled ?? true,
        disabledReason: null,
        ...wrapSecrets(deps.keyring, organizationId, id, { current: secret }),
        previousSecretUntil: null,
        createdAt: now,
        updatedAt: now,
      };
      await deps.transaction(async (store) => {
        // Creations of one organisation in turn, so that concurrent ones cannot all see room for one more.
        if (!(await store.lockOrganization(organizationId))) {
          throw new DomainError("not_found", "organization_not_found", `organisation ${organizationId} does not exist`);
        }
        if ((await store.countEndpoints(organizationId)) >= maxEndpointsPerOrganization) {
          throw new DomainError(
            "failed_precondition",
            "webhook_endpoint_limit",
            `an organisation has at most ${maxEndpointsPerOrganization} webhook endpoints: delete one first`,
          );
        }
        await store.createEndpoint(record);
      });
      return { endpoint: view(record), secret };
    },

    /** The organisation's endpoints, oldest first. */
    async listEndpoints(organizationId: string): Promise<EndpointView[]> {
      return (await deps.store.listEndpoints(organizationId)).map(view);
    },

    async getEndpoint(organizationId: string, endpointId: string): Promise<EndpointView> {
      return view(await requireEndpoint(deps.store, organizationId, readId(endpointId, "endpoint_id")));
    },

    /** Changes what is given; enabling clears why the platform disabled it. */
    async updateEndpoint(organizationId: string, endpointId: string, change: EndpointChange): Promise<EndpointView> {
      const id = readId(endpointId, "endpoint_id");
      const violations: Violation[] = [];
      const patch: WebhookEndpointPatch = {};
      if (change.url !== undefined) patch.url = readUrl(change.url, violations);
      if (change.description !== undefined) patch.description = readDescription(change.description, violations);
      if (change.eventTypes !== undefined) patch.eventTypes = readEventTypes(change.eventTypes, violations);
      if (change.enabled !== undefined) {
        patch.enabled = change.enabled;
        patch.disabledReason = null;
      }
      if (violations.length > 0) throw invalidArgument(violations);
      return deps.transaction(async (store, publish) => {
        if (!(await store.updateEndpoint(organizationId, id, patch, deps.clock()))) throw endpointNotFound(id);
        // Enabled again: its pending deliveries are due.
        if (change.enabled) publish(webhookDeliveriesDue, organizationId);
        return view(await requireEndpoint(store, organizationId, id));
      });
    },

    /** Deletes the endpoint with its deliveries and attempts. */
    async deleteEndpoint(organizationId: string, endpointId: string): Promise<void> {
      const id = readId(endpointId, "endpoint_id");
      if (!(await deps.transaction((store) => store.deleteEndpoint(organizationId, id)))) throw endpointNotFound(id);
    },

    /**
     * A new signing secret, returned once. The previous one keeps signing for
     * 24 hours (every delivery then carries two signatures), so receivers can
     * switch without losing a delivery; a second rotation within that time
     * drops the oldest.
     */
    async rotateSecret(organizationId: string, endpointId: string): Promise<{ endpoint: EndpointView; secret: string }> {
      const id = readId(endpointId, "endpoint_id");
      const secret = newWebhookSecret(deps.random);
      return deps.transaction(async (store) => {
        const endpoint = await requireEndpoint(store, organizationId, id);
        const now = deps.clock();
        const { current } = unwrapSecrets(deps.keyring, endpoint);
        const wrapped = wrapSecrets(deps.keyring, organizationId, id, { current: secret, previous: current });
        const previousSecretUntil = new Date(now.getTime() + previousSecretGraceMs);
        await store.updateEndpoint(organizationId, id, { ...wrapped, previousSecretUntil }, now);
        return { endpoint: view({ ...endpoint, ...wrapped, previousSecretUntil, updatedAt: now }), secret };
      });
    },

    /** The endpoint's deliveries, newest first, each with its last attempt. */
    async listDeliveries(organizationId: string, endpointId: string, page: { pageSize: number; pageToken: string }): Promise<DeliveryPage> {
      const id = readId(endpointId, "endpoint_id");
      const violations: Violation[] = [];
      if (!Number.isInteger(page.pageSize) || page.pageSize < 0 || page.pageSize > maxPageSize) {
        violations.push({ field: "page_size", description: `must be 0 (the default, ${defaultPageSize}) to ${maxPageSize}` });
      }
      const after = page.pageToken === "" ? undefined : readPageToken(page.pageToken, violations);
      if (violations.length > 0) throw invalidArgument(violations);
      await requireEndpoint(deps.store, organizationId, id);
      const size = page.pageSize || defaultPageSize;
      const rows = await deps.store.listDeliveries(organizationId, id, size + 1, after);
      const deliveries = rows.slice(0, size);
      const last = deliveries.at(-1);
      return { deliveries, nextPageToken: rows.length > size && last ? pageToken({ createdAt: last.createdAt, id: last.id }) : "" };
    },

    /** Every attempt of a delivery, oldest first. */
    async listAttempts(organizationId: string, deliveryId: string): Promise<{ delivery: DeliveryRecord; attempts: AttemptRecord[] }> {
      const id = readId(deliveryId, "delivery_id");
      const delivery = await deps.store.findDelivery(organizationId, id);
      if (!delivery) throw deliveryNotFound(id);
      return { delivery, attempts: await deps.store.listAttempts(organizationId, id) };
    },

    /** Sends a delivered or failed event to its endpoint again, as a new round of the retry schedule. */
    async redeliver(organizationId: string, deliveryId: string): Promise<DeliveryRecord> {
      const id = readId(deliveryId, "delivery_id");
      return deps.transaction(async (store, publish) => {
        const delivery = await store.findDelivery(organizationId, id);
        if (!delivery) throw deliveryNotFound(id);
        if (delivery.status === "pending") {
          throw new DomainError(
            "failed_precondition",
            "webhook_delivery_pending",
            `the delivery is pending already: its next attempt is at ${delivery.nextAttemptAt.toISOString()}`,
          );
        }
        requireEnabled(await requireEndpoint(store, organizationId, delivery.endpointId), "sending again");
        await store.requeueDelivery(organizationId, id, deps.clock());
        publish(webhookDeliveriesDue, organizationId);
        return (await store.findDelivery(organizationId, id)) as DeliveryRecord;
      });
    },

    /** Records a `webhook.test` event for this endpoint alone and delivers it like any other. */
    async sendTestEvent(organizationId: string, endpointId: string): Promise<{ eventId: string; deliveryId: string }> {
      const id = readId(endpointId, "endpoint_id");
      return deps.transaction(async (store, publish) => {
        requireEnabled(await requireEndpoint(store, organizationId, id), "sending a test event");
        const at = deps.clock();
        const eventId = newEventId();
        const deliveryId = randomUUID();
        const payload = eventBody(organizationId, { type: "webhook.test", data: { endpoint_id: id } }, at);
        await store.insertEvent({ id: eventId, organizationId, type: "webhook.test", payload, createdAt: at });
        await store.insertDeliveries([{ id: deliveryId, organizationId, endpointId: id, eventId, at }]);
        publish(webhookDeliveriesDue, organizationId);
        return { eventId, deliveryId };
      });
    },
  };
}

export type Webhooks = ReturnType<typeof createWebhooks>;

function pageToken(cursor: { createdAt: Date; id: string }): string {
  return Buffer.from(JSON.stringify([cursor.createdAt.toISOString(), cursor.id])).toString("base64url");
}

function readPageToken(token: string, violations: Violation[]): { createdAt: Date; id: string } | undefined {
  try {
    const value = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as unknown;
    if (Array.isArray(value) && typeof value[0] === "string" && typeof value[1] === "string") {
      const createdAt = new Date(value[0]);
      if (!Number.isNaN(createdAt.getTime())) return { createdAt, id: value[1] };
    }
  } catch {
    // reported below
  }
  violations.push({ field: "page_token", description: "is not a token this listing returned: start again without one" });
  return undefined;
}
