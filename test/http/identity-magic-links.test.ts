import { createOtherOrganization } from "../support/credentials.js";
import {
  callIdentity,
  enablePasswords,
  goodPassword,
  newIdentifier,
  postRest,
  reasonOf,
  setIdentitySettings,
  type JsonAnswer,
} from "../support/identity-client.js";
import { createManualClock, startTestServer, type TestServer } from "../support/server.js";

/**
 * docs/identity.md, "Magic links": GenerateMagicLink (secret key)
 * and VerifyMagicLink; one-time across instances; unknown, expired and spent
 * tokens answered distinctly.
 */
const manual = createManualClock();
let first: TestServer;
let second: TestServer;
let sk: string;

beforeAll(async () => {
  first = await startTestServer({ clock: manual.clock });
  // A second instance on the same database (and master key): what a scaled-out deployment is.
  second = await startTestServer({ clock: manual.clock, db: first.db });
  sk = first.credentials.secret_key;
  await setIdentitySettings(first, { ipLimitPerMinute: 100_000 });
});
afterAll(async () => {
  await second.close();
  await first.close();
});

type Generated = { token: string; expiresAt: string };
type Verified = { identityId: string; session: { token: string; expiresAt: string } };

const generate = (identifier: string, server = first, key = sk) =>
  callIdentity<Generated>(server, "GenerateMagicLink", { identifier }, key);
const verify = (token: string, server = first, key = sk) => callIdentity<Verified>(server, "VerifyMagicLink", { token }, key);

function expectError(answer: JsonAnswer, status: number, code: string, reason: string) {
  expect({ status: answer.status, code: (answer.body as { code?: string }).code, reason: reasonOf(answer) }).toEqual({
    status,
    code,
    reason,
  });
}

describe("generate and verify", () => {
  test("a token is 32 random bytes in base64url, lives 15 minutes, and signs its identity in once", async () => {
    const identifier = newIdentifier("magic");
    const generated = await generate(identifier);
    expect(generated.status).toBe(200);
    expect(generated.body.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(generated.body.token, "base64url")).toHaveLength(32);
    expect(Date.parse(generated.body.expiresAt) - manual.clock().getTime()).toBe(15 * 60_000);

    const verified = await verify(generated.body.token);
    expect(verified.status).toBe(200);
    expect(verified.body.identityId).toMatch(/^[0-9a-f-]{36}$/);
    const validated = await callIdentity(first, "ValidateSession", { token: verified.body.session.token }, sk);
    expect(validated.body).toMatchObject({ identityId: verified.body.identityId });
    const session = await first.app.database.client.identitySession.findFirst({ where: { identityId: verified.body.identityId } });
    expect(session?.method).toBe("magic_link");
  });

  test("GenerateMagicLink creates the identity when absent and reuses it when present", async () => {
    const identifier = newIdentifier("magic");
    const one = await verify((await generate(identifier)).body.token);
    const two = await verify((await generate(` ${identifier.toUpperCase()} `)).body.token);
    expect(two.body.identityId).toBe(one.body.identityId);
    expect(await first.app.database.client.identity.count({ where: { identifier } })).toBe(1);
  });

  test("a magic link signs in an identity registered with a password", async () => {
    await enablePasswords(first);
    const identifier = newIdentifier("both");
    const registered = await postRest<{ identity_id: string }>(
      first,
      "/identity/register/password",
      { identifier, password: goodPassword },
      first.credentials.publishable_key,
    );
    expect((await verify((await generate(identifier)).body.token)).body.identityId).toBe(registered.body.identity_id);
    await setIdentitySettings(first, { password: false });
  });

  test("only the token's hash is stored", async () => {
    const { token } = (await generate(newIdentifier())).body;
    const stored = JSON.stringify(await first.app.database.client.oneTimeToken.findMany());
    expect(stored).not.toContain(token);
  });

  test("VerifyMagicLink takes the publishable key too; GenerateMagicLink only the secret key", async () => {
    const { token } = (await generate(newIdentifier())).body;
    expect((await verify(token, first, first.credentials.publishable_key)).status).toBe(200);
    expectError(
      await generate(newIdentifier(), first, first.credentials.publishable_key),
      403,
      "permission_denied",
      "wrong_credential_kind",
    );
  });
});

describe("tokens that cannot be used", () => {
  test("an unknown token is not_found", async () => {
    expectError(await verify("A".repeat(43)), 404, "not_found", "magic_link_not_found");
    expectError(await verify("short"), 404, "not_found", "magic_link_not_found");
  });

  test("an empty token is invalid_argument", async () => {
    expect((await verify("")).status).toBe(400);
  });

  test("a spent token is failed_precondition magic_link_spent", async () => {
    const { token } = (await generate(newIdentifier())).body;
    expect((await verify(token)).status).toBe(200);
    expectError(await verify(token), 400, "failed_precondition", "magic_link_spent");
    expectError(await verify(token, second), 400, "failed_precondition", "magic_link_spent");
  });

  test("an expired token is failed_precondition magic_link_expired, from the moment it expires", async () => {
    const { token } = (await generate(newIdentifier())).body;
    manual.advance(15 * 60_000 - 1);
    const other = (await generate(newIdentifier())).body.token;
    manual.advance(1);
    expectError(await verify(token), 400, "failed_precondition", "magic_link_expired");
    expect((await verify(other)).status).toBe(200);
  });

  test("the lifetime follows the settings", async () => {
    await setIdentitySettings(first, { magicLinkTtlSeconds: 120 });
    const { token, expiresAt } = (await generate(newIdentifier())).body;
    expect(Date.parse(expiresAt) - manual.clock().getTime()).toBe(120_000);
    manual.advance(120_000);
    expectError(await verify(token), 400, "failed_precondition", "magic_link_expired");
    await setIdentitySettings(first, { magicLinkTtlSeconds: 900 });
  });

  test("a token of another organisation is not_found", async () => {
    const other = await createOtherOrganization(first);
    const { token } = (await generate(newIdentifier(), first, other.secretKey)).body;
    expectError(await verify(token), 404, "not_found", "magic_link_not_found");
    expect((await verify(token, first, other.secretKey)).status).toBe(200);
  });

  test("a password-reset token is not a magic link", async () => {
    await enablePasswords(first);
    const identifier = newIdentifier();
    await postRest(first, "/identity/register/password", { identifier, password: goodPassword }, first.credentials.publishable_key);
    const reset = await postRest<{ token: string }>(first, "/v1/identity/reset-password", { identifier }, sk);
    expectError(await verify(reset.body.token), 404, "not_found", "magic_link_not_found");
    await setIdentitySettings(first, { password: false });
  });
});

describe("one-time use across instances", () => {
  test("of 50 concurrent verifications of one token, spread over two instances, exactly one succeeds (20 rounds)", async () => {
    for (let round = 0; round < 20; round++) {
      const { token } = (await generate(newIdentifier(`race${round}`))).body;
      const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => verify(token, i % 2 === 0 ? first : second)));
      const statuses = answers.map((a) => a.status);
      expect({ round, ok: statuses.filter((s) => s === 200).length }).toEqual({ round, ok: 1 });
      for (const answer of answers) {
        if (answer.status !== 200) expectError(answer, 400, "failed_precondition", "magic_link_spent");
      }
      const winner = answers.find((a) => a.status === 200) as JsonAnswer<Verified>;
      expect(await first.app.database.client.identitySession.count({ where: { identityId: winner.body.identityId } })).toBe(1);
    }
  });
});

describe("limits and settings", () => {
  test("magic links per identifier and hour are limited: past the limit 429 with Retry-After, until the hour passes", async () => {
    await setIdentitySettings(first, { magicLinkLimitPerHour: 3 });
    manual.set(new Date((Math.floor(manual.clock().getTime() / 3_600_000) + 1) * 3_600_000 + 1000));
    const identifier = newIdentifier("limited");
    for (let i = 0; i < 3; i++) expect((await generate(identifier, i % 2 === 0 ? first : second)).status).toBe(200);
    const refused = await generate(identifier);
    expectError(refused, 429, "resource_exhausted", "magic_link_rate_limited");
    expect(Number(refused.headers.get("retry-after"))).toBe(3599);
    // Another identifier is not affected.
    expect((await generate(newIdentifier())).status).toBe(200);
    manual.advance(3600_000);
    expect((await generate(identifier)).status).toBe(200);
    await setIdentitySettings(first, { magicLinkLimitPerHour: 10 });
  });

  test("with magic links disabled both RPCs answer 403", async () => {
    const { token } = (await generate(newIdentifier())).body;
    await setIdentitySettings(first, { magicLinks: false });
    expectError(await generate(newIdentifier()), 403, "permission_denied", "magic_links_disabled");
    expectError(await verify(token), 403, "permission_denied", "magic_links_disabled");
    await setIdentitySettings(first, { magicLinks: true });
    expect((await verify(token)).status).toBe(200);
  });
});
