import { eventTypes } from "../../src/domain/events/catalogue.js";
import {
  createInvitedAccount,
  dashboardRpc,
  invite,
  setUpOwner,
  startDashboardServer,
  type DashboardTestServer,
} from "../support/dashboard-server.js";
import { callIdentity, goodPassword, newIdentifier, postRest, setIdentitySettings } from "../support/identity-client.js";
import { secretsApi } from "../support/secrets-client.js";
import { createSoftwareAuthenticator } from "../support/software-authenticator.js";
import { applyOk } from "../support/config-documents.js";
import { startWebhookReceiver, verifyDelivery, type ReceivedDelivery, type WebhookReceiver } from "../support/webhook-receiver.js";
import { createEndpoint, credentialShapes, dataProblems } from "../support/webhooks.js";

/**
 * docs/events.md: every event type of v1, caused by its real action through
 * the platform's doors (REST, Connect, the dashboard's RPCs), is delivered to a
 * real receiver, signed so that the standardwebhooks package (a verifier
 * nobody here wrote) accepts it, with `data` as its proto message declares it,
 * and never a secret value, a key, a token or a password.
 */
let server: DashboardTestServer;
let receiver: WebhookReceiver;
let org: string;
let owner: string;
let all: { endpointId: string; secret: string };
let sessionsOnly: { endpointId: string; secret: string };
/** Every secret this file handles: none may appear in any delivery. */
const secrets = new Set<string>();

const keep = <T extends string>(value: T): T => {
  if (value) secrets.add(value);
  return value;
};

async function dashboard<T = Record<string, unknown>>(method: string, body: Record<string, unknown>): Promise<T> {
  const response = await dashboardRpc(server, method, { organizationId: org, ...body }, { cookie: owner });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${method}: ${response.status} ${text}`);
  return JSON.parse(text) as T;
}

function ok<T>(answer: { status: number; body: T; text?: string }, what: string): T {
  if (answer.status !== 200) throw new Error(`${what}: ${answer.status} ${answer.text ?? JSON.stringify(answer.body)}`);
  return answer.body;
}

beforeAll(async () => {
  // localhost: a WebAuthn RP ID (passkeys below are made by a software authenticator for this origin).
  server = await startDashboardServer({ publicHost: "localhost", env: { WEBHOOKS_ALLOW_PRIVATE_NETWORKS: "true" } });
  org = server.credentials.organization_id;
  for (const value of [server.credentials.api_key, server.credentials.publishable_key, server.credentials.secret_key, server.setupToken]) {
    keep(value);
  }
  receiver = await startWebhookReceiver();
  all = await createEndpoint(server, { url: `${receiver.url}/all`, description: "every event" });
  sessionsOnly = await createEndpoint(server, { url: `${receiver.url}/sessions`, event_types: ["session.created"] });
  keep(all.secret);
  keep(sessionsOnly.secret);
  await setIdentitySettings(server, { password: true, rpId: "localhost", origins: [server.origin], ipLimitPerMinute: 100_000 });
  owner = await setUpOwner(server);
}, 30_000);

afterAll(async () => {
  await receiver?.close();
  await server?.close();
});

/** Causes every event type of v1 once or more, through the doors an application or an operator uses. */
async function causeEveryEvent(): Promise<void> {
  const pk = server.credentials.publishable_key;
  const sk = server.credentials.secret_key;
  keep(goodPassword);

  // identity.created (password), session.created (password), session.created again on login.
  const identifier = newIdentifier("events");
  const registered = ok(
    await postRest<{ identity_id: string; session: { token: string } }>(
      server,
      "/identity/register/password",
      { identifier, password: goodPassword },
      pk,
    ),
    "register",
  );
  keep(registered.session.token);
  const login = ok(
    await postRest<{ session: { token: string } }>(server, "/identity/login/password", { identifier, password: goodPassword }, pk),
    "login",
  );
  keep(login.session.token);
  // password.changed (reset), session.revoked (password_changed) for both sessions.
  const newPassword = keep(`${goodPassword} renewed`);
  ok(await postRest(server, "/identity/reset/password", { identity_id: registered.identity_id, new_password: newPassword }, sk), "reset");
  // password.changed (reset_token).
  const requested = ok(await postRest<{ token: string }>(server, "/v1/identity/reset-password", { identifier }, sk), "request reset");
  keep(requested.token);
  const thirdPassword = keep(`${goodPassword} once more`);
  ok(await postRest(server, "/v1/identity/reset-password", { token: requested.token, new_password: thirdPassword }, pk), "complete reset");

  // identity.created (magic_link), session.created (magic_link), session.revoked (revoked).
  const generated = ok(
    await callIdentity<{ token: string }>(server, "GenerateMagicLink", { identifier: newIdentifier("magic") }, sk),
    "magic link",
  );
  keep(generated.token);
  const verified = ok(
    await callIdentity<{ identityId: string; session: { token: string } }>(server, "VerifyMagicLink", { token: generated.token }, pk),
    "verify",
  );
  keep(verified.session.token);
  const sessionId = JSON.parse(Buffer.from(verified.session.token.split(".")[1] ?? "", "base64url").toString()).sid as string;
  ok(await callIdentity(server, "RevokeSession", { sessionId }, sk), "revoke session");

  // identity.created (passkey), passkey.added, session.created (passkey); passkey.added, passkey.removed; identity.deleted.
  const authenticator = createSoftwareAuthenticator(server.origin);
  const begun = ok(
    await postRest<{ ceremony_id: string; options: never }>(
      server,
      "/identity/register/begin",
      { identifier: newIdentifier("passkey") },
      pk,
    ),
    "begin",
  );
  const finished = ok(
    await postRest<{ identity_id: string; credential_id: string; session: { token: string } }>(
      server,
      "/identity/register/finish",
      { ceremony_id: begun.ceremony_id, credential: authenticator.create(begun.options) },
      pk,
    ),
    "finish",
  );
  keep(finished.session.token);
  const adding = ok(
    await callIdentity<{ ceremonyId: string; options: never }>(server, "BeginAddPasskey", { identityId: finished.identity_id }, sk),
    "begin add",
  );
  const added = ok(
    await callIdentity<{ credentialId: string }>(
      server,
      "FinishAddPasskey",
      { ceremonyId: adding.ceremonyId, credential: authenticator.create(adding.options), name: "spare key" },
      sk,
    ),
    "finish add",
  );
  ok(
    await callIdentity(server, "RemovePasskey", { identityId: finished.identity_id, credentialId: added.credentialId }, sk),
    "remove passkey",
  );
  // identity.deleted, and session.revoked (identity_deleted) for its live session.
  ok(await callIdentity(server, "DeleteIdentity", { identityId: finished.identity_id }, sk), "delete identity");

  // config.applied.
  await applyOk(server, server.credentials.api_key, "version: 1\ndomains:\n  - name: events.example.com\n");

  // secret.created, secret.updated, secret.deleted; secret.sealing_key_rotated.
  const api = secretsApi(server, server.credentials.api_key);
  await api.put("EVENTS_TOKEN", "production", keep("first-secret-value-8c1f"));
  await api.put("EVENTS_TOKEN", "production", keep("second-secret-value-27ad"));
  expect((await api.deleteResponse("EVENTS_TOKEN", "production")).status).toBe(200);
  const rotated = await server.call(`/organization/${org}/secrets/public-key/rotate`, {
    method: "POST",
    bearer: server.credentials.api_key,
    headers: { "content-type": "application/json" },
    body: "{}",
  });
  expect(rotated.status).toBe(200);

  // key.created and key.revoked of every kind, through the dashboard.
  const apiKey = await dashboard<{ apiKey: { id: string }; key: string }>("CreateApiKey", { name: "events key", role: "ROLE_MEMBER" });
  keep(apiKey.key);
  await dashboard("RevokeApiKey", { apiKeyId: apiKey.apiKey.id });
  const gateway = await dashboard<{ gatewayKey: { id: string }; key: string }>("CreateGatewayKey", { name: "edge-events" });
  keep(gateway.key);
  await dashboard("RevokeGatewayKey", { gatewayKeyId: gateway.gatewayKey.id });
  const consumer = await dashboard<{ consumer: { consumerId: string }; key: string }>("CreateConsumerKey", { name: "partner-events" });
  keep(consumer.key);
  await dashboard("RevokeConsumerKey", { consumerId: consumer.consumer.consumerId });
  keep((await dashboard<{ key: string }>("RotateIdentityKey", { kind: "IDENTITY_KEY_KIND_PUBLISHABLE" })).key);

  // member.invited, member.joined, member.removed.
  const invitation = await invite(server, owner, { email: "events.member@example.com" });
  keep(invitation.token);
  const memberPassword = keep("member password for events 1");
  const member = await createInvitedAccount(server, invitation.token, memberPassword);
  await dashboard("RemoveMember", { accountId: member.accountId });

  // signing_key.rotated.
  await dashboard("RotateSessionSigningKey", {});

  // webhook.test.
  const tested = await server.call(`/organization/${org}/webhooks/${all.endpointId}/test`, {
    method: "POST",
    bearer: server.credentials.api_key,
    headers: { "content-type": "application/json" },
    body: "{}",
  });
  expect(tested.status).toBe(200);
}

const ofAll = (d: ReceivedDelivery) => d.path === "/all";

describe("every event type of v1, caused by its real action", () => {
  let deliveries: ReceivedDelivery[];

  beforeAll(async () => {
    await causeEveryEvent();
    // Every type reached the endpoint that takes them all.
    await receiver.until(1, ofAll);
    const deadline = Date.now() + 15_000;
    for (;;) {
      const seen = new Set(receiver.received.filter(ofAll).map((d) => d.event.type));
      if (eventTypes.every((type) => seen.has(type)) || Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    deliveries = receiver.received.filter(ofAll);
  }, 60_000);

  test("every type arrives, with the methods and reasons its actions gave", () => {
    expect([...new Set(deliveries.map((d) => d.event.type))].sort()).toEqual([...eventTypes].sort());
    const values = (type: string, key: string) =>
      [...new Set(deliveries.filter((d) => d.event.type === type).map((d) => d.event.data[key]))].sort();
    expect(values("identity.created", "method")).toEqual(["magic_link", "passkey", "password"]);
    expect(values("session.created", "method")).toEqual(["magic_link", "passkey", "password"]);
    expect(values("session.revoked", "reason")).toEqual(["identity_deleted", "password_changed", "revoked"]);
    expect(values("password.changed", "method")).toEqual(["reset", "reset_token"]);
    expect(values("key.created", "kind")).toEqual(["api_key", "consumer_key", "gateway_key", "publishable_key"]);
    expect(values("key.revoked", "kind")).toEqual(["api_key", "consumer_key", "gateway_key", "publishable_key"]);
    expect(deliveries.filter((d) => d.event.type === "secret.updated").map((d) => d.event.data.version)).toEqual([2]);
  });

  test("each is signed as Standard Webhooks 1.0 says: the standardwebhooks package verifies it with the endpoint's secret", () => {
    for (const delivery of deliveries) {
      expect(verifyDelivery(all.secret, delivery)).toEqual(delivery.event);
      expect(delivery.id).toMatch(/^evt_[0-9a-f]{32}$/);
      expect(delivery.signature).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
      expect(delivery.headers["content-type"]).toBe("application/json");
      expect(Math.abs(Number(delivery.timestamp) - Date.now() / 1000)).toBeLessThan(120);
      // Another endpoint's secret does not verify it.
      expect(() => verifyDelivery(sessionsOnly.secret, delivery)).toThrow();
    }
  });

  test("the body is {type, timestamp, data}; data names the organisation and is what the event's proto message declares", () => {
    const problems: string[] = [];
    for (const delivery of deliveries) {
      expect(Object.keys(delivery.event).sort()).toEqual(["data", "timestamp", "type"]);
      expect(new Date(delivery.event.timestamp).toISOString()).toBe(delivery.event.timestamp);
      expect(delivery.event.data.organization_id).toBe(org);
      problems.push(...dataProblems(delivery.event.type, delivery.event.data));
    }
    expect(problems).toEqual([]);
  });

  test("no event carries a secret value, a key, a token or a password (every type checked)", () => {
    expect(secrets.size).toBeGreaterThan(15);
    for (const delivery of receiver.received) {
      const text = JSON.stringify({ body: delivery.body, headers: delivery.headers });
      for (const value of secrets)
        expect({ type: delivery.event.type, leaked: text.includes(value) }).toEqual({ type: delivery.event.type, leaked: false });
      for (const shape of credentialShapes)
        expect({ type: delivery.event.type, shape: String(shape), found: shape.test(delivery.body) }).toMatchObject({ found: false });
    }
  });

  test("an endpoint gets only the types it takes, and an event has one webhook-id for every endpoint", async () => {
    const forSessions = await receiver.until(3, (d) => d.path === "/sessions");
    expect(new Set(forSessions.map((d) => d.event.type))).toEqual(new Set(["session.created"]));
    for (const delivery of forSessions) {
      expect(verifyDelivery(sessionsOnly.secret, delivery)).toEqual(delivery.event);
      const same = deliveries.find((d) => d.body === delivery.body);
      expect(same?.id).toBe(delivery.id);
    }
  });
});
