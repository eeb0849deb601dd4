import { Code, ConnectError } from "@connectrpc/connect";
import { Credential } from "../../gen/svc/v1/auth_pb.js";
import { ConfigService } from "../../gen/svc/v1/config_pb.js";
import { DashboardService } from "../../gen/svc/v1/dashboard_pb.js";
import { GatewayService } from "../../gen/svc/v1/gateway_pb.js";
import { IdentityService } from "../../gen/svc/v1/identity_pb.js";
import { SecretsService } from "../../gen/svc/v1/secrets_pb.js";
import { hashToken } from "../../src/crypto/tokens.js";
import type { GatewayCredentials } from "../../src/domain/gateway/gateway-credentials.js";
import { authRuleOf } from "../../src/interceptors/auth.js";
import { applyOk } from "../support/config-documents.js";
import { connectCall, createOtherOrganization } from "../support/credentials.js";
import { gatewayAdmin, muteGatewayHangUps, secretRouteDocument, signInWithMagicLink, watchGateway } from "../support/gateway-control.js";
import { createClientKeyPair, errorOf, openRetrieval, secretsApi } from "../support/secrets-client.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * Gateway keys (gw_) and consumer keys (ck_): created once-shown, stored as
 * hashes, listed and revoked; and a gateway key's least privilege.
 */
let server: TestServer;
let admin: { credentials: GatewayCredentials; close(): Promise<void> };
let org: string;
const streams: { close(): void }[] = [];

beforeAll(async () => {
  muteGatewayHangUps();
  server = await startTestServer();
  admin = gatewayAdmin(server);
  org = server.credentials.organization_id;
});
afterEach(() => {
  for (const s of streams.splice(0)) s.close();
});
afterAll(async () => {
  await admin.close();
  await server.close();
});

const newGatewayKey = async (organizationId = org) =>
  (await admin.credentials.createGatewayKey({ organizationId, name: `edge ${Math.random().toString(36).slice(2, 6)}` })).gatewayKey;

function watch(bearer: string, request: { gatewayId?: string; sinceRevision?: number; organizationId?: string } = {}) {
  const stream = watchGateway(server.url, bearer, { gatewayId: "edge-1", ...request });
  streams.push(stream);
  return stream;
}

describe("gateway keys", () => {
  test("a gateway key is gw_ and 43 base64url characters, shown once, and stored only as its SHA-256", async () => {
    const created = await admin.credentials.createGatewayKey({ organizationId: org, name: "edge eu-west" });
    expect(created.gatewayKey).toMatch(/^gw_[A-Za-z0-9_-]{43}$/);
    expect(created.key).toMatchObject({
      organizationId: org,
      name: "edge eu-west",
      prefix: created.gatewayKey.slice(0, 9),
      revokedAt: null,
    });

    const listed = await admin.credentials.listGatewayKeys(org);
    expect(listed.map((k) => k.id)).toContain(created.key.id);
    expect(JSON.stringify(listed)).not.toContain(created.gatewayKey);

    const rows = await server.app.database.client.gatewayKey.findMany({ where: { id: created.key.id } });
    expect(rows[0]?.hash).toBe(hashToken(created.gatewayKey));
    expect(JSON.stringify(rows, (_k, v) => (typeof v === "bigint" ? String(v) : v))).not.toContain(created.gatewayKey.slice(3));
  });

  test("a name is 1 to 100 characters without control characters; an unknown organisation is not_found", async () => {
    for (const name of ["", "   ", "x".repeat(101), "line\nbreak"]) {
      await expect(admin.credentials.createGatewayKey({ organizationId: org, name })).rejects.toMatchObject({
        kind: "invalid_argument",
        violations: [expect.objectContaining({ field: "name" })],
      });
    }
    await expect(
      admin.credentials.createGatewayKey({ organizationId: "00000000-0000-4000-8000-000000000000", name: "edge" }),
    ).rejects.toMatchObject({ kind: "not_found", reason: "organization_not_found" });
    await expect(admin.credentials.revokeGatewayKey(org, "not-a-uuid")).rejects.toMatchObject({ kind: "invalid_argument" });
    await expect(admin.credentials.revokeGatewayKey(org, "00000000-0000-4000-8000-000000000000")).rejects.toMatchObject({
      kind: "not_found",
      reason: "gateway_key_not_found",
    });
  });

  test("it follows its own organisation: GetConfig, WatchConfig, WatchGateway and ValidateSession answer, with or without the organisation id", async () => {
    const key = await newGatewayKey();
    for (const body of [{ organizationId: org }, {}]) {
      const response = await connectCall(server, "/svc.v1.ConfigService/GetConfig", body, key);
      expect(response.status).toBe(200);
    }
    const rest = await server.call(`/organization/${org}/config`, { bearer: key });
    expect(rest.status).toBe(200);

    const session = await signInWithMagicLink(server);
    const validated = await connectCall(server, "/svc.v1.IdentityService/ValidateSession", { token: session.token }, key);
    expect(validated.status).toBe(200);
    expect(await validated.json()).toMatchObject({ identityId: session.identityId, sessionId: session.sessionId });

    const snapshot = await watch(key).next();
    expect(snapshot.event.case).toBe("snapshot");
  });

  test("every other RPC of every service answers 403 wrong_credential_kind", async () => {
    const key = await newGatewayKey();
    const refused: string[] = [];
    for (const service of [ConfigService, SecretsService, IdentityService, DashboardService, GatewayService]) {
      for (const method of service.methods) {
        const rule = authRuleOf(method);
        if (rule.credentials.includes(Credential.GATEWAY_KEY) || rule.credentials.includes(Credential.NONE)) continue;
        const response = await connectCall(server, `/${service.typeName}/${method.name}`, {}, key, {
          origin: server.app.config.publicUrl,
          "x-gatehouse-dashboard": "1",
        });
        const error = await errorOf(response);
        expect({ rpc: method.name, status: error.status, reason: error.reason }).toEqual({
          rpc: method.name,
          status: 403,
          reason: "wrong_credential_kind",
        });
        refused.push(method.name);
      }
    }
    expect(refused).toEqual(expect.arrayContaining(["ApplyConfig", "PutSecret", "DeleteSecret", "RevokeSession", "CreateApiKey"]));

    // The REST doors of the same RPCs refuse it the same way.
    const put = await server.call(`/organization/${org}/config`, {
      method: "PUT",
      headers: { "content-type": "application/yaml" },
      body: "version: 1\n",
      bearer: key,
    });
    expect((await errorOf(put)).reason).toBe("wrong_credential_kind");
    const list = await server.call(`/organization/${org}/secrets?env=production`, { bearer: key });
    expect(list.status).toBe(403);
  });

  test("another organisation's id is not_found, as if it did not exist", async () => {
    const other = await createOtherOrganization(server);
    const key = await newGatewayKey();
    const get = await connectCall(server, "/svc.v1.ConfigService/GetConfig", { organizationId: other.organizationId }, key);
    expect((await errorOf(get)).reason).toBe("organization_not_found");
    const error = await watch(key, { organizationId: other.organizationId }).ended();
    expect(ConnectError.from(error).code).toBe(Code.NotFound);

    // Another organisation's session does not validate with this organisation's gateway key.
    const otherSession = await signInWithMagicLink(server, other.secretKey);
    const validated = await connectCall(server, "/svc.v1.IdentityService/ValidateSession", { token: otherSession.token }, key);
    expect(validated.status).toBe(401);
  });

  test("missing, malformed and unknown gateway keys are 401", async () => {
    const unknown = `gw_${"A".repeat(43)}`;
    for (const bearer of [undefined, "gw_short", unknown]) {
      const response = await connectCall(server, "/svc.v1.ConfigService/GetConfig", { organizationId: org }, bearer);
      expect(response.status).toBe(401);
    }
    const error = await watch(unknown).ended();
    expect(ConnectError.from(error).code).toBe(Code.Unauthenticated);
  });

  test("RetrieveSecrets gives a gateway key only the secrets its configuration references, by name", async () => {
    const secrets = secretsApi(server, server.credentials.api_key);
    await secrets.put("UPSTREAM_TOKEN", "production", "s3cr3t-value");
    await secrets.put("OTHER", "production", "not for gateways");
    await secrets.put("UPSTREAM_TOKEN", "staging", "staging value");
    await applyOk(server, server.credentials.api_key, secretRouteDocument(), { strict: true });
    const key = await newGatewayKey();
    const client = createClientKeyPair(2048);
    const retrieve = (body: Record<string, unknown>) =>
      connectCall(
        server,
        "/svc.v1.SecretsService/RetrieveSecrets",
        { organizationId: org, publicKeyPem: client.publicKeyPem, ...body },
        key,
      );

    const ok = await retrieve({ environment: "production", names: ["UPSTREAM_TOKEN"] });
    expect(ok.status).toBe(200);
    const answer = (await ok.json()) as { encryptedSecrets: string; encryptedKey: string };
    const opened = openRetrieval(client.privateKey, { encrypted_secrets: answer.encryptedSecrets, encrypted_key: answer.encryptedKey });
    expect(opened.secrets.map((s) => [s.name, s.value])).toEqual([["UPSTREAM_TOKEN", "s3cr3t-value"]]);

    for (const body of [
      { environment: "production", names: ["OTHER"] },
      { environment: "production", names: ["UPSTREAM_TOKEN", "OTHER"] },
      { environment: "staging", names: ["UPSTREAM_TOKEN"] },
      { environment: "production", names: [] },
      { environment: "production", names: ["UPSTREAM_TOKEN"], tags: ["db"] },
    ]) {
      const refused = await errorOf(await retrieve(body));
      expect({ body, status: refused.status, reason: refused.reason }).toEqual({ body, status: 403, reason: "secret_not_referenced" });
      expect(refused.text).not.toContain("not for gateways");
    }
  });

  test("a revoked gateway key is 401 at once, and its stream ends with unauthenticated", async () => {
    const created = await admin.credentials.createGatewayKey({ organizationId: org, name: "to revoke" });
    const key = created.gatewayKey;
    // Warm the credential cache: a revocation must not wait for it to expire.
    expect((await connectCall(server, "/svc.v1.ConfigService/GetConfig", {}, key)).status).toBe(200);
    const stream = watch(key);
    expect((await stream.next()).event.case).toBe("snapshot");

    await admin.credentials.revokeGatewayKey(org, created.key.id);
    const ended = ConnectError.from(await stream.ended(5_000));
    expect(ended.code).toBe(Code.Unauthenticated);

    const after = await errorOf(await connectCall(server, "/svc.v1.ConfigService/GetConfig", {}, key));
    expect({ status: after.status, reason: after.reason }).toEqual({ status: 401, reason: "credential_revoked" });
    // Revoking it again changes nothing and is no error.
    await admin.credentials.revokeGatewayKey(org, created.key.id);
    expect((await admin.credentials.listGatewayKeys(org)).map((k) => k.id)).not.toContain(created.key.id);
    const all = await admin.credentials.listGatewayKeys(org, { includeRevoked: true });
    expect(all.find((k) => k.id === created.key.id)?.revokedAt).toBeInstanceOf(Date);
  });

  test("connected gateways are listed with their id, revision and last seen, and marked disconnected when they leave", async () => {
    const key = await newGatewayKey();
    await applyOk(server, server.credentials.api_key, "version: 1\ndomains:\n  - name: listed.example.com\n");
    const stream = watch(key, { gatewayId: "edge-listed.example:1" });
    const snapshot = await stream.next();
    const revision = snapshot.event.case === "snapshot" ? snapshot.event.value.revision : -1;
    const listed = (await admin.credentials.listConnectedGateways(org)).find((g) => g.gatewayId === "edge-listed.example:1");
    expect(listed).toMatchObject({ revision, connected: true });
    expect(listed?.lastSeenAt).toBeInstanceOf(Date);

    stream.close();
    const deadline = Date.now() + 5_000;
    let gone = false;
    while (!gone && Date.now() < deadline) {
      gone = !(await admin.credentials.listConnectedGateways(org)).find((g) => g.gatewayId === "edge-listed.example:1")?.connected;
      if (!gone) await new Promise((r) => setTimeout(r, 50));
    }
    expect(gone).toBe(true);
  });

  test("a gateway id outside its pattern is invalid_argument", async () => {
    const key = await newGatewayKey();
    for (const gatewayId of ["", "-edge", "edge/1", "x".repeat(129)]) {
      const error = ConnectError.from(await watch(key, { gatewayId }).ended());
      expect(error.code).toBe(Code.InvalidArgument);
    }
  });
});

describe("consumer keys", () => {
  test("a consumer key is ck_ and 43 base64url characters with an id, shown once, stored as its SHA-256, and listed", async () => {
    const created = await admin.credentials.createConsumerKey({ organizationId: org, name: "partner acme" });
    expect(created.consumerKey).toMatch(/^ck_[A-Za-z0-9_-]{43}$/);
    expect(created.consumer.id).toMatch(/^[0-9a-f-]{36}$/);
    const listed = await admin.credentials.listConsumerKeys(org);
    expect(listed.find((c) => c.id === created.consumer.id)).toMatchObject({
      name: "partner acme",
      prefix: created.consumerKey.slice(0, 9),
    });
    expect(JSON.stringify(listed)).not.toContain(created.consumerKey);
    const row = await server.app.database.client.consumerKey.findUnique({ where: { id: created.consumer.id } });
    expect(row?.hash).toBe(hashToken(created.consumerKey));
  });

  test("revoked consumer keys leave the list (kept with includeRevoked); revoking twice is no error; unknown ids are not_found", async () => {
    const created = await admin.credentials.createConsumerKey({ organizationId: org, name: "short lived" });
    await admin.credentials.revokeConsumerKey(org, created.consumer.id);
    await admin.credentials.revokeConsumerKey(org, created.consumer.id);
    expect((await admin.credentials.listConsumerKeys(org)).map((c) => c.id)).not.toContain(created.consumer.id);
    const all = await admin.credentials.listConsumerKeys(org, { includeRevoked: true });
    expect(all.find((c) => c.id === created.consumer.id)?.revokedAt).toBeInstanceOf(Date);

    await expect(admin.credentials.revokeConsumerKey(org, "00000000-0000-4000-8000-000000000000")).rejects.toMatchObject({
      kind: "not_found",
      reason: "consumer_not_found",
    });
    await expect(admin.credentials.revokeConsumerKey(org, "nope")).rejects.toMatchObject({ kind: "invalid_argument" });
    // Another organisation's consumer is not found here.
    const other = await createOtherOrganization(server);
    const theirs = await admin.credentials.createConsumerKey({ organizationId: other.organizationId, name: "theirs" });
    await expect(admin.credentials.revokeConsumerKey(org, theirs.consumer.id)).rejects.toMatchObject({ kind: "not_found" });
    expect((await admin.credentials.listConsumerKeys(org)).map((c) => c.id)).not.toContain(theirs.consumer.id);
  });

  test("a consumer key is no platform credential: 401 on the API", async () => {
    const created = await admin.credentials.createConsumerKey({ organizationId: org, name: "not for the api" });
    const response = await connectCall(server, "/svc.v1.ConfigService/GetConfig", { organizationId: org }, created.consumerKey);
    expect(response.status).toBe(401);
  });

  test("names are validated and an unknown organisation is not_found", async () => {
    await expect(admin.credentials.createConsumerKey({ organizationId: org, name: "" })).rejects.toMatchObject({
      kind: "invalid_argument",
    });
    await expect(admin.credentials.listConsumerKeys("00000000-0000-4000-8000-000000000000")).rejects.toMatchObject({ kind: "not_found" });
  });
});

describe("WatchGateway", () => {
  test("the snapshot carries the organisation, issuer, audience, revision and YAML, JWKS, revocations, consumers and referenced secrets", async () => {
    const secrets = secretsApi(server, server.credentials.api_key);
    await secrets.put("UPSTREAM_TOKEN", "production", "v-snapshot");
    const applied = await applyOk(server, server.credentials.api_key, secretRouteDocument(), { strict: true });
    const consumer = await admin.credentials.createConsumerKey({ organizationId: org, name: "snap" });
    const session = await signInWithMagicLink(server);
    await connectCall(server, "/svc.v1.IdentityService/RevokeSession", { sessionId: session.sessionId }, server.credentials.secret_key);
    const key = await newGatewayKey();

    const first = await watch(key).next();
    if (first.event.case !== "snapshot") throw new Error("expected a snapshot");
    const s = first.event.value;
    expect(s).toMatchObject({ organizationId: org, issuer: server.app.config.publicUrl, audience: org, revision: applied.revision });
    expect(s.yaml).toContain(`\${secret:production/UPSTREAM_TOKEN}`);
    expect(s.signingKeys.length).toBeGreaterThan(0);
    expect(s.signingKeys[0]).toMatchObject({ kty: "EC", crv: "P-256", alg: "ES256" });
    expect(s.revokedSessions.map((r) => r.sessionId)).toContain(session.sessionId);
    expect(s.consumers).toContainEqual(
      expect.objectContaining({ consumerId: consumer.consumer.id, keySha256: hashToken(consumer.consumerKey) }),
    );
    const version = (await secrets.list("production")).find((x) => x.name === "UPSTREAM_TOKEN")?.version;
    expect(s.secrets).toEqual([expect.objectContaining({ environment: "production", name: "UPSTREAM_TOKEN", version })]);
    expect(JSON.stringify(first, (_k, v) => (typeof v === "bigint" ? String(v) : v))).not.toContain("v-snapshot");

    // Resume: the same revision again carries no YAML; an older one does.
    const again = await watch(key, { sinceRevision: applied.revision }).next();
    expect(again.event.case === "snapshot" && again.event.value.yaml).toBeUndefined();
    const older = await watch(key, { sinceRevision: applied.revision - 1 }).next();
    expect(older.event.case === "snapshot" && older.event.value.yaml).toContain("with-secret");
  });

  test("each change follows on the stream: configuration, consumers created and revoked, sessions revoked, secrets updated", async () => {
    const secrets = secretsApi(server, server.credentials.api_key);
    await secrets.put("UPSTREAM_TOKEN", "production", "v-before");
    await applyOk(server, server.credentials.api_key, secretRouteDocument(), { strict: true });
    const key = await newGatewayKey();
    const stream = watch(key);
    expect((await stream.next()).event.case).toBe("snapshot");

    const applied = await applyOk(server, server.credentials.api_key, "version: 1\ndomains:\n  - name: next.example.com\n");
    const config = await stream.next();
    expect(config.event.case).toBe("config");
    if (config.event.case === "config") {
      expect(config.event.value.revision).toBe(applied.revision);
      expect(config.event.value.yaml).toContain("next.example.com");
      expect(config.event.value.secrets.map((x) => x.name)).toEqual(["UPSTREAM_TOKEN"]);
    }

    const consumer = await admin.credentials.createConsumerKey({ organizationId: org, name: "live" });
    expect(await stream.next()).toMatchObject({
      event: { case: "consumerCreated", value: { consumerId: consumer.consumer.id, keySha256: hashToken(consumer.consumerKey) } },
    });
    await admin.credentials.revokeConsumerKey(org, consumer.consumer.id);
    expect(await stream.next()).toMatchObject({ event: { case: "consumerRevoked", value: { consumerId: consumer.consumer.id } } });

    const session = await signInWithMagicLink(server);
    await connectCall(server, "/svc.v1.IdentityService/RevokeSession", { sessionId: session.sessionId }, server.credentials.secret_key);
    expect(await stream.next()).toMatchObject({
      event: { case: "sessionsRevoked", value: { sessions: [expect.objectContaining({ sessionId: session.sessionId })] } },
    });

    const put = await secrets.put("UPSTREAM_TOKEN", "production", "v-after");
    expect(await stream.next()).toMatchObject({
      event: { case: "secretChanged", value: { environment: "production", name: "UPSTREAM_TOKEN", version: put.version } },
    });
    // A secret the configuration does not reference changes nothing on the stream.
    await secrets.put("UNRELATED", "production", "x");
    await applyOk(server, server.credentials.api_key, "version: 1\ndomains:\n  - name: marker.example.com\n");
    expect((await stream.next()).event.case).toBe("config");
  });
});
