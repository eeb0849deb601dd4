import { createHttpWebhookSender } from "../../src/net/webhook-sender.js";
import { retryDelaysMs } from "../../src/domain/webhooks/retry-schedule.js";
import { signPayload } from "../../src/domain/webhooks/signature.js";
import { createManualClock, startTestServer, type TestServer } from "../support/server.js";
import { startWebhookReceiver, verifyDelivery, type WebhookReceiver } from "../support/webhook-receiver.js";
import { applyOk } from "../support/config-documents.js";
import { createEndpoint, webhooksRest } from "../support/webhooks.js";

/**
 * docs/events.md, "Delivery": the retry schedule (on a clock of the test's,
 * never slept through), Retry-After, 410, redirects never followed, the
 * per-attempt timeout, concurrency bounded per endpoint, two signatures after
 * a rotation, and sending again; docs/security.md, "Events (webhooks)": the
 * address checks at delivery, against what the name resolves to then.
 */
const manual = createManualClock(new Date());
let server: TestServer;
let receiver: WebhookReceiver;
/** How many times the resolver seam was asked, per name. */
const resolutions = new Map<string, number>();

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  server = await startTestServer({
    clock: manual.clock,
    env: { WEBHOOKS_ALLOW_PRIVATE_NETWORKS: "true" },
    webhooks: {
      // No jitter: each delay is the schedule's own (retry-schedule.ts adds up to ±10%).
      random: () => 0.5,
      options: { perEndpoint: 3 },
      sender: createHttpWebhookSender({
        allowPrivateNetworks: true,
        // The mechanism of the 10 s bound, at a test's scale.
        timeoutMs: 800,
        maxSocketsPerOrigin: 16,
        userAgent: "gatehouse-test",
        resolve: async (hostname) => {
          resolutions.set(hostname, (resolutions.get(hostname) ?? 0) + 1);
          if (hostname === "receiver.test") return ["127.0.0.1"];
          // A name whose DNS answers late (a hostile name server holds every lookup): after the attempt's time.
          if (hostname === "slow-dns.test") return new Promise((resolve) => setTimeout(() => resolve(["127.0.0.1"]), 3_000));
          throw Object.assign(new Error("not found"), { code: "ENOTFOUND" });
        },
      }),
    },
  });
});
afterAll(async () => {
  await receiver?.close();
  await server?.close();
});

const worker = () => server.app.deliveryWorker;

/** Runs the worker until nothing is in flight. */
async function deliverDue(): Promise<void> {
  worker().kick();
  await new Promise((resolve) => setImmediate(resolve));
  await worker().settled();
}

async function testEvent(endpointId: string): Promise<{ event_id: string; delivery_id: string }> {
  const sent = await webhooksRest<{ event_id: string; delivery_id: string }>(server, "POST", `/${endpointId}/test`, {});
  expect(sent.status).toBe(200);
  return sent.body;
}

interface DeliveryJson {
  status: string;
  attempts: number;
  next_attempt_at: string;
  event_id: string;
}
interface AttemptJson {
  number: number;
  attempted_at: string;
  status_code?: number;
  error: string;
  duration_ms: number;
}

async function attemptsOf(endpointId: string, deliveryId: string) {
  const found = await webhooksRest<{ delivery: DeliveryJson; attempts: AttemptJson[] }>(
    server,
    "GET",
    `/${endpointId}/deliveries/${deliveryId}/attempts`,
  );
  expect(found.status).toBe(200);
  return found.body;
}

describe("retries", () => {
  test("a failing receiver is tried 8 times, after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h, then the delivery has failed", async () => {
    const path = "/always-500";
    receiver.answer = (d) => (d.path === path ? { status: 500 } : { status: 200 });
    const endpoint = await createEndpoint(server, { url: `${receiver.url}${path}` });
    const sent = await testEvent(endpoint.endpointId);
    await deliverDue();
    for (const delay of retryDelaysMs) {
      const before = await attemptsOf(endpoint.endpointId, sent.delivery_id);
      expect(before.delivery.status).toBe("WEBHOOK_DELIVERY_STATUS_PENDING");
      const last = before.attempts.at(-1) as AttemptJson;
      expect(Date.parse(before.delivery.next_attempt_at) - Date.parse(last.attempted_at)).toBe(delay);
      // Not a moment early: one millisecond before, nothing is due.
      manual.set(new Date(Date.parse(before.delivery.next_attempt_at) - 1));
      await deliverDue();
      expect((await attemptsOf(endpoint.endpointId, sent.delivery_id)).attempts).toHaveLength(before.attempts.length);
      manual.advance(1);
      await deliverDue();
    }
    const done = await attemptsOf(endpoint.endpointId, sent.delivery_id);
    expect(done.delivery.status).toBe("WEBHOOK_DELIVERY_STATUS_FAILED");
    expect(done.attempts.map((a) => [a.number, a.status_code])).toEqual(Array.from({ length: 8 }, (_, i) => [i + 1, 500]));
    // Nothing more, however long one waits.
    manual.advance(48 * 3600_000);
    await deliverDue();
    expect((await attemptsOf(endpoint.endpointId, sent.delivery_id)).attempts).toHaveLength(8);
    expect(receiver.received.filter((d) => d.path === path).map((d) => d.id)).toEqual(Array(8).fill(sent.event_id));
    await webhooksRest(server, "DELETE", `/${endpoint.endpointId}`);
  });

  test("Retry-After on 503 (seconds) and 429 (an HTTP date) sets when the next attempt is made", async () => {
    const path = "/busy";
    const answers = [
      { status: 503, headers: { "retry-after": "120" } },
      { status: 429, headers: { "retry-after": new Date(manual.clock().getTime() + 3600_000).toUTCString() } },
      { status: 200 },
    ];
    receiver.answer = (d) => (d.path === path ? (answers.shift() ?? { status: 200 }) : { status: 200 });
    const endpoint = await createEndpoint(server, { url: `${receiver.url}${path}` });
    const sent = await testEvent(endpoint.endpointId);
    await deliverDue();
    let state = await attemptsOf(endpoint.endpointId, sent.delivery_id);
    expect(Date.parse(state.delivery.next_attempt_at) - Date.parse(state.attempts[0]!.attempted_at)).toBe(120_000);
    manual.advance(120_000);
    await deliverDue();
    state = await attemptsOf(endpoint.endpointId, sent.delivery_id);
    expect(state.attempts.map((a) => a.status_code)).toEqual([503, 429]);
    // The date is whole seconds: the delay is the hour, less what the HTTP date rounds away.
    const waited = Date.parse(state.delivery.next_attempt_at) - Date.parse(state.attempts[1]!.attempted_at);
    expect(waited).toBeGreaterThan(3600_000 - 120_000 - 1000);
    expect(waited).toBeLessThanOrEqual(3600_000);
    manual.set(new Date(state.delivery.next_attempt_at));
    await deliverDue();
    expect((await attemptsOf(endpoint.endpointId, sent.delivery_id)).delivery.status).toBe("WEBHOOK_DELIVERY_STATUS_DELIVERED");
    await webhooksRest(server, "DELETE", `/${endpoint.endpointId}`);
  });

  test("410 Gone fails the delivery and disables the endpoint; new events skip it until an admin enables it again", async () => {
    const path = "/gone";
    receiver.answer = (d) => (d.path === path ? { status: 410 } : { status: 200 });
    const endpoint = await createEndpoint(server, { url: `${receiver.url}${path}` });
    const sent = await testEvent(endpoint.endpointId);
    await deliverDue();
    expect((await attemptsOf(endpoint.endpointId, sent.delivery_id)).delivery.status).toBe("WEBHOOK_DELIVERY_STATUS_FAILED");
    const disabled = await webhooksRest<{ endpoint: { enabled: boolean; disabled_reason: string } }>(
      server,
      "GET",
      `/${endpoint.endpointId}`,
    );
    expect(disabled.body.endpoint).toMatchObject({ enabled: false, disabled_reason: "gone" });
    // A test event is refused while it is disabled, and real events are not recorded for it.
    expect((await webhooksRest(server, "POST", `/${endpoint.endpointId}/test`, {})).status).toBe(400);
    await applyOk(server, server.credentials.api_key, "version: 1\ndomains:\n  - name: gone.example.com\n");
    const listed = await webhooksRest<{ deliveries: unknown[] }>(server, "GET", `/${endpoint.endpointId}/deliveries`);
    expect(listed.body.deliveries).toHaveLength(1);
    const enabled = await webhooksRest<{ endpoint: { enabled: boolean; disabled_reason: string } }>(
      server,
      "PUT",
      `/${endpoint.endpointId}`,
      {
        enabled: true,
      },
    );
    expect(enabled.body.endpoint).toMatchObject({ enabled: true, disabled_reason: "" });
    await webhooksRest(server, "DELETE", `/${endpoint.endpointId}`);
  });

  test("a redirect is an answer like any other: never followed, retried on the schedule", async () => {
    const path = "/moved";
    receiver.answer = (d) => (d.path === path ? { status: 307, headers: { location: `${receiver.url}/elsewhere` } } : { status: 200 });
    const endpoint = await createEndpoint(server, { url: `${receiver.url}${path}` });
    const sent = await testEvent(endpoint.endpointId);
    await deliverDue();
    const state = await attemptsOf(endpoint.endpointId, sent.delivery_id);
    expect(state.attempts.map((a) => a.status_code)).toEqual([307]);
    expect(state.delivery.status).toBe("WEBHOOK_DELIVERY_STATUS_PENDING");
    expect(receiver.received.filter((d) => d.path === "/elsewhere")).toEqual([]);
    await webhooksRest(server, "DELETE", `/${endpoint.endpointId}`);
  });

  test("an answer slower than the attempt's time limit is a failed attempt, with why", async () => {
    const path = "/silent";
    receiver.answer = (d) => (d.path === path ? "hang" : { status: 200 });
    const endpoint = await createEndpoint(server, { url: `${receiver.url}${path}` });
    const sent = await testEvent(endpoint.endpointId);
    await deliverDue();
    const state = await attemptsOf(endpoint.endpointId, sent.delivery_id);
    expect(state.attempts).toEqual([expect.objectContaining({ number: 1, error: "no complete answer within 0.8 s" })]);
    expect(state.attempts[0]).not.toHaveProperty("status_code");
    await webhooksRest(server, "DELETE", `/${endpoint.endpointId}`);
  });
});

describe("sending again, signatures, concurrency", () => {
  test("a delivered event sent again carries the same webhook-id; a pending one cannot be sent again", async () => {
    let first = true;
    receiver.answer = (d) => {
      if (d.path !== "/again" || !first) return { status: 200 };
      first = false;
      return { status: 500 };
    };
    const endpoint = await createEndpoint(server, { url: `${receiver.url}/again` });
    const sent = await testEvent(endpoint.endpointId);
    await deliverDue();
    // Pending (its retry is due in 5 s): refused.
    const early = await webhooksRest<{ code: string }>(
      server,
      "POST",
      `/${endpoint.endpointId}/deliveries/${sent.delivery_id}/redeliver`,
      {},
    );
    expect({ status: early.status, code: early.body.code }).toEqual({ status: 400, code: "failed_precondition" });
    manual.advance(5_000);
    await deliverDue();
    const again = await webhooksRest<{ delivery: DeliveryJson }>(
      server,
      "POST",
      `/${endpoint.endpointId}/deliveries/${sent.delivery_id}/redeliver`,
      {},
    );
    expect(again.body.delivery).toMatchObject({ status: "WEBHOOK_DELIVERY_STATUS_PENDING", attempts: 0, event_id: sent.event_id });
    await deliverDue();
    const copies = receiver.received.filter((d) => d.path === "/again");
    expect(copies.map((d) => d.id)).toEqual([sent.event_id, sent.event_id, sent.event_id]);
    expect(new Set(copies.map((d) => d.body)).size).toBe(1);
    // Another endpoint's delivery is not this endpoint's.
    const other = await createEndpoint(server, { url: `${receiver.url}/other` });
    expect((await webhooksRest(server, "GET", `/${other.endpointId}/deliveries/${sent.delivery_id}/attempts`)).status).toBe(404);
    await webhooksRest(server, "DELETE", `/${endpoint.endpointId}`);
    await webhooksRest(server, "DELETE", `/${other.endpointId}`);
  });

  test("after a rotation both secrets sign for 24 hours (two signatures, each verifies), then the new one alone", async () => {
    receiver.answer = () => ({ status: 200 });
    // Near the real time: the standardwebhooks package refuses a timestamp more than 5 minutes away.
    manual.set(new Date());
    const endpoint = await createEndpoint(server, { url: `${receiver.url}/rotated` });
    const rotated = await webhooksRest<{ secret: string; endpoint: { previous_secret_expires_at: string } }>(
      server,
      "POST",
      `/${endpoint.endpointId}/rotate-secret`,
      {},
    );
    expect(rotated.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Date.parse(rotated.body.endpoint.previous_secret_expires_at) - manual.clock().getTime()).toBe(24 * 3600_000);
    await testEvent(endpoint.endpointId);
    await deliverDue();
    const during = receiver.received.filter((d) => d.path === "/rotated").at(-1)!;
    expect(during.signature.split(" ")).toHaveLength(2);
    // The standardwebhooks package accepts it with either secret (the header's timestamp is this test's clock, near now).
    expect(verifyDelivery(rotated.body.secret, during)).toEqual(during.event);
    expect(verifyDelivery(endpoint.secret, during)).toEqual(during.event);
    manual.advance(24 * 3600_000 + 1);
    await testEvent(endpoint.endpointId);
    await deliverDue();
    const after = receiver.received.filter((d) => d.path === "/rotated").at(-1)!;
    expect(after.signature).toBe(signPayload(rotated.body.secret, after.id, Number(after.timestamp), after.body));
    await webhooksRest(server, "DELETE", `/${endpoint.endpointId}`);
  });

  test("a receiver that does not answer holds at most its endpoint's share of attempts; another endpoint is served meanwhile", async () => {
    const slow = await createEndpoint(server, { url: `${receiver.url}/slow` });
    const fast = await createEndpoint(server, { url: `${receiver.url}/fast` });
    receiver.answer = (d) => (d.path === "/slow" ? "hang" : { status: 200 });
    for (let i = 0; i < 5; i++) await testEvent(slow.endpointId);
    const fastEvent = await testEvent(fast.endpointId);
    worker().kick();
    const [delivered] = await receiver.until(1, (d) => d.path === "/fast", 5_000);
    expect(delivered?.id).toBe(fastEvent.event_id);
    // perEndpoint is 3 here: the slow receiver holds three requests, not five.
    expect(receiver.received.filter((d) => d.path === "/slow")).toHaveLength(3);
    await worker().settled();
    await webhooksRest(server, "DELETE", `/${slow.endpointId}`);
    await webhooksRest(server, "DELETE", `/${fast.endpointId}`);
  });
});

describe("addresses (docs/security.md, Events (webhooks))", () => {
  test("a name is resolved at each attempt and the connection goes to the address resolved and checked", async () => {
    receiver.answer = () => ({ status: 200 });
    const port = new URL(receiver.url).port;
    const endpoint = await createEndpoint(server, { url: `http://receiver.test:${port}/by-name` });
    const before = resolutions.get("receiver.test") ?? 0;
    await testEvent(endpoint.endpointId);
    await testEvent(endpoint.endpointId);
    await deliverDue();
    const got = receiver.received.filter((d) => d.path === "/by-name");
    expect(got).toHaveLength(2);
    expect(got[0]?.headers.host).toBe(`receiver.test:${port}`);
    expect((resolutions.get("receiver.test") ?? 0) - before).toBe(2);
    await webhooksRest(server, "DELETE", `/${endpoint.endpointId}`);
  });

  test("resolving the name counts within the attempt's time: a name server that answers late cannot hold the attempt", async () => {
    receiver.answer = () => ({ status: 200 });
    const port = new URL(receiver.url).port;
    const endpoint = await createEndpoint(server, { url: `http://slow-dns.test:${port}/late-dns` });
    const sent = await testEvent(endpoint.endpointId);
    const started = performance.now();
    await deliverDue();
    expect(performance.now() - started).toBeLessThan(2_500);
    const state = await attemptsOf(endpoint.endpointId, sent.delivery_id);
    expect(state.attempts).toEqual([expect.objectContaining({ number: 1, error: "no complete answer within 0.8 s" })]);
    expect(state.delivery.status).toBe("WEBHOOK_DELIVERY_STATUS_PENDING");
    // The late answer, when it comes, leads nowhere.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(receiver.received.filter((d) => d.path === "/late-dns")).toEqual([]);
    await webhooksRest(server, "DELETE", `/${endpoint.endpointId}`);
  });
});

describe("without WEBHOOKS_ALLOW_PRIVATE_NETWORKS", () => {
  let strict: TestServer;
  /** What the resolver seam answers per name: a rebinding name answers a public address once, then loopback. */
  const answers = new Map<string, string[]>([
    ["metadata.example", ["169.254.169.254"]],
    ["private.example", ["10.1.2.3"]],
    ["mixed.example", ["93.184.215.14", "127.0.0.1"]],
    ["v6-loopback.example", ["::1"]],
    ["mapped.example", ["::ffff:127.0.0.1"]],
    // IPv6 forms that carry an IPv4 address: IPv4-compatible, IPv4-translated, Teredo.
    ["compatible.example", ["::7f00:1"]],
    ["translated.example", ["::ffff:0:a9fe:a9fe"]],
    ["teredo.example", ["2001:0:4136:e378:8000:63bf:3fff:fdd2"]],
  ]);
  beforeAll(async () => {
    strict = await startTestServer({
      webhooks: {
        sender: createHttpWebhookSender({
          allowPrivateNetworks: false,
          timeoutMs: 800,
          maxSocketsPerOrigin: 4,
          userAgent: "gatehouse-test",
          resolve: async (hostname) => answers.get(hostname) ?? [],
        }),
      },
    });
  });
  afterAll(() => strict?.close());

  test("an endpoint URL must be https and may not name a loopback, private, link-local or special address; each problem is listed", async () => {
    const org = strict.credentials.organization_id;
    const refused = async (body: Record<string, unknown>) => {
      const response = await strict.call(`/organization/${org}/webhooks`, {
        method: "POST",
        bearer: strict.credentials.api_key,
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      const answer = (await response.json()) as {
        code: string;
        message: string;
        details?: { debug?: { violations?: { field: string }[] } }[];
      };
      return {
        status: response.status,
        code: answer.code,
        fields: (answer.details?.[0]?.debug?.violations ?? []).map((v) => v.field),
        message: answer.message,
      };
    };
    for (const url of [
      "http://example.com/hook",
      "https://127.0.0.1/hook",
      "https://[::1]/hook",
      "https://10.0.0.8/hook",
      "https://169.254.169.254/latest/meta-data",
      "https://[fe80::1]/hook",
      "https://[::127.0.0.1]/hook",
      "https://[::ffff:0:169.254.169.254]/hook",
      "https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook",
      "https://localhost/hook",
      "https://localhost./hook",
      "https://api.LOCALHOST../hook",
      "https://user:password@example.com/hook",
      "https://example.com/hook#fragment",
      "ftp://example.com/hook",
      "not a url",
    ]) {
      const answer = await refused({ url });
      expect({ url, status: answer.status, fields: answer.fields }).toEqual({ url, status: 400, fields: ["url"] });
      // The answer says what to fix without repeating what was sent.
      expect(answer.message).not.toContain(url);
    }
    const both = await refused({ url: "http://10.0.0.1/x", event_types: ["identity.created", "no.such.type"] });
    expect(both).toMatchObject({ status: 400, fields: ["url", "event_types[1]"] });
    expect(await strict.app.database.client.webhookEndpoint.count()).toBe(0);
  });

  test("a name that resolves to a refused address is not connected to: the attempt says why", async () => {
    const org = strict.credentials.organization_id;
    const results: Record<string, string> = {};
    for (const name of answers.keys()) {
      const endpoint = await createEndpoint(strict, { url: `https://${name}/hook` });
      const sent = await strict.call(`/organization/${org}/webhooks/${endpoint.endpointId}/test`, {
        method: "POST",
        bearer: strict.credentials.api_key,
        headers: { "content-type": "application/json" },
        body: "{}",
      });
      const { delivery_id } = (await sent.json()) as { delivery_id: string };
      strict.app.deliveryWorker.kick();
      await new Promise((resolve) => setImmediate(resolve));
      await strict.app.deliveryWorker.settled();
      const found = await strict.call(`/organization/${org}/webhooks/${endpoint.endpointId}/deliveries/${delivery_id}/attempts`, {
        bearer: strict.credentials.api_key,
      });
      const attempts = ((await found.json()) as { attempts: AttemptJson[] }).attempts;
      results[name] = attempts[0]?.error ?? "";
    }
    expect(results["metadata.example"]).toContain("169.254.169.254 is a loopback, private or link-local address");
    expect(results["private.example"]).toContain("10.1.2.3 is a loopback, private or link-local address");
    // A public address beside a private one does not make the name acceptable.
    expect(results["mixed.example"]).toContain("127.0.0.1 is a loopback, private or link-local address");
    expect(results["v6-loopback.example"]).toContain("::1 is a loopback");
    expect(results["mapped.example"]).toContain("is a loopback, private or link-local address");
    for (const name of ["compatible.example", "translated.example", "teredo.example"])
      expect({ name, error: results[name] }).toEqual({ name, error: expect.stringContaining("special-purpose address") });
  });
});
