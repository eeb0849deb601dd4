import { randomUUID } from "node:crypto";
import type { WebhookEndpointRecord } from "../../src/domain/webhooks/webhook-store.js";
import { createWebhookStore } from "../../src/storage/webhook-store.js";
import { at, describeStorage } from "./storage-target.js";

describeStorage("webhook store", (target) => {
  const store = () =>
    createWebhookStore(target.db.client, target.db.provider, { transact: (fn) => target.db.transaction(fn), sql: target.db.sql });

  async function endpoint(organizationId: string, enabled = true): Promise<string> {
    const id = randomUUID();
    const record: WebhookEndpointRecord = {
      id,
      organizationId,
      url: "https://example.com/hook",
      description: "",
      eventTypes: [],
      enabled,
      disabledReason: null,
      secretsEnc: Buffer.from([1, 2, 3]),
      masterKeyId: null,
      previousSecretUntil: null,
      createdAt: at(0),
      updatedAt: at(0),
    };
    await store().createEndpoint(record);
    return id;
  }

  /** `count` events of the organisation, each with a delivery to `endpointId` due at `second`. */
  async function due(organizationId: string, endpointId: string, count: number, second = 0): Promise<string[]> {
    const events = Array.from({ length: count }, () => ({
      id: `evt_${randomUUID().replaceAll("-", "")}`,
      organizationId,
      type: "webhook.test",
      payload: "{}",
      createdAt: at(second),
    }));
    await store().insertEvents(events);
    const deliveries = events.map((event) => ({ id: randomUUID(), organizationId, endpointId, eventId: event.id, at: at(second) }));
    await store().insertDeliveries(deliveries);
    return deliveries.map((delivery) => delivery.id);
  }

  test("concurrent claims take disjoint sets: each due delivery goes to one worker", async () => {
    const org = await target.organization();
    const hook = await endpoint(org);
    // Rounds of racing claims (a race lost only now and then is still a race).
    const others: string[] = [];
    for (let round = 0; round < 4; round++) {
      const other = await endpoint(org);
      others.push(other);
      await due(org, other, 60);
      const raced = await Promise.all(
        Array.from({ length: 6 }, (_, i) => store().claimDue(`racer-${round}-${i}`, at(10), at(40), 20, [hook])),
      );
      const ids = raced.flatMap((claim) => claim.map((delivery) => delivery.id));
      expect(new Set(ids).size).toBe(ids.length);
    }
    const ids = await due(org, hook, 120);
    const claims = await Promise.all(Array.from({ length: 6 }, (_, i) => store().claimDue(`worker-${i}`, at(10), at(40), 30, others)));
    const claimed = claims.flatMap((claim) => claim.map((delivery) => delivery.id));
    expect(new Set(claimed).size).toBe(claimed.length);
    // Whatever the first round left, later claims take; nothing twice.
    const rest = await store().claimDue("worker-late", at(10), at(40), 200, others);
    expect([...claimed, ...rest.map((d) => d.id)].sort()).toEqual([...ids].sort());
    // A leased delivery is not claimed again until its lease runs out, then it is.
    expect(await store().claimDue("other", at(20), at(50), 200, others)).toEqual([]);
    expect(await store().claimDue("other", at(41), at(70), 200, others)).toHaveLength(120);
    // What this test left leased is not the next tests' business.
    for (const id of [hook, ...others]) expect(await store().deleteEndpoint(org, id)).toBe(true);
  });

  test("not yet due, of a disabled endpoint, or of a skipped endpoint: not claimed; the next claimable time says when", async () => {
    const org = await target.organization();
    const later = await endpoint(org);
    const off = await endpoint(org, false);
    const skipped = await endpoint(org);
    await due(org, later, 2, 100);
    await due(org, off, 2, 0);
    const [skippedId] = await due(org, skipped, 1, 0);
    expect(await store().claimDue("w", at(50), at(60), 10, [skipped])).toEqual([]);
    const next = await store().nextClaimableAt();
    expect(next?.getTime()).toBeLessThanOrEqual(at(0).getTime());
    const claimed = await store().claimDue("w", at(50), at(60), 10, []);
    expect(claimed.map((d) => d.id)).toEqual([skippedId]);
    expect(claimed[0]?.endpoint).toMatchObject({ url: "https://example.com/hook", masterKeyId: null });
  });

  test("outcomes: delivered in one statement, a retry rescheduled, 410 disables; a lease another worker took keeps its state", async () => {
    const org = await target.organization();
    const hook = await endpoint(org);
    const [a, b, c] = await due(org, hook, 3);
    await store().claimDue("mine", at(1), at(30), 10, []);
    const attempt = (_id: string, status: number) => ({
      id: randomUUID(),
      number: 1,
      attemptedAt: at(2),
      durationMs: 5,
      statusCode: status,
      error: null,
    });
    // The third was taken over meanwhile (its lease ran out and another worker claimed it).
    await target.db.client.webhookDelivery.update({ where: { id: c as string }, data: { leaseOwner: "thief" } });
    await store().completeAttempts(
      "mine",
      [
        {
          deliveryId: a as string,
          organizationId: org,
          endpointId: hook,
          attempt: attempt(a as string, 200),
          status: "delivered",
          nextAttemptAt: at(2),
          disableEndpoint: false,
        },
        {
          deliveryId: b as string,
          organizationId: org,
          endpointId: hook,
          attempt: attempt(b as string, 410),
          status: "failed",
          nextAttemptAt: at(2),
          disableEndpoint: true,
        },
        {
          deliveryId: c as string,
          organizationId: org,
          endpointId: hook,
          attempt: attempt(c as string, 500),
          status: "pending",
          nextAttemptAt: at(9),
          disableEndpoint: false,
        },
      ],
      at(2),
    );
    const rows = await target.db.client.webhookDelivery.findMany({ where: { endpointId: hook }, orderBy: { id: "asc" } });
    const byId = new Map(rows.map((row) => [row.id, row]));
    expect(byId.get(a as string)).toMatchObject({ status: "delivered", attempts: 1, leaseOwner: null });
    expect(byId.get(b as string)).toMatchObject({ status: "failed", attempts: 1, leaseOwner: null });
    expect(byId.get(c as string)).toMatchObject({ status: "pending", attempts: 0, leaseOwner: "thief" });
    expect(await target.db.client.webhookAttempt.count({ where: { delivery: { endpointId: hook } } })).toBe(3);
    expect((await store().findEndpoint(org, hook))?.enabled).toBe(false);
    expect((await store().findEndpoint(org, hook))?.disabledReason).toBe("gone");
  });

  test("pruning: attempts older than the retention go; events too, once none of their deliveries is pending", async () => {
    const org = await target.organization();
    const hook = await endpoint(org);
    const [done, pending] = await due(org, hook, 2, 0);
    await store().claimDue("w", at(1), at(30), 10, []);
    const attempt = { number: 1, attemptedAt: at(1), durationMs: 1, statusCode: 200, error: null };
    await store().completeAttempts(
      "w",
      [
        {
          deliveryId: done as string,
          organizationId: org,
          endpointId: hook,
          attempt: { ...attempt, id: randomUUID() },
          status: "delivered",
          nextAttemptAt: at(1),
          disableEndpoint: false,
        },
        {
          deliveryId: pending as string,
          organizationId: org,
          endpointId: hook,
          attempt: { ...attempt, id: randomUUID(), statusCode: 500 },
          status: "pending",
          nextAttemptAt: at(100),
          disableEndpoint: false,
        },
      ],
      at(1),
    );
    await store().prune(at(60), at(60));
    expect(await target.db.client.webhookAttempt.count({ where: { organizationId: org } })).toBe(0);
    expect(await target.db.client.webhookDelivery.findMany({ where: { organizationId: org }, select: { id: true } })).toEqual([
      { id: pending },
    ]);
    expect(await target.db.client.event.count({ where: { organizationId: org } })).toBe(1);
  });

  test("pruning removes every event past the retention, however many: the outbox does not outgrow it under steady traffic", async () => {
    const org = await target.organization();
    // More than a day's worth at one event every few seconds, e.g. sign-ins of an organisation with no endpoint.
    const old = Array.from({ length: 2_500 }, (_, i) => ({
      id: `evt_${randomUUID().replaceAll("-", "")}`,
      organizationId: org,
      type: "session.created",
      payload: "{}",
      createdAt: at(i % 50),
    }));
    for (let i = 0; i < old.length; i += 500) await store().insertEvents(old.slice(i, i + 500));
    const recent = await due(org, await endpoint(org), 1, 100);
    await store().prune(at(60), at(60));
    expect(await target.db.client.event.count({ where: { organizationId: org } })).toBe(1);
    expect(await target.db.client.webhookDelivery.findMany({ where: { organizationId: org }, select: { id: true } })).toEqual(
      recent.map((id) => ({ id })),
    );
  });
});
