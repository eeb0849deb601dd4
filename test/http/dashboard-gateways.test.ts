import { createHash } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { addMember, dashboardRpc, setUpOwner, startDashboardServer, type DashboardTestServer } from "../support/dashboard-server.js";
import { muteGatewayHangUps, signInWithMagicLink, watchGateway } from "../support/gateway-control.js";
import { callIdentity } from "../support/identity-client.js";

/**
 * The dashboard's Gateways page (docs/dashboard.md, "The pages"; docs/gateway.md,
 * "Keys and consumers"): gateway keys (created
 * once-shown, listed, revoked), the gateways that follow the organisation,
 * and consumer keys; admins change, members read. And what the dashboard
 * changes reaches the gateways at once, as the API's changes do.
 */

interface ErrorBody {
  code: string;
  message: string;
  details?: { debug?: { reason?: string; violations?: { field: string }[] } }[];
}

interface GatewayKeyJson {
  id: string;
  name: string;
  prefix: string;
  createdAt: string;
  lastUsedAt?: string;
  revokedAt?: string;
}

interface ConsumerJson {
  consumerId: string;
  name: string;
  prefix: string;
  createdAt: string;
  revokedAt?: string;
}

const reasonOf = (body: ErrorBody) => body.details?.[0]?.debug?.reason;
const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

let server: DashboardTestServer;
let org: string;
let owner: string;
let member: string;
const streams: { close(): void }[] = [];

beforeAll(async () => {
  muteGatewayHangUps();
  server = await startDashboardServer();
  org = server.credentials.organization_id;
  owner = await setUpOwner(server);
  member = (await addMember(server, owner, { email: "reader@example.com", password: "a reading passphrase" })).cookie;
});
afterEach(() => {
  for (const stream of streams.splice(0)) stream.close();
});
afterAll(() => server.close());

async function rpc<T = Record<string, unknown>>(method: string, body: Record<string, unknown>, cookie = owner) {
  const response = await dashboardRpc(server, method, { organizationId: org, ...body }, { cookie });
  return { status: response.status, body: (await response.json()) as T & ErrorBody };
}

function watch(key: string, gatewayId: string) {
  const stream = watchGateway(server.url, key, { gatewayId });
  streams.push(stream);
  return stream;
}

const configStatus = async (bearer: string) => (await server.call(`/organization/${org}/config`, { bearer })).status;

describe("gateway keys in the dashboard", () => {
  test("CreateGatewayKey answers the key once; ListGatewayKeys shows its prefix, creation and last use, never the key", async () => {
    const created = await rpc<{ gatewayKey: GatewayKeyJson; key: string }>("CreateGatewayKey", { name: "  edge-eu  " });
    expect(created.status).toBe(200);
    expect(created.body.key).toMatch(/^gw_[A-Za-z0-9_-]{43}$/);
    expect(created.body.gatewayKey).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      name: "edge-eu",
      prefix: created.body.key.slice(0, 9),
      createdAt: expect.any(String),
    });
    expect(await configStatus(created.body.key)).toBe(200);

    const listed = await rpc<{ gatewayKeys: GatewayKeyJson[] }>("ListGatewayKeys", {});
    const row = listed.body.gatewayKeys.find((k) => k.id === created.body.gatewayKey.id);
    expect(row).toMatchObject({ name: "edge-eu", prefix: created.body.key.slice(0, 9), lastUsedAt: expect.any(String) });
    expect(JSON.stringify(listed.body)).not.toContain(created.body.key);
    // Members read the list too.
    expect((await rpc("ListGatewayKeys", {}, member)).body).toEqual(listed.body);
  });

  test("RevokeGatewayKey: the key is refused at once, its stream ends, it is listed as revoked only on request", async () => {
    const created = await rpc<{ gatewayKey: GatewayKeyJson; key: string }>("CreateGatewayKey", { name: "edge-to-revoke" });
    const stream = watch(created.body.key, "edge-to-revoke");
    expect((await stream.next()).event.case).toBe("snapshot");
    expect((await rpc("RevokeGatewayKey", { gatewayKeyId: created.body.gatewayKey.id })).status).toBe(200);
    expect(ConnectError.from(await stream.ended(5_000)).code).toBe(Code.Unauthenticated);
    expect(await configStatus(created.body.key)).toBe(401);
    // Revoking it again changes nothing and is no error, as for API keys.
    expect((await rpc("RevokeGatewayKey", { gatewayKeyId: created.body.gatewayKey.id })).status).toBe(200);
    const live = await rpc<{ gatewayKeys: GatewayKeyJson[] }>("ListGatewayKeys", {});
    expect(live.body.gatewayKeys.map((k) => k.id)).not.toContain(created.body.gatewayKey.id);
    const all = await rpc<{ gatewayKeys: GatewayKeyJson[] }>("ListGatewayKeys", { includeRevoked: true });
    expect(all.body.gatewayKeys.find((k) => k.id === created.body.gatewayKey.id)?.revokedAt).toEqual(expect.any(String));
  });

  test("ListConnectedGateways lists a gateway following the organisation, with its revision, as connected", async () => {
    const created = await rpc<{ key: string }>("CreateGatewayKey", { name: "edge-listed" });
    const stream = watch(created.body.key, "edge-listed.example");
    const snapshot = await stream.next();
    const revision = snapshot.event.case === "snapshot" ? snapshot.event.value.revision : -1;
    const listed = await rpc<{ gateways: { gatewayId: string; revision?: number; connected?: boolean; lastSeenAt: string }[] }>(
      "ListConnectedGateways",
      {},
      member,
    );
    expect(listed.status).toBe(200);
    const gateway = listed.body.gateways.find((g) => g.gatewayId === "edge-listed.example");
    expect(gateway).toMatchObject({ connected: true, lastSeenAt: expect.any(String) });
    expect(gateway?.revision ?? 0).toBe(revision);
  });

  test("refusals: a bad name lists its field, an unknown id is 404, a malformed one 400, a member may not create or revoke", async () => {
    for (const name of ["", "x".repeat(101), "line\nbreak"]) {
      const refused = await rpc("CreateGatewayKey", { name });
      expect({ name, status: refused.status, fields: refused.body.details?.[0]?.debug?.violations?.map((v) => v.field) }).toEqual({
        name,
        status: 400,
        fields: ["name"],
      });
    }
    const unknown = await rpc("RevokeGatewayKey", { gatewayKeyId: "00000000-0000-4000-8000-000000000000" });
    expect({ status: unknown.status, reason: reasonOf(unknown.body) }).toEqual({ status: 404, reason: "gateway_key_not_found" });
    expect((await rpc("RevokeGatewayKey", { gatewayKeyId: "not-a-uuid" })).status).toBe(400);

    const theirs = await rpc<{ gatewayKey: GatewayKeyJson; key: string }>("CreateGatewayKey", { name: "admins-only" });
    const created = await rpc("CreateGatewayKey", { name: "by-a-member" }, member);
    const revoked = await rpc("RevokeGatewayKey", { gatewayKeyId: theirs.body.gatewayKey.id }, member);
    expect([created.status, reasonOf(created.body), revoked.status, reasonOf(revoked.body)]).toEqual([
      403,
      "role_insufficient",
      403,
      "role_insufficient",
    ]);
    expect(await configStatus(theirs.body.key)).toBe(200);
  });
});

describe("consumer keys in the dashboard", () => {
  test("CreateConsumerKey answers the key once and every gateway learns its hash; RevokeConsumerKey reaches them at once", async () => {
    const gateway = await rpc<{ key: string }>("CreateGatewayKey", { name: "consumer-watcher" });
    const stream = watch(gateway.body.key, "consumer-watcher");
    expect((await stream.next()).event.case).toBe("snapshot");

    const created = await rpc<{ consumer: ConsumerJson; key: string }>("CreateConsumerKey", { name: "partner-acme" });
    expect(created.status).toBe(200);
    expect(created.body.key).toMatch(/^ck_[A-Za-z0-9_-]{43}$/);
    expect(created.body.consumer).toEqual({
      consumerId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      name: "partner-acme",
      prefix: created.body.key.slice(0, 9),
      createdAt: expect.any(String),
    });
    const announced = await stream.next();
    expect(announced.event).toEqual({
      case: "consumerCreated",
      value: expect.objectContaining({ consumerId: created.body.consumer.consumerId, keySha256: sha256(created.body.key) }),
    });
    // A consumer key is no credential of the platform's API.
    expect(await configStatus(created.body.key)).toBe(401);

    const listed = await rpc<{ consumers: ConsumerJson[] }>("ListConsumerKeys", {}, member);
    expect(listed.body.consumers.map((c) => c.consumerId)).toContain(created.body.consumer.consumerId);
    expect(JSON.stringify(listed.body)).not.toContain(created.body.key);

    expect((await rpc("RevokeConsumerKey", { consumerId: created.body.consumer.consumerId })).status).toBe(200);
    const revoked = await stream.next();
    expect(revoked.event).toEqual({
      case: "consumerRevoked",
      value: expect.objectContaining({ consumerId: created.body.consumer.consumerId }),
    });
    expect((await rpc("RevokeConsumerKey", { consumerId: created.body.consumer.consumerId })).status).toBe(200);
    const all = await rpc<{ consumers: ConsumerJson[] }>("ListConsumerKeys", { includeRevoked: true });
    expect(all.body.consumers.find((c) => c.consumerId === created.body.consumer.consumerId)?.revokedAt).toEqual(expect.any(String));
  });

  test("refusals: an unknown consumer is 404, a malformed id 400, a member may not create or revoke", async () => {
    const unknown = await rpc("RevokeConsumerKey", { consumerId: "00000000-0000-4000-8000-000000000000" });
    expect({ status: unknown.status, reason: reasonOf(unknown.body) }).toEqual({ status: 404, reason: "consumer_not_found" });
    expect((await rpc("RevokeConsumerKey", { consumerId: "nope" })).status).toBe(400);
    const created = await rpc<{ consumer: ConsumerJson }>("CreateConsumerKey", { name: "keeps" });
    expect((await rpc("CreateConsumerKey", { name: "by-a-member" }, member)).status).toBe(403);
    expect((await rpc("RevokeConsumerKey", { consumerId: created.body.consumer.consumerId }, member)).status).toBe(403);
    const listed = await rpc<{ consumers: ConsumerJson[] }>("ListConsumerKeys", {});
    expect(listed.body.consumers.map((c) => c.consumerId)).toContain(created.body.consumer.consumerId);
  });
});

describe("session revocations made in the dashboard reach the gateways at once", () => {
  test.each([
    ["every session of the identity", (_sessionId: string) => ""],
    ["one session", (sessionId: string) => sessionId],
  ])("RevokeIdentitySessions (%s) is announced like any revocation", async (what, sessionOf) => {
    // Signed in first: the organisation's first sign-in makes its signing key, which would be the stream's next message.
    const session = await signInWithMagicLink(server);
    const gateway = await rpc<{ key: string }>("CreateGatewayKey", { name: "session-watcher" });
    const stream = watch(gateway.body.key, "session-watcher");
    expect((await stream.next()).event.case).toBe("snapshot");
    const started = performance.now();
    const revoked = await rpc<{ revoked: number }>("RevokeIdentitySessions", {
      identityId: session.identityId,
      sessionId: sessionOf(session.sessionId),
    });
    expect(revoked).toMatchObject({ status: 200, body: { revoked: 1 } });
    // Well within a gateway stream's periodic re-read (a minute): the notice, not the re-read, carries it.
    const announced = await stream.next(5_000);
    expect(announced.event.case).toBe("sessionsRevoked");
    const sessions = announced.event.case === "sessionsRevoked" ? announced.event.value.sessions : [];
    expect(sessions.map((s) => s.sessionId)).toContain(session.sessionId);
    console.log(`dashboard revocation (${what}) reached the gateway stream in ${Math.round(performance.now() - started)} ms`);
    expect((await callIdentity(server, "ValidateSession", { token: session.token }, server.credentials.secret_key)).status).toBe(401);
  });
});
