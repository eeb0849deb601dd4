import { systemClock } from "../../src/domain/clock.js";
import { createGatewayWatch, type GatewayEvent } from "../../src/domain/gateway/watch-gateway.js";
import { createConfigStore } from "../../src/storage/config-store.js";
import { createGatewayStore } from "../../src/storage/gateway-store.js";
import { gatewayAdmin, signInWithMagicLink } from "../support/gateway-control.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * The stream without the change feed: what it does on its own, every
 * heartbeat (refresh the connected-gateway record) and every few heartbeats
 * (re-read everything, so a change nobody announced still arrives, e.g. an
 * operator command in another process on SQLite).
 */
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

test("heartbeats refresh last-seen, and a re-read every few heartbeats delivers changes that were never announced", async () => {
  const org = server.credentials.organization_id;
  const admin = gatewayAdmin(server);
  const created = await admin.credentials.createGatewayKey({ organizationId: org, name: "reconcile" });
  await admin.close();
  const store = createGatewayStore(server.app.database.client);
  const watch = createGatewayWatch({
    gatewayStore: store,
    configStore: createConfigStore(server.app.database.client, server.app.database.provider),
    // Deaf: no notice ever arrives.
    changes: { subscribe: () => ({ ready: Promise.resolve(), live: () => false, close() {} }) },
    signingKeys: async () => [],
    issuer: "http://issuer.test",
    clock: systemClock,
    heartbeatMs: 40,
    reconcileEvery: 2,
  });
  const controller = new AbortController();
  const events = watch.watch({
    organizationId: org,
    gatewayKeyId: created.key.id,
    gatewayId: "edge-deaf",
    sinceRevision: undefined,
    signal: controller.signal,
  });
  const next = async (): Promise<GatewayEvent> => {
    for (;;) {
      const result = await events.next();
      if (result.done) throw new Error("the stream ended");
      if (result.value.kind !== "heartbeat") return result.value;
    }
  };
  try {
    expect((await next()).kind).toBe("snapshot");
    const [connected] = await store.listConnections(org, new Date(0));
    expect(connected?.gatewayId).toBe("edge-deaf");

    // Written straight to the store, announced to nobody.
    const session = await signInWithMagicLink(server);
    await store.createConsumerKey({
      id: "11111111-1111-4111-8111-111111111111",
      organizationId: org,
      name: "silent",
      prefix: "ck_silent",
      hash: "a".repeat(64),
      createdAt: new Date(),
      revokedAt: null,
    });
    await server.app.database.client.identitySession.update({ where: { id: session.sessionId }, data: { revokedAt: new Date() } });
    const seen = [await next(), await next()].map((e) => e.kind).sort();
    expect(seen).toEqual(["consumer_created", "sessions_revoked"]);

    const [refreshed] = await store.listConnections(org, new Date(0));
    expect(refreshed?.lastSeenAt.getTime()).toBeGreaterThan(connected?.lastSeenAt.getTime() ?? 0);
  } finally {
    controller.abort();
    await events.return(undefined);
  }
  // The stream's end is recorded in the background.
  const deadline = Date.now() + 5_000;
  let ended = (await store.listConnections(org, new Date(0)))[0];
  while (!ended?.disconnectedAt && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20));
    ended = (await store.listConnections(org, new Date(0)))[0];
  }
  expect(ended?.disconnectedAt).toBeInstanceOf(Date);
});
