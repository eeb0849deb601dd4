import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import type { MasterKeyring } from "../../crypto/envelope.js";
import type { ChangeSubscriptions } from "../changes/topic.js";
import { webhookDeliveriesDue } from "../changes/topics.js";
import type { Clock } from "../clock.js";
import { signingSecrets, unwrapSecrets } from "./endpoint-secrets.js";
import { nextDelayMs, readRetryAfter } from "./retry-schedule.js";
import { signatureHeader } from "./signature.js";
import type { SendResult, WebhookSender } from "./webhook-sender.js";
import type { AttemptOutcome, ClaimedDelivery, WebhookStore } from "./webhook-store.js";

/** The timer seam: tests run the schedule on a clock of their own. */
export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const systemTimers: Timers = {
  setTimeout: (fn, ms) => {
    const handle = setTimeout(fn, ms);
    handle.unref();
    return handle;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export interface DeliveryWorkerOptions {
  /** How long a claim holds a delivery without renewal; a killed instance's deliveries are taken over after it. */
  leaseMs: number;
  /** Attempts in flight per endpoint: a slow receiver holds only its own. */
  perEndpoint: number;
  /** Deliveries held (in flight or waiting for their endpoint) by this instance. */
  maxHeld: number;
  /** How long attempts are kept (docs/events.md: 30 days), and events once nothing of theirs is pending. */
  retentionMs: number;
}

export const defaultDeliveryWorkerOptions: DeliveryWorkerOptions = {
  leaseMs: 30_000,
  perEndpoint: 16,
  maxHeld: 512,
  retentionMs: 30 * 24 * 3600_000,
};

export interface DeliveryWorkerDeps {
  store: Pick<WebhookStore, "claimDue" | "renewLeases" | "completeAttempts" | "nextClaimableAt" | "prune">;
  sender: WebhookSender;
  /** Opens endpoints' signing secrets. */
  keyring: MasterKeyring;
  /** Where recorded events announce themselves (webhookDeliveriesDue): the worker wakes on commit. */
  changes: ChangeSubscriptions;
  clock: Clock;
  timers?: Timers;
  /** A number in [0, 1): the retry schedule's jitter. */
  random?: () => number;
  options?: Partial<DeliveryWorkerOptions>;
  onError?: (error: unknown, what: string) => void;
}

/** Longest sleep with nothing due: a wake-up lost on the way (another process on SQLite) is late by at most this. */
const idleCheckMs = 30_000;
const claimBatch = 64;
const pruneEveryMs = 3600_000;
const wakeReadEveryMs = 1_000;

/**
 * The delivery worker of one instance (docs/events.md, "Delivery"). It claims
 * due deliveries with a lease (so that each attempt is made by one instance),
 * signs and sends each (Standard Webhooks 1.0), and records the attempt and
 * what follows from it: delivered, failed, or the next attempt on the retry
 * schedule. It wakes when a transaction that recorded an event commits (the
 * change feed), and otherwise when the next delivery becomes claimable.
 */
export function createDeliveryWorker(deps: DeliveryWorkerDeps) {
  const options = { ...defaultDeliveryWorkerOptions, ...deps.options };
  const timers = deps.timers ?? systemTimers;
  const random = deps.random ?? Math.random;
  const owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  /** Deliveries this instance holds, by id: running, or waiting for a slot of their endpoint. */
  const held = new Map<string, ClaimedDelivery>();
  const running = new Map<string, number>();
  const waiting = new Map<string, ClaimedDelivery[]>();
  const attempts = new Set<Promise<void>>();
  let outcomes: AttemptOutcome[] = [];
  let flushing: Promise<void> | undefined;
  let pumping = false;
  let pumpAgain = false;
  let pumpQueued = false;
  let stopped = true;
  let wakeTimer: unknown;
  let renewTimer: unknown;
  let pruneTimer: unknown;
  let lastPrune = 0;
  let subscription: { close(): void } | undefined;
  /**
   * What the last claim left unread: false once a claim found fewer due
   * deliveries than it asked for (nothing else was due then, but for the
   * endpoints it skipped, kept here). A finishing attempt claims again only
   * when something may be left for it, so that a busy worker makes one claim
   * per batch, not one per attempt.
   */
  let moreDue = true;
  /** When the wake timer fires, when the database was last asked for the next due time, and the earliest retry scheduled since. */
  let wakeAt = Number.POSITIVE_INFINITY;
  let lastWakeRead = Number.NEGATIVE_INFINITY;
  let earliestRetry = Number.POSITIVE_INFINITY;
  let skipped = new Set<string>();

  const report = (error: unknown, what: string) => deps.onError?.(error, what);

  /** Something may be due (a commit's notice, a timer, a test): claim. */
  function wake(): void {
    moreDue = true;
    kick();
  }

  /** Runs pump once per turn of the event loop however many reasons to run it came. */
  function kick(): void {
    if (stopped || pumpQueued) return;
    pumpQueued = true;
    setImmediate(() => {
      pumpQueued = false;
      void pump();
    });
  }

  async function pump(): Promise<void> {
    if (stopped) return;
    if (pumping) {
      pumpAgain = true;
      return;
    }
    pumping = true;
    try {
      do {
        pumpAgain = false;
        while (!stopped && held.size < options.maxHeld) {
          const full = [...running.keys()].filter((endpointId) => load(endpointId) >= options.perEndpoint);
          const want = Math.min(claimBatch, options.maxHeld - held.size);
          const now = deps.clock();
          const claimed = await deps.store.claimDue(owner, now, new Date(now.getTime() + options.leaseMs), want, full);
          for (const delivery of claimed) hold(delivery);
          skipped = new Set(full);
          moreDue = claimed.length >= want;
          if (!moreDue) break;
        }
      } while (pumpAgain && !stopped);
    } catch (error) {
      report(error, "claiming due webhook deliveries");
    } finally {
      pumping = false;
    }
    if (held.size === 0) await scheduleWake();
  }

  /** Deliveries of an endpoint held here (running and waiting). */
  function load(endpointId: string): number {
    return (running.get(endpointId) ?? 0) + (waiting.get(endpointId)?.length ?? 0);
  }

  function hold(delivery: ClaimedDelivery): void {
    held.set(delivery.id, delivery);
    if ((running.get(delivery.endpointId) ?? 0) < options.perEndpoint) start(delivery);
    else waiting.set(delivery.endpointId, [...(waiting.get(delivery.endpointId) ?? []), delivery]);
  }

  function start(delivery: ClaimedDelivery): void {
    running.set(delivery.endpointId, (running.get(delivery.endpointId) ?? 0) + 1);
    const attempt = attemptDelivery(delivery)
      .then((outcome) => {
        outcomes.push(outcome);
        if (outcome.status === "pending") earliestRetry = Math.min(earliestRetry, outcome.nextAttemptAt.getTime());
        void flush();
      })
      .catch((error: unknown) => report(error, "attempting a webhook delivery"))
      .finally(() => {
        attempts.delete(attempt);
        held.delete(delivery.id);
        const left = (running.get(delivery.endpointId) ?? 1) - 1;
        if (left === 0) running.delete(delivery.endpointId);
        else running.set(delivery.endpointId, left);
        const queue = waiting.get(delivery.endpointId);
        const next = queue?.shift();
        if (queue && queue.length === 0) waiting.delete(delivery.endpointId);
        if (next && !stopped) start(next);
        // A slot of this endpoint is free: claim again if the last claim may have left something for it.
        else if (moreDue || skipped.has(delivery.endpointId)) kick();
        else if (held.size === 0 && !pumping) void scheduleWake();
      });
    attempts.add(attempt);
  }

  async function attemptDelivery(delivery: ClaimedDelivery): Promise<AttemptOutcome> {
    const number = delivery.attempts + 1;
    const startedAt = deps.clock();
    let result: SendResult;
    try {
      const secrets = unwrapSecrets(deps.keyring, {
        organizationId: delivery.organizationId,
        id: delivery.endpointId,
        secretsEnc: delivery.endpoint.secretsEnc,
        masterKeyId: delivery.endpoint.masterKeyId,
      });
      const timestamp = Math.floor(startedAt.getTime() / 1000);
      result = await deps.sender.send({
        url: delivery.endpoint.url,
        headers: {
          "webhook-id": delivery.eventId,
          "webhook-timestamp": String(timestamp),
          "webhook-signature": signatureHeader(
            signingSecrets(secrets, delivery.endpoint.previousSecretUntil, startedAt),
            delivery.eventId,
            timestamp,
            delivery.payload,
          ),
        },
        body: delivery.payload,
      });
    } catch (error) {
      report(error, "preparing a webhook delivery");
      result = { kind: "failed", error: "the delivery could not be prepared (see the server log)" };
    }
    const endedAt = deps.clock();
    const attempt = {
      id: randomUUID(),
      number,
      attemptedAt: startedAt,
      durationMs: Math.max(0, endedAt.getTime() - startedAt.getTime()),
      statusCode: result.kind === "answered" ? result.status : null,
      error: result.kind === "failed" ? result.error : null,
    };
    const base = { deliveryId: delivery.id, organizationId: delivery.organizationId, endpointId: delivery.endpointId, attempt };
    if (result.kind === "answered" && result.status >= 200 && result.status < 300) {
      return { ...base, status: "delivered", nextAttemptAt: endedAt, disableEndpoint: false };
    }
    if (result.kind === "answered" && result.status === 410) {
      // 410 Gone: the receiver says this endpoint will never take deliveries again.
      return { ...base, status: "failed", nextAttemptAt: endedAt, disableEndpoint: true };
    }
    const retryAfter =
      result.kind === "answered" && (result.status === 429 || result.status === 503)
        ? readRetryAfter(result.retryAfter, endedAt)
        : undefined;
    const delay = nextDelayMs(number, random(), retryAfter);
    if (delay === null) return { ...base, status: "failed", nextAttemptAt: endedAt, disableEndpoint: false };
    return { ...base, status: "pending", nextAttemptAt: new Date(endedAt.getTime() + delay), disableEndpoint: false };
  }

  /** Writes finished attempts, many per transaction when they come together. */
  function flush(): Promise<void> {
    if (flushing) return flushing;
    flushing = (async () => {
      while (outcomes.length > 0) {
        const batch = outcomes;
        outcomes = [];
        for (let tries = 1; ; tries++) {
          try {
            await deps.store.completeAttempts(owner, batch, deps.clock());
            break;
          } catch (error) {
            // Given up: the leases run out and the deliveries are attempted again (at least once).
            if (tries >= 3 || stopped) {
              report(error, "recording webhook attempts");
              break;
            }
            await new Promise((resolve) => setTimeout(resolve, 50 * tries));
          }
        }
      }
    })().finally(() => {
      flushing = undefined;
    });
    return flushing;
  }

  /**
   * Sets the timer for when the next delivery becomes claimable: read from the
   * database at most once a second (an idle worker between commits would
   * otherwise ask after each one); in between, the retries this instance just
   * scheduled are the news.
   */
  async function scheduleWake(): Promise<void> {
    if (stopped) return;
    const now = deps.clock().getTime();
    let next = Math.min(wakeAt, earliestRetry);
    if (wakeTimer === undefined || now - lastWakeRead >= wakeReadEveryMs || now < lastWakeRead) {
      lastWakeRead = now;
      try {
        next = (await deps.store.nextClaimableAt())?.getTime() ?? Number.POSITIVE_INFINITY;
      } catch (error) {
        report(error, "reading when the next webhook delivery is due");
      }
    }
    earliestRetry = Number.POSITIVE_INFINITY;
    if (stopped) return;
    // Due now but not claimed: its endpoint is busy here, and a finishing attempt wakes the worker.
    const until = next - deps.clock().getTime();
    const delay = until > 0 ? Math.min(until + 5, idleCheckMs) : idleCheckMs;
    if (wakeTimer !== undefined) timers.clearTimeout(wakeTimer);
    wakeAt = deps.clock().getTime() + delay;
    wakeTimer = timers.setTimeout(() => {
      wakeTimer = undefined;
      wakeAt = Number.POSITIVE_INFINITY;
      wake();
    }, delay);
  }

  function renew(): void {
    if (stopped) return;
    renewTimer = timers.setTimeout(
      () => {
        const ids = [...held.keys()];
        const now = deps.clock();
        const work = ids.length > 0 ? deps.store.renewLeases(owner, ids, new Date(now.getTime() + options.leaseMs)) : Promise.resolve();
        work
          .catch((error: unknown) => report(error, "renewing webhook delivery leases"))
          .finally(() => {
            if (now.getTime() - lastPrune >= pruneEveryMs) prune(now);
            wake();
            renew();
          });
      },
      Math.max(100, Math.floor(options.leaseMs / 3)),
    );
  }

  function prune(now: Date): void {
    lastPrune = now.getTime();
    const before = new Date(now.getTime() - options.retentionMs);
    deps.store.prune(before, before).catch((error: unknown) => report(error, "deleting old webhook attempts"));
  }

  return {
    /** The lease owner this instance writes on its claims. */
    owner,
    start(): void {
      if (!stopped) return;
      stopped = false;
      subscription = deps.changes.subscribe(webhookDeliveriesDue, () => wake());
      lastPrune = deps.clock().getTime();
      renew();
      wake();
    },
    /** Looks for due deliveries now (after a clock moved in a test, or a redelivery). */
    kick: wake,
    /** Resolves once nothing is in flight and every finished attempt is recorded (tests). */
    async settled(): Promise<void> {
      while (attempts.size > 0 || flushing || outcomes.length > 0 || pumping || pumpQueued) {
        await Promise.all([...attempts]);
        await flush();
        await new Promise((resolve) => setImmediate(resolve));
      }
    },
    /** Stops claiming; attempts in flight get up to graceMs to finish and be recorded, then leases are handed back. */
    async stop(graceMs = 2_000): Promise<void> {
      if (stopped) return;
      stopped = true;
      subscription?.close();
      for (const timer of [wakeTimer, renewTimer, pruneTimer]) if (timer !== undefined) timers.clearTimeout(timer);
      const inFlight = Promise.all([...attempts]);
      await Promise.race([inFlight, new Promise((resolve) => setTimeout(resolve, graceMs).unref())]);
      await flush();
      // What was claimed and not attempted is free to claim again at once, here or elsewhere.
      const unstarted = [...waiting.values()].flat().map((delivery) => delivery.id);
      waiting.clear();
      if (unstarted.length > 0)
        await deps.store.renewLeases(owner, unstarted, deps.clock()).catch((error: unknown) => report(error, "releasing leases"));
    },
  };
}

export type DeliveryWorker = ReturnType<typeof createDeliveryWorker>;
