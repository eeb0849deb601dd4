import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hashToken } from "../../src/crypto/tokens.js";
import { cacheFileIn } from "../../src/gateway/cache-file.js";
import type { GatewayState } from "../../src/gateway/gateway-state.js";
import { gatewayChanges } from "../../src/domain/changes/topics.js";
import { createChangeFeed, type ChangeFeed } from "../../src/storage/change-feed.js";
import { createIdentityStore } from "../../src/storage/identity-store.js";
import { applyOk } from "../support/config-documents.js";
import { connectCall } from "../support/credentials.js";
import { testProvider } from "../support/database.js";
import {
  gatewayAdmin,
  muteGatewayHangUps,
  secretRouteDocument,
  signInWithMagicLink,
  startFollower,
  type RecordedFollower,
} from "../support/gateway-control.js";
import { enablePasswords, goodPassword, newIdentifier, postRest } from "../support/identity-client.js";
import { secretsApi } from "../support/secrets-client.js";
import { createManualClock, startTestServer, type TestServer } from "../support/server.js";
import { freePort } from "../support/free-port.js";

/**
 * The follower (src/gateway/follower.ts) against real control planes over
 * real HTTP: the sequence of GatewayStates it hands the data plane, failover,
 * cold start from its cache file, and two instances on one database.
 */
let server: TestServer;
let admin: ReturnType<typeof gatewayAdmin>;
let org: string;
let gatewayKey: string;
let secrets: ReturnType<typeof secretsApi>;
let cacheDir: string;
/** A change feed of the test's own on the server's database, as a writer outside the announcing functions uses it. */
let feed: ChangeFeed;
const followers: RecordedFollower[] = [];
const extraServers: TestServer[] = [];

beforeAll(async () => {
  muteGatewayHangUps();
  server = await startTestServer();
  admin = gatewayAdmin(server);
  org = server.credentials.organization_id;
  gatewayKey = (await admin.credentials.createGatewayKey({ organizationId: org, name: "follower tests" })).gatewayKey;
  secrets = secretsApi(server, server.credentials.api_key);
  await secrets.put("UPSTREAM_TOKEN", "production", "first-secret-value");
  await applyOk(server, server.credentials.api_key, secretRouteDocument(), { strict: true });
  cacheDir = mkdtempSync(join(tmpdir(), "gatehouse-gateway-cache-"));
  feed = createChangeFeed({ database: server.app.database, config: server.app.config.database });
});
afterEach(async () => {
  await Promise.all(followers.splice(0).map((f) => f.close()));
  await Promise.all(extraServers.splice(0).map((s) => s.close()));
});
afterAll(async () => {
  await feed.close();
  await admin.close();
  await server.close();
  rmSync(cacheDir, { recursive: true, force: true });
});

async function follow(options: Partial<Parameters<typeof startFollower>[0]> = {}): Promise<RecordedFollower> {
  const follower = await startFollower({ urls: [server.url], gatewayKey, gatewayId: "edge-test", ...options });
  followers.push(follower);
  return follower;
}

const routeNames = (state: GatewayState) => state.document.routes.map((r) => r.name);

describe("the states the follower hands the data plane", () => {
  test("the first state has the organisation, issuer, audience, the validated document, the JWKS and the referenced secret's value", async () => {
    const f = await follow();
    const state = await f.waitFor((s) => s.secrets.size > 0, 10_000, "a first state with its secret");
    expect(state).toMatchObject({ organizationId: org, issuer: server.app.config.publicUrl, audience: org });
    expect(routeNames(state)).toEqual(["with-secret"]);
    // Only this organisation's keys (none signed anything yet) and the legacy shared ones.
    const own = new Set((await (await server.call("/.well-known/jwks.json")).json()).keys.map((k: { kid: string }) => k.kid));
    for (const key of state.jwks.keys) expect(own.has(key.kid)).toBe(true);
    expect(state.secrets.get("production/UPSTREAM_TOKEN")).toBe(
      (await secrets.retrieve("production")).secrets.find((s) => s.name === "UPSTREAM_TOKEN")?.value,
    );
    expect(f.follower.status()).toMatchObject({ ready: true, connected: true, source: "control_plane", url: server.url, refused: false });
    expect(Object.isFrozen(state)).toBe(true);
  });

  test("a configuration change: a new state with the new revision and document", async () => {
    const f = await follow();
    const first = await f.waitFor(() => true);
    const plan = await applyOk(
      server,
      server.credentials.api_key,
      "version: 1\nroutes:\n  - name: added\n    path: /added\n    upstream: http://127.0.0.1:9002\n",
    );
    const next = await f.waitFor((s) => s.revision === plan.revision);
    expect(routeNames(next).sort()).toEqual(["added", "with-secret"]);
    // Each state is its own value: the earlier one is unchanged.
    expect(routeNames(first)).not.toContain("added");
  });

  test("a session revocation (RevokeSession, a password reset, the identity store directly): its sid is revoked in the next state", async () => {
    const f = await follow();
    await f.waitFor(() => true);
    const session = await signInWithMagicLink(server);
    await connectCall(server, "/svc.v1.IdentityService/RevokeSession", { sessionId: session.sessionId }, server.credentials.secret_key);
    await f.waitFor((s) => s.revokedSessions.has(session.sessionId), 5_000, "the revoked session");

    // A password reset revokes the identity's other sessions.
    await enablePasswords(server);
    const identifier = newIdentifier("reset");
    const registered = await postRest<{ identity_id: string; session: { token: string } }>(
      server,
      "/identity/register/password",
      { identifier, password: goodPassword },
      server.credentials.publishable_key,
    );
    const other = await postRest<{ session: { token: string } }>(
      server,
      "/identity/login/password",
      { identifier, password: goodPassword },
      server.credentials.publishable_key,
    );
    const otherSid = (JSON.parse(Buffer.from(other.body.session.token.split(".")[1] as string, "base64url").toString()) as { sid: string })
      .sid;
    const reset = await postRest(
      server,
      "/identity/reset/password",
      { identity_id: registered.body.identity_id, new_password: `${goodPassword} again`, session_token: registered.body.session.token },
      server.credentials.publishable_key,
    );
    expect(reset.status).toBe(200);
    await f.waitFor((s) => s.revokedSessions.has(otherSid), 5_000, "the session the reset revoked");

    // Revoking every session of an identity straight through the store (as the dashboard does):
    // PostgreSQL announces it by itself (a trigger); elsewhere the writer announces it.
    const third = await signInWithMagicLink(server);
    await createIdentityStore(server.app.database.client).revokeSessionsOf(org, third.identityId, null, new Date());
    if (testProvider !== "postgresql") await feed.announce(gatewayChanges, { organizationId: org, kind: "sessions" });
    await f.waitFor((s) => s.revokedSessions.has(third.sessionId), 5_000, "the session revoked in the store");
  });

  test("consumer keys: a created key's hash appears, a revoked one disappears", async () => {
    const f = await follow();
    await f.waitFor(() => true);
    const created = await admin.credentials.createConsumerKey({ organizationId: org, name: "partner" });
    const hash = hashToken(created.consumerKey);
    const withKey = await f.waitFor((s) => s.consumers.has(hash));
    expect(withKey.consumers.get(hash)).toEqual({ id: created.consumer.id, name: "partner" });
    await admin.credentials.revokeConsumerKey(org, created.consumer.id);
    await f.waitFor((s) => !s.consumers.has(hash), 5_000, "the consumer gone");
  });

  test("a secret update: the next state carries the new value", async () => {
    const f = await follow();
    await f.waitFor((s) => s.secrets.size > 0);
    await secrets.put("UPSTREAM_TOKEN", "production", "rotated-secret-value");
    await f.waitFor((s) => s.secrets.get("production/UPSTREAM_TOKEN") === "rotated-secret-value", 5_000, "the rotated secret");

    // A value with line breaks is held as it is (a certificate's PEM has them); the request-headers plugin that would put
    // it in a header refuses it, and its routes answer 503 (test/gateway/gateway-plugins.test.ts).
    await secrets.put("UPSTREAM_TOKEN", "production", "bad\r\nx-injected: 1");
    await f.waitFor((s) => s.secrets.get("production/UPSTREAM_TOKEN") === "bad\r\nx-injected: 1", 5_000, "the value with line breaks");
    await secrets.put("UPSTREAM_TOKEN", "production", "good-again");
    await f.waitFor((s) => s.secrets.get("production/UPSTREAM_TOKEN") === "good-again", 5_000, "the secret usable again");
  });

  test("its own key revoked: the follower keeps the last state and reports the refusal", async () => {
    const created = await admin.credentials.createGatewayKey({ organizationId: org, name: "revoked follower" });
    const f = await follow({ gatewayKey: created.gatewayKey });
    const last = await f.waitFor(() => true);
    await admin.credentials.revokeGatewayKey(org, created.key.id);
    const deadline = Date.now() + 5_000;
    while (!f.follower.status().refused && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(f.follower.status()).toMatchObject({ refused: true, connected: false, ready: true });
    expect(f.follower.state()).toBe(last);
  });
});

describe("the cache file", () => {
  test("holds the last good state without any secret value, mode 0600; a cold start serves from it, secrets missing, until a control plane answers", async () => {
    await secrets.put("UPSTREAM_TOKEN", "production", "cold-start-secret-value");
    const warm = await follow({ cacheFile: { directory: cacheDir } });
    const served = await warm.waitFor((s) => s.secrets.get("production/UPSTREAM_TOKEN") === "cold-start-secret-value");
    await warm.close();
    const file = cacheFileIn(cacheDir, org);
    const bytes = readFileSync(file);
    expect(bytes.includes(Buffer.from("cold-start-secret-value"))).toBe(false);
    expect(bytes.includes(Buffer.from("first-secret-value"))).toBe(false);
    expect(bytes.includes(Buffer.from(gatewayKey))).toBe(false);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const cached = JSON.parse(bytes.toString()) as { revision: number; secrets: unknown[]; yaml: string };
    expect(cached.revision).toBe(served.revision);
    expect(cached.secrets).toEqual([expect.objectContaining({ environment: "production", name: "UPSTREAM_TOKEN" })]);

    // Cold start: nothing answers at that address.
    const port = await freePort();
    const cold = await follow({ urls: [`http://127.0.0.1:${port}`], cacheFile: { directory: cacheDir } });
    const fromCache = await cold.waitFor(() => true);
    expect(fromCache.revision).toBe(served.revision);
    expect(routeNames(fromCache)).toEqual(routeNames(served));
    expect(fromCache.secrets.size).toBe(0);
    expect(cold.follower.status()).toMatchObject({
      ready: true,
      source: "cache",
      connected: false,
      unresolvedSecrets: ["production/UPSTREAM_TOKEN"],
    });

    // A control plane comes up there: the follower resumes from the cached revision and resolves the secret.
    const started = performance.now();
    const second = await startTestServer({ db: server.db, env: { PORT: String(port) } });
    extraServers.push(second);
    const listening = performance.now();
    const resolved = await cold.waitForTimed((s) => s.secrets.get("production/UPSTREAM_TOKEN") === "cold-start-secret-value", 10_000);
    expect(cold.follower.status()).toMatchObject({ source: "control_plane", connected: true, unresolvedSecrets: [] });
    console.log(
      `cold start: a control plane listening ${Math.round(listening - started)} ms after its start was followed, secret resolved, ${Math.round(resolved.at - listening)} ms later`,
    );
  });

  test("an unreadable cache file is ignored; a file written with another gateway key is not used", async () => {
    const garbage = join(cacheDir, "garbage.json");
    writeFileSync(garbage, "{not json", { mode: 0o600 });
    const broken = await follow({ urls: [`http://127.0.0.1:${await freePort()}`], cacheFile: garbage });
    await new Promise((r) => setTimeout(r, 200));
    expect(broken.follower.status().ready).toBe(false);

    const otherKey = (await admin.credentials.createGatewayKey({ organizationId: org, name: "other" })).gatewayKey;
    const port = await freePort();
    const f = await follow({ urls: [`http://127.0.0.1:${port}`], gatewayKey: otherKey, cacheFile: { directory: cacheDir } });
    await new Promise((r) => setTimeout(r, 300));
    expect(f.follower.status().ready).toBe(false);
    expect(f.states).toHaveLength(0);
  });
});

describe("failover", () => {
  test("follows the first control plane that answers, in the order given", async () => {
    const deadPort = await freePort();
    const second = await startTestServer({ db: server.db });
    extraServers.push(second);
    const f = await follow({ urls: [`http://127.0.0.1:${deadPort}`, second.url, server.url] });
    await f.waitFor(() => true);
    expect(f.follower.status().url).toBe(second.url);
    const plan = await applyOk(server, server.credentials.api_key, "version: 1\ndomains:\n  - name: failover.example.com\n");
    const after = await f.waitFor((s) => s.revision === plan.revision, 5_000, "the change through the second control plane");
    expect(after.document.domains.map((d) => d.name)).toContain("failover.example.com");
  });

  test("a refused key is reported and not failed over: every instance would refuse it", async () => {
    const f = await follow({ gatewayKey: `gw_${"B".repeat(43)}` });
    const deadline = Date.now() + 5_000;
    while (!f.follower.status().refused && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(f.follower.status()).toMatchObject({ refused: true, ready: false, connected: false });
  });
});

describe("two control-plane instances on one database", () => {
  test("followers attached to different instances both see a session revocation and a secret update", async () => {
    const second = await startTestServer({ db: server.db });
    extraServers.push(second);
    const one = await follow({ gatewayId: "edge-one" });
    const two = await follow({ urls: [second.url], gatewayId: "edge-two" });
    await Promise.all([one.waitFor((s) => s.secrets.size > 0), two.waitFor((s) => s.secrets.size > 0)]);
    expect(two.follower.status().url).toBe(second.url);

    const latencies: Record<string, number[]> = { revocation: [], secret: [] };
    for (let round = 0; round < 5; round++) {
      const session = await signInWithMagicLink(server);
      const revoked = (s: GatewayState) => s.revokedSessions.has(session.sessionId);
      const waiting = [one.waitForTimed(revoked, 5_000), two.waitForTimed(revoked, 5_000)];
      const sent = performance.now();
      const response = await connectCall(
        server,
        "/svc.v1.IdentityService/RevokeSession",
        { sessionId: session.sessionId },
        server.credentials.secret_key,
      );
      expect(response.status).toBe(200);
      for (const seen of await Promise.all(waiting)) latencies.revocation?.push(seen.at - sent);

      const value = `value-${round}-${Math.random().toString(36).slice(2, 8)}`;
      const updated = (s: GatewayState) => s.secrets.get("production/UPSTREAM_TOKEN") === value;
      const waitingSecret = [one.waitForTimed(updated, 5_000), two.waitForTimed(updated, 5_000)];
      // Written through the second instance this time.
      const writing = performance.now();
      await secretsApi(second, server.credentials.api_key, org).put("UPSTREAM_TOKEN", "production", value);
      for (const seen of await Promise.all(waitingSecret)) latencies.secret?.push(seen.at - writing);
    }
    const show = (xs: number[]) => `median ${median(xs).toFixed(1)} ms, max ${Math.max(...xs).toFixed(1)} ms over ${xs.length}`;
    console.log(
      `${testProvider}: from sending the write to the follower's new state (both followers, 5 rounds): session revocation ${show(latencies.revocation ?? [])}; secret update ${show(latencies.secret ?? [])}`,
    );
  });
});

describe("signing keys", () => {
  test("a rotated signing key reaches the follower's JWKS", async () => {
    const time = createManualClock(new Date());
    const rotating = await startTestServer({ clock: time.clock });
    extraServers.push(rotating);
    const key = (
      await gatewayAdmin(rotating).credentials.createGatewayKey({ organizationId: rotating.credentials.organization_id, name: "rotation" })
    ).gatewayKey;
    const f = await startFollower({ urls: [rotating.url], gatewayKey: key, gatewayId: "edge-rotation", now: () => time.clock().getTime() });
    followers.push(f);
    await signInWithMagicLink(rotating);
    const before = await f.waitFor((s) => s.jwks.keys.length > 0);
    const kids = new Set(before.jwks.keys.map((k) => k.kid));

    // Thirty days on, the next sign-in signs with a new key.
    time.advance(31 * 24 * 3600 * 1000);
    const session = await signInWithMagicLink(rotating);
    const header = JSON.parse(Buffer.from(session.token.split(".")[0] as string, "base64url").toString()) as { kid: string };
    expect(kids.has(header.kid)).toBe(false);
    const after = await f.waitFor((s) => s.jwks.keys.some((k) => k.kid === header.kid), 5_000, "the new signing key");
    // The old key stays published while its tokens may live.
    expect(after.jwks.keys.map((k) => k.kid)).toEqual(expect.arrayContaining([...kids]));
  });
});

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}
