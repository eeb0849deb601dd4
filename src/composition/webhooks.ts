import { createDeliveryWorker, type DeliveryWorker, type DeliveryWorkerDeps } from "../domain/webhooks/delivery-worker.js";
import type { WebhookSender } from "../domain/webhooks/webhook-sender.js";
import { createWebhooks, type Webhooks } from "../domain/webhooks/webhooks.js";
import { createHttpWebhookSender } from "../net/webhook-sender.js";
import { createWebhookStore } from "../storage/webhook-store.js";
import type { Platform } from "./platform.js";
import { transact } from "./transactions.js";

/** Webhook endpoints and deliveries, as admins manage them (WebhooksService, the dashboard, `gatehouse webhooks`). */
export function webhooksOf(platform: Platform): Webhooks {
  return platform.memo("webhooks", () => {
    const { database } = platform;
    return createWebhooks({
      store: createWebhookStore(database.client, database.provider, { transact: (fn) => database.transaction(fn) }),
      transaction: (fn) => transact(platform, ({ tx, publish }) => fn(createWebhookStore(tx, database.provider), publish)),
      keyring: platform.keyring,
      clock: platform.clock,
      random: platform.random,
      allowPrivateNetworks: platform.config.webhooks.allowPrivateNetworks,
    });
  });
}

export interface DeliveryWorkerOptions {
  /** The sender (tests: a resolver seam); HTTP with the address checks by default. */
  sender?: WebhookSender;
  timers?: DeliveryWorkerDeps["timers"];
  random?: () => number;
  options?: DeliveryWorkerDeps["options"];
}

/** The user agent of deliveries. */
export const webhookUserAgent = "Gatehouse-Webhooks/1 (+https://www.standardwebhooks.com)";

/** The delivery worker of a serving instance (started by App.listen). */
export function deliveryWorkerOf(platform: Platform, options: DeliveryWorkerOptions = {}): DeliveryWorker {
  return platform.memo("delivery-worker", () => {
    const { database, config } = platform;
    const sender =
      options.sender ??
      createHttpWebhookSender({
        allowPrivateNetworks: config.webhooks.allowPrivateNetworks,
        timeoutMs: 10_000,
        maxSocketsPerOrigin: 16,
        userAgent: webhookUserAgent,
      });
    const worker = createDeliveryWorker({
      store: createWebhookStore(database.client, database.provider, { transact: (fn) => database.transaction(fn), sql: database.sql }),
      sender,
      keyring: platform.keyring,
      changes: platform.changes,
      clock: platform.clock,
      ...(options.timers ? { timers: options.timers } : {}),
      ...(options.random ? { random: options.random } : {}),
      options: { leaseMs: config.webhooks.leaseMs, ...options.options },
      onError: (error, what) => platform.logger.warn({ err: error }, `webhook delivery: ${what} failed`),
    });
    platform.onClose(async () => {
      await worker.stop();
      sender.close();
    });
    return worker;
  });
}
