import { randomUUID } from "node:crypto";
import type { Publish } from "../changes/topic.js";
import { webhookDeliveriesDue } from "../changes/topics.js";
import type { Clock } from "../clock.js";
import type { EventRecord, WebhookStore } from "../webhooks/webhook-store.js";
import { eventBody, type PlatformEvent } from "./catalogue.js";
import type { EventLog } from "./event-log.js";

export interface EventLogDeps {
  /** Bound to the change's transaction. */
  store: Pick<WebhookStore, "insertEvents" | "enabledEndpoints" | "insertDeliveries">;
  /** The transaction's publish: the workers wake once it commits. */
  publish: Publish;
  clock: Clock;
}

/** An event id: the webhook-id of every delivery of the event (Standard Webhooks: unique per message). */
export function newEventId(): string {
  return `evt_${randomUUID().replaceAll("-", "")}`;
}

/** The event log of one transaction, and what writes what it recorded. */
export interface TransactionEventLog extends EventLog {
  /**
   * Writes the recorded events and their deliveries: call it last in the
   * transaction (src/composition/transactions.ts does), so that a change's
   * events cost one statement per table, however many it records.
   */
  flush(): Promise<void>;
}

/**
 * The event log of one transaction: each event is a row of the outbox, and a
 * delivery row for each enabled endpoint of its organisation that takes its
 * type, all in the change's transaction.
 */
export function createEventLog(deps: EventLogDeps): TransactionEventLog {
  let recorded: EventRecord[] = [];
  return {
    async record(organizationId: string, event: PlatformEvent) {
      const at = deps.clock();
      recorded.push({ id: newEventId(), organizationId, type: event.type, payload: eventBody(organizationId, event, at), createdAt: at });
    },
    async flush() {
      const events = recorded;
      recorded = [];
      if (events.length === 0) return;
      await deps.store.insertEvents(events);
      const endpoints = new Map<string, { id: string; eventTypes: string[] }[]>();
      for (const organizationId of new Set(events.map((event) => event.organizationId))) {
        endpoints.set(organizationId, await deps.store.enabledEndpoints(organizationId));
      }
      const deliveries = events.flatMap((event) =>
        (endpoints.get(event.organizationId) ?? [])
          .filter((endpoint) => endpoint.eventTypes.length === 0 || endpoint.eventTypes.includes(event.type))
          .map((endpoint) => ({
            id: randomUUID(),
            organizationId: event.organizationId,
            endpointId: endpoint.id,
            eventId: event.id,
            at: event.createdAt,
          })),
      );
      if (deliveries.length === 0) return;
      await deps.store.insertDeliveries(deliveries);
      for (const organizationId of new Set(deliveries.map((delivery) => delivery.organizationId)))
        deps.publish(webhookDeliveriesDue, organizationId);
    },
  };
}
