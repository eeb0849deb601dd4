import { callIdentity, reasonOf } from "../support/identity-client.js";
import { createManualClock, startTestServer, type TestServer } from "../support/server.js";
import { claimsOf, createLegacySigningKey, kidOf, signInByMagicLink, twinOf, verifyOutside } from "../support/session-tokens.js";

/**
 * Stores from before per-organisation signing keys hold one shared key
 * (SigningKey) whose tokens are live when the new release starts. Those
 * tokens keep verifying until they expire; the shared key signs nothing more
 * and leaves the JWKS once the longest session lifetime has passed since it
 * retired.
 */
const manual = createManualClock();
const minute = 60_000;
const day = 24 * 60 * minute;
let server: TestServer;
let org: string;
let legacy: Awaited<ReturnType<typeof createLegacySigningKey>>;
let legacyToken: string;
let upgradedAt: Date;

beforeAll(async () => {
  server = await startTestServer({ clock: manual.clock });
  org = server.credentials.organization_id;
  // The store as the previous release left it: its shared key, active.
  legacy = await createLegacySigningKey(server, new Date(manual.clock().getTime() - 2 * day));
});
afterAll(() => server.close());

const validate = (token: string) => callIdentity(server, "ValidateSession", { token }, server.credentials.secret_key);

async function publishedKids(): Promise<string[]> {
  return ((await (await server.call("/.well-known/jwks.json")).json()) as { keys: { kid: string }[] }).keys.map((key) => key.kid);
}

async function plantStatus(token: string): Promise<number> {
  const response = await fetch(`${server.sampleUrl}/plants`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "moss", id: Math.floor(Math.random() * 1e15) + 1 }),
  });
  await response.arrayBuffer();
  return response.status;
}

test("a token the shared key signed before the upgrade keeps verifying, in the form of s it was issued with", async () => {
  upgradedAt = manual.clock();
  const genuine = await signInByMagicLink(server);
  // The previous release signed this session's claims with the shared key.
  legacyToken = legacy.sign(claimsOf(genuine));
  expect(kidOf(genuine)).not.toBe(legacy.kid);
  expect((await validate(legacyToken)).status).toBe(200);
  expect(await plantStatus(legacyToken)).toBe(200);
  // Either s may be the one it was issued with (nothing recorded which), so both stay valid until it expires.
  expect((await validate(twinOf(legacyToken))).status).toBe(200);
  expect(await publishedKids()).toEqual(expect.arrayContaining([legacy.kid, kidOf(genuine)]));
  expect(await verifyOutside(server, legacyToken, { audience: org, now: manual.clock() })).toMatchObject({ ok: true, kid: legacy.kid });
});

test("the shared key signs nothing any more: it was retired at the first look of the new release", async () => {
  const row = await server.app.database.client.signingKey.findUniqueOrThrow({ where: { id: legacy.kid } });
  expect(row.retiredAt?.getTime()).toBe(upgradedAt.getTime());
  for (let i = 0; i < 3; i++) expect(kidOf(await signInByMagicLink(server))).not.toBe(legacy.kid);
});

test("its tokens are still held to their organisation", async () => {
  const other = await server.app.tenancy.createOrganization("Elsewhere");
  const foreign = legacy.sign({ ...claimsOf(legacyToken), aud: other.organizationId });
  const answer = await validate(foreign);
  expect({ status: answer.status, reason: reasonOf(answer) }).toEqual({ status: 401, reason: "session_invalid" });
});

test("a shared key that an instance of the previous release makes during the upgrade is retired at the next look", async () => {
  manual.advance(2 * minute);
  const late = await createLegacySigningKey(server, manual.clock());
  await signInByMagicLink(server);
  const row = await server.app.database.client.signingKey.findUniqueOrThrow({ where: { id: late.kid } });
  expect(row.retiredAt?.getTime()).toBe(manual.clock().getTime());
});

test("its tokens expire like any session; the shared key leaves the JWKS once the longest session lifetime has passed", async () => {
  manual.set(new Date((claimsOf(legacyToken).exp as number) * 1000));
  const expired = await validate(legacyToken);
  expect({ status: expired.status, reason: reasonOf(expired) }).toEqual({ status: 401, reason: "session_expired" });
  manual.set(new Date(upgradedAt.getTime() + 30 * day));
  expect(await publishedKids()).toContain(legacy.kid);
  manual.set(new Date(upgradedAt.getTime() + 30 * day + 5 * minute + 1000));
  expect(await publishedKids()).not.toContain(legacy.kid);
  const invalid = await validate(legacyToken);
  expect(invalid.status).toBe(401);
});
