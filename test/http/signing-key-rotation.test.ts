import {
  addMember,
  cookieOf,
  dashboardRpc,
  ownerPassword,
  dashboardAuthRpc,
  setUpOwner,
  signIn,
  startDashboardServer,
  type DashboardTestServer,
} from "../support/dashboard-server.js";
import { runCli } from "../support/cli.js";
import { callIdentity, reasonOf } from "../support/identity-client.js";
import { createManualClock, startTestServer, type TestServer } from "../support/server.js";
import { claimsOf, kidOf, signInByMagicLink, verifyOutside } from "../support/session-tokens.js";

/**
 * Operators rotate an organisation's session signing key (the dashboard, for
 * admins, and `gatehouse signing-key rotate`): the new kid signs from then on,
 * the old key stays in /.well-known/jwks.json until the last token it signed
 * has expired, and no other organisation's key changes. An outside verifier
 * (python3 with `cryptography`) follows the JWKS throughout.
 */
interface KeyInfo {
  kid: string;
  createdAt: string;
  retiredAt?: string;
  publishedUntil?: string;
}

async function publishedKids(server: TestServer): Promise<string[]> {
  const response = await server.call("/.well-known/jwks.json");
  expect(response.status).toBe(200);
  return ((await response.json()) as { keys: { kid: string }[] }).keys.map((key) => key.kid);
}

async function plantStatus(server: TestServer, token: string): Promise<number> {
  const response = await fetch(`${server.sampleUrl}/plants`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "ivy", id: Math.floor(Math.random() * 1e15) + 1 }),
  });
  await response.arrayBuffer();
  return response.status;
}

const minute = 60_000;

describe("rotation from the dashboard, followed by an outside verifier", () => {
  const manual = createManualClock();
  let server: DashboardTestServer;
  let orgA: string;
  let orgB: { organizationId: string; secretKey: string };
  let ownerA: string;
  let ownerB: string;
  let memberA: string;
  let a1: string;
  let b1: string;
  let rotation: { key: KeyInfo; retired: KeyInfo[] };

  const rpc = async <T = Record<string, unknown>>(cookie: string, method: string, organizationId: string) => {
    const response = await dashboardRpc(server, method, { organizationId }, { cookie });
    return { status: response.status, body: (await response.json()) as T & { code?: string } };
  };
  const outside = (token: string, audience = orgA) => verifyOutside(server, token, { audience, now: manual.clock() });

  beforeAll(async () => {
    server = await startDashboardServer({ clock: manual.clock });
    orgA = server.credentials.organization_id;
    ownerA = await setUpOwner(server);
    const other = await server.app.tenancy.createOrganization("Second organisation");
    orgB = other;
    const setupB = new URLSearchParams(new URL(other.dashboardSetupUrl).hash.slice(1)).get("token") as string;
    ownerB = cookieOf(
      await dashboardAuthRpc(server, "SetUpAccount", {
        token: setupB,
        email: "boss@example.org",
        display_name: "Bo",
        password: ownerPassword,
      }),
    );
    memberA = (
      await addMember(server, ownerA, {
        organizationId: orgA,
        email: "mia@example.com",
        displayName: "Mia",
        password: "mia's good passphrase",
      })
    ).cookie;
  });
  afterAll(() => server.close());

  test("each organisation signs with a key of its own; the outside verifier finds each by kid and checks aud", async () => {
    a1 = await signInByMagicLink(server);
    b1 = await signInByMagicLink(server, orgB.secretKey);
    expect(kidOf(b1)).not.toBe(kidOf(a1));
    expect(await outside(a1)).toEqual({ ok: true, kid: kidOf(a1), sub: claimsOf(a1).sub });
    expect(await outside(b1, orgB.organizationId)).toMatchObject({ ok: true, kid: kidOf(b1) });
    expect(await outside(b1, orgA)).toMatchObject({ ok: false, error: "wrong aud" });
    const listed = await rpc<{ keys: KeyInfo[] }>(memberA, "ListSessionSigningKeys", orgA);
    expect(listed.status).toBe(200);
    expect(listed.body.keys).toEqual([{ kid: kidOf(a1), createdAt: expect.any(String) }]);
  });

  test("a member may list the keys but not rotate them (403); nor may another organisation's admin (404) or no session (401)", async () => {
    const refused = await rpc(memberA, "RotateSessionSigningKey", orgA);
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe("permission_denied");
    expect((await rpc(ownerB, "RotateSessionSigningKey", orgA)).status).toBe(404);
    expect((await dashboardRpc(server, "RotateSessionSigningKey", { organizationId: orgA })).status).toBe(401);
    expect(
      (await dashboardRpc(server, "RotateSessionSigningKey", { organizationId: orgA }, { bearer: server.credentials.api_key })).status,
    ).toBe(403);
    // Nothing changed: the same key signs and it is still the only one.
    expect(kidOf(await signInByMagicLink(server))).toBe(kidOf(a1));
    expect((await rpc<{ keys: KeyInfo[] }>(ownerA, "ListSessionSigningKeys", orgA)).body.keys).toHaveLength(1);
  });

  test("an admin's rotation: the new kid signs from then on, the old token verifies through the old key, the other organisation is untouched", async () => {
    const rotated = await rpc<typeof rotation>(ownerA, "RotateSessionSigningKey", orgA);
    expect(rotated.status).toBe(200);
    rotation = rotated.body;
    expect(rotation.key.kid).not.toBe(kidOf(a1));
    expect(rotation.key.retiredAt).toBeUndefined();
    expect(rotation.retired).toEqual([
      { kid: kidOf(a1), createdAt: expect.any(String), retiredAt: expect.any(String), publishedUntil: expect.any(String) },
    ]);
    // The old key is published at least until its last token (a1, one hour) has expired.
    expect(Date.parse(rotation.retired[0]?.publishedUntil ?? "")).toBeGreaterThanOrEqual((claimsOf(a1).exp as number) * 1000);

    const a2 = await signInByMagicLink(server);
    expect(kidOf(a2)).toBe(rotation.key.kid);
    expect(await outside(a2)).toMatchObject({ ok: true, kid: rotation.key.kid });
    expect(await outside(a1)).toMatchObject({ ok: true, kid: kidOf(a1) });
    expect(await publishedKids(server)).toEqual(expect.arrayContaining([kidOf(a1), rotation.key.kid, kidOf(b1)]));

    const sk = server.credentials.secret_key;
    expect((await callIdentity(server, "ValidateSession", { token: a1 }, sk)).status).toBe(200);
    expect((await callIdentity(server, "ValidateSession", { token: a2 }, sk)).status).toBe(200);
    expect(await plantStatus(server, a1)).toBe(200);
    expect(await plantStatus(server, a2)).toBe(200);

    expect(kidOf(await signInByMagicLink(server, orgB.secretKey))).toBe(kidOf(b1));
    const listed = await rpc<{ keys: KeyInfo[] }>(memberA, "ListSessionSigningKeys", orgA);
    expect(listed.body.keys.map((key) => [key.kid, key.retiredAt === undefined])).toEqual([
      [rotation.key.kid, true],
      [kidOf(a1), false],
    ]);
  });

  test("revocation still applies, whichever key signed the session", async () => {
    const sk = server.credentials.secret_key;
    const a3 = await signInByMagicLink(server);
    for (const token of [a1, a3]) {
      expect((await callIdentity(server, "RevokeSession", { sessionId: claimsOf(token).sid }, sk)).status).toBe(200);
      const revoked = await callIdentity(server, "ValidateSession", { token }, sk);
      expect({ status: revoked.status, reason: reasonOf(revoked) }).toEqual({ status: 401, reason: "session_revoked" });
      expect(await plantStatus(server, token)).toBe(401);
    }
  });

  test("another organisation's admin rotates theirs: only their kid changes", async () => {
    const rotated = await rpc<typeof rotation>(ownerB, "RotateSessionSigningKey", orgB.organizationId);
    expect(rotated.status).toBe(200);
    expect(rotated.body.retired.map((key) => key.kid)).toEqual([kidOf(b1)]);
    expect(kidOf(await signInByMagicLink(server, orgB.secretKey))).toBe(rotated.body.key.kid);
    expect(kidOf(await signInByMagicLink(server))).toBe(rotation.key.kid);
  });

  test("once the old key's last token has expired it leaves the JWKS, and the outside verifier no longer finds its kid", async () => {
    const retired = rotation.retired[0] as KeyInfo;
    // The old token has expired; its key is still published (its last token might be verified by a clock running behind).
    manual.set(new Date((claimsOf(a1).exp as number) * 1000 + 1000));
    expect(await outside(a1)).toMatchObject({ ok: false, error: "expired", kid: retired.kid });
    expect(await publishedKids(server)).toContain(retired.kid);

    manual.set(new Date(Date.parse(retired.publishedUntil ?? "") + 1000));
    const kids = await publishedKids(server);
    expect(kids).not.toContain(retired.kid);
    expect(kids).toContain(rotation.key.kid);
    expect(await outside(a1)).toMatchObject({ ok: false, error: "no key with this kid in the JWKS" });
    const fresh = await signInByMagicLink(server);
    expect(await outside(fresh)).toMatchObject({ ok: true, kid: rotation.key.kid });
    // The dashboard session idled out meanwhile; the list now holds the live key only.
    const again = await signIn(server, "owner@example.com", ownerPassword);
    expect((await rpc<{ keys: KeyInfo[] }>(again, "ListSessionSigningKeys", orgA)).body.keys.map((key) => key.kid)).toEqual([
      rotation.key.kid,
    ]);
  });

  test("concurrent rotations each answer a new kid; one of them signs and every one is published", async () => {
    const cookie = await signIn(server, "owner@example.com", ownerPassword);
    const answers = await Promise.all(Array.from({ length: 4 }, () => rpc<typeof rotation>(cookie, "RotateSessionSigningKey", orgA)));
    for (const answer of answers) expect(answer.status).toBe(200);
    const kids = answers.map((answer) => answer.body.key.kid);
    expect(new Set(kids).size).toBe(4);
    expect(await publishedKids(server)).toEqual(expect.arrayContaining(kids));
    const token = await signInByMagicLink(server);
    expect(kids).toContain(kidOf(token));
    expect(await outside(token)).toMatchObject({ ok: true });
    const live = await server.app.database.client.sessionSigningKey.count({ where: { organizationId: orgA, retiredAt: null } });
    expect(live).toBeGreaterThanOrEqual(1);
  });

  test("a new organisation's concurrent first sign-ins share the one key they create", async () => {
    const fresh = await server.app.tenancy.createOrganization("Third organisation");
    const tokens = await Promise.all(Array.from({ length: 6 }, () => signInByMagicLink(server, fresh.secretKey)));
    expect(new Set(tokens.map(kidOf)).size).toBe(1);
    expect(await server.app.database.client.sessionSigningKey.count({ where: { organizationId: fresh.organizationId } })).toBe(1);
  });
});

describe("rotation from the CLI, and across instances", () => {
  // The CLI runs on the system clock: the servers' manual clock starts there.
  const manual = createManualClock(new Date());
  let server: TestServer;
  let second: TestServer;
  let org: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    server = await startTestServer({ clock: manual.clock });
    second = await startTestServer({ clock: manual.clock, db: server.db });
    org = server.credentials.organization_id;
    env = { DATABASE_URL: server.db.url, GATEHOUSE_DATA_DIR: server.db.dataDir };
  });
  afterAll(async () => {
    await second.close();
    await server.close();
  });

  test("gatehouse signing-key rotate: both keys are published at once, and the server signs with the new kid from its next look", async () => {
    const before = await signInByMagicLink(server);
    const other = await server.app.tenancy.createOrganization("Untouched");
    const otherKid = kidOf(await signInByMagicLink(server, other.secretKey));

    const result = runCli(["signing-key", "rotate", "--org", org, "--json"], env);
    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
    const out = JSON.parse(result.stdout) as { organization_id: string; kid: string; retired: { kid: string; published_until: string }[] };
    expect(out).toMatchObject({ organization_id: org, retired: [{ kid: kidOf(before), published_until: expect.any(String) }] });
    expect(out.kid).not.toBe(kidOf(before));
    expect(await publishedKids(server)).toEqual(expect.arrayContaining([kidOf(before), out.kid, otherKid]));

    // Another process wrote it: its announcement (NOTIFY, or the notice file on SQLite) arrives a moment after the command
    // exits. The clock passes the minute after which the server reads the keys again anyway, so nothing here waits on it.
    manual.advance(minute + 1000);
    const after = await signInByMagicLink(server);
    expect(kidOf(after)).toBe(out.kid);
    expect(await verifyOutside(server, after, { audience: org, now: manual.clock() })).toMatchObject({ ok: true, kid: out.kid });
    expect(await verifyOutside(server, before, { audience: org, now: manual.clock() })).toMatchObject({ ok: true, kid: kidOf(before) });
    expect((await callIdentity(server, "ValidateSession", { token: before }, server.credentials.secret_key)).status).toBe(200);
    expect(kidOf(await signInByMagicLink(server, other.secretKey))).toBe(otherKid);
  });

  test("the CLI refuses an unknown organisation and a missing --org, and changes nothing", async () => {
    const kidsBefore = await publishedKids(server);
    const unknown = runCli(["signing-key", "rotate", "--org", "00000000-0000-4000-8000-000000000000"], env);
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toContain("does not exist");
    const missing = runCli(["signing-key", "rotate"], env);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain("--org");
    expect((await publishedKids(server)).sort()).toEqual(kidsBefore.sort());
  });

  test("a rotation on one instance reaches another sharing the database, without waiting for its minute", async () => {
    const before = kidOf(await signInByMagicLink(second, server.credentials.secret_key));
    const rotated = await server.app.tenancy.rotateSessionSigningKey(org);
    expect(rotated.key.kid).not.toBe(before);
    expect(kidOf(await signInByMagicLink(server))).toBe(rotated.key.kid);
    // The announcement travels through the change feed (NOTIFY on PostgreSQL): wait for it, boundedly.
    let kid = before;
    for (let attempt = 0; attempt < 100 && kid !== rotated.key.kid; attempt++) {
      kid = kidOf(await signInByMagicLink(second, server.credentials.secret_key));
      if (kid !== rotated.key.kid) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(kid).toBe(rotated.key.kid);
    // Tokens of either instance verify on the other.
    const fromSecond = await signInByMagicLink(second, server.credentials.secret_key);
    expect((await callIdentity(server, "ValidateSession", { token: fromSecond }, server.credentials.secret_key)).status).toBe(200);
  });
});
