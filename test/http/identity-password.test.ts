import { hash as argon2Hash } from "@node-rs/argon2";
import {
  callIdentity,
  decodeJwt,
  enablePasswords,
  goodPassword,
  newIdentifier,
  postRest,
  reasonOf,
  setIdentitySettings,
  type JsonAnswer,
  type SessionJson,
} from "../support/identity-client.js";
import { createOtherOrganization } from "../support/credentials.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * docs/identity.md, "Passwords" and "Password reset": register, login and reset on the
 * /identity/... paths and the /v1/identity/... alternate paths.
 */
let server: TestServer;
let pk: string;
let sk: string;

beforeAll(async () => {
  server = await startTestServer();
  pk = server.credentials.publishable_key;
  sk = server.credentials.secret_key;
  await enablePasswords(server);
});
afterAll(() => server.close());

type SignedInJson = { identity_id: string; session: SessionJson };

function expectSignedIn(answer: JsonAnswer<SignedInJson>) {
  expect({ status: answer.status, body: answer.body }).toMatchObject({ status: 200 });
  expect(answer.body.identity_id).toMatch(/^[0-9a-f-]{36}$/);
  expect(answer.body.session.token.split(".")).toHaveLength(3);
  expect(answer.body.session.expires_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
  return answer.body;
}

const register = (identifier: string, password = goodPassword) =>
  postRest<SignedInJson>(server, "/identity/register/password", { identifier, password }, pk);
const login = (identifier: string, password = goodPassword) =>
  postRest<SignedInJson>(server, "/identity/login/password", { identifier, password }, pk);
const validate = (token: string) => callIdentity(server, "ValidateSession", { token }, sk);

describe("register and login on /identity/...", () => {
  test("a registered identity signs in with its password and gets a session of its own", async () => {
    const identifier = newIdentifier();
    const registered = expectSignedIn(await register(identifier));
    const signedIn = expectSignedIn(await login(identifier));
    expect(signedIn.identity_id).toBe(registered.identity_id);
    expect(decodeJwt(signedIn.session.token).payload.sid).not.toBe(decodeJwt(registered.session.token).payload.sid);
    expect((await validate(signedIn.session.token)).body).toMatchObject({ identityId: registered.identity_id });
  });

  test("the Connect RPCs answer the same, in the protobuf JSON mapping", async () => {
    const identifier = newIdentifier();
    const registered = await callIdentity<{ identityId: string; session: { token: string; expiresAt: string } }>(
      server,
      "RegisterPassword",
      { identifier, password: goodPassword },
      pk,
    );
    expect(registered.status).toBe(200);
    expect(registered.body.session.expiresAt).toMatch(/Z$/);
    const signedIn = await callIdentity<{ identityId: string }>(server, "LoginPassword", { identifier, password: goodPassword }, pk);
    expect(signedIn.body.identityId).toBe(registered.body.identityId);
  });

  test("identifiers are trimmed, NFKC-normalised and lower-cased when they are e-mail addresses", async () => {
    const local = `mixed${Math.random().toString(36).slice(2, 8)}`;
    // Fullwidth letters become ASCII under NFKC.
    const fancy = `  ${local.toUpperCase().replace("M", "Ｍ")}@ExAmple.COM \t`;
    const registered = expectSignedIn(await register(fancy));
    expect(expectSignedIn(await login(`${local}@example.com`)).identity_id).toBe(registered.identity_id);
    expect((await register(`${local}@EXAMPLE.com`)).status).toBe(409);
    const stored = await server.app.database.client.identity.findFirst({ where: { id: registered.identity_id } });
    expect(stored?.identifier).toBe(`${local}@example.com`);
  });

  test("identifiers that are not e-mail addresses keep their case", async () => {
    const name = `Alice_${Math.random().toString(36).slice(2, 8)}`;
    const registered = expectSignedIn(await register(` ${name} `));
    expect((await login(name.toLowerCase())).status).toBe(401);
    expect(expectSignedIn(await login(name)).identity_id).toBe(registered.identity_id);
  });

  test("registering an identifier that exists is 409 already_exists", async () => {
    const identifier = newIdentifier();
    expectSignedIn(await register(identifier));
    const again = await register(identifier, "another fine passphrase");
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ code: "already_exists" });
    expect(reasonOf(again)).toBe("identity_exists");
  });

  test("an identifier is unique under concurrency: of simultaneous registrations one wins, the rest are 409", async () => {
    const identifier = newIdentifier("race");
    const answers = await Promise.all(Array.from({ length: 6 }, () => register(identifier)));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409, 409, 409, 409, 409]);
    expect(await server.app.database.client.identity.count({ where: { identifier } })).toBe(1);
  });

  test("the same identifier in two organisations is two identities", async () => {
    const other = await createOtherOrganization(server);
    await enablePasswords(server, other.organizationId);
    const identifier = newIdentifier();
    const here = expectSignedIn(await register(identifier));
    const there = expectSignedIn(
      await postRest<SignedInJson>(server, "/identity/register/password", { identifier, password: goodPassword }, other.publishableKey),
    );
    expect(there.identity_id).not.toBe(here.identity_id);
    // A password of one organisation does not sign in to the other.
    expect(
      (await postRest(server, "/identity/login/password", { identifier, password: "not the password" }, other.publishableKey)).status,
    ).toBe(401);
  });
});

describe("password rules", () => {
  test.each([
    ["seven characters", "a1b2c3d", /at least 8/],
    ["129 characters", "x".repeat(129), /at most 128/],
    ["a common password", "password1", /too common/],
    ["a common password in other case", "PassWord123", /too common/],
    ["a common password of 8 digits", "12345678", /too common/],
  ])("%s is refused with 400 and nothing is stored", async (_name, password, message) => {
    const identifier = newIdentifier();
    const answer = await register(identifier, password);
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ code: "invalid_argument" });
    expect(String((answer.body as unknown as { message: string }).message)).toMatch(message);
    expect(answer.text).not.toContain(password);
    expect(await server.app.database.client.identity.count({ where: { identifier } })).toBe(0);
  });

  test("8 and 128 characters are accepted, counted as characters", async () => {
    expectSignedIn(await register(newIdentifier(), "zq7#Lk2!"));
    expectSignedIn(await register(newIdentifier(), "ü".repeat(64) + "ß".repeat(64)));
  });

  test("every violation is listed with its field", async () => {
    const answer = await register("   ", "short");
    expect(answer.status).toBe(400);
    const violations = (answer.body as unknown as { details: { debug: { violations: { field: string }[] } }[] }).details[0]?.debug
      .violations;
    expect(violations?.map((v) => v.field).sort()).toEqual(["identifier", "password"]);
  });

  test("passwords are stored as argon2id with OWASP's parameters (19 MiB, 2 iterations, 1 lane), never in clear", async () => {
    const identifier = newIdentifier();
    const { identity_id } = expectSignedIn(await register(identifier));
    const row = await server.app.database.client.passwordCredential.findFirst({ where: { identityId: identity_id } });
    expect(row?.hash).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    expect(row?.hash).not.toContain(goodPassword);
  });

  test("a hash made with older parameters is upgraded at the next successful login", async () => {
    const identifier = newIdentifier();
    const { identity_id } = expectSignedIn(await register(identifier));
    const weak = await argon2Hash(goodPassword, { algorithm: 2, memoryCost: 4096, timeCost: 1, parallelism: 1 } as never);
    await server.app.database.client.passwordCredential.update({ where: { identityId: identity_id }, data: { hash: weak } });
    expectSignedIn(await login(identifier));
    const row = await server.app.database.client.passwordCredential.findFirst({ where: { identityId: identity_id } });
    expect(row?.hash).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    expectSignedIn(await login(identifier));
  });
});

describe("wrong password and unknown identifier", () => {
  test("give the same 401 with the same body", async () => {
    const identifier = newIdentifier();
    expectSignedIn(await register(identifier));
    const wrong = await login(identifier, "not the password at all");
    const unknown = await login(newIdentifier("nobody"), "not the password at all");
    expect(wrong.status).toBe(401);
    expect(unknown.status).toBe(401);
    expect(wrong.text).toBe(unknown.text);
    expect(reasonOf(wrong)).toBe("invalid_credentials");
  });

  test("take about the same time: over 40 interleaved pairs the median ratio of their times is within 30% of 1", async () => {
    const time = async (who: string) => {
      const started = process.hrtime.bigint();
      const answer = await login(who, "not the password at all");
      expect(answer.status).toBe(401);
      return Number(process.hrtime.bigint() - started) / 1e6;
    };
    // Each pair is timed back to back, first one then the other in turn, so both members of a pair
    // see the same moment of a busy machine; the median of the pairs' ratios ignores the pairs a
    // burst of other work landed on. Skipping the hash for an unknown identifier (about 22 ms of
    // argon2id against a few milliseconds) would put the ratio far outside the margin in every round;
    // noise does not repeat, so a round that misses it is followed by another, up to three.
    const medianRatioOfPairs = async () => {
      // Eight identities tried five times each keep the lockout (the sixth failure) out of the way.
      const known = Array.from({ length: 8 }, () => newIdentifier("known"));
      for (const identifier of known) expectSignedIn(await register(identifier));
      const ratios: number[] = [];
      for (let i = 0; i < 40; i++) {
        const wrongFirst = i % 2 === 0;
        const first = await time(wrongFirst ? (known[i % known.length] as string) : newIdentifier("unknown"));
        const second = await time(wrongFirst ? newIdentifier("unknown") : (known[i % known.length] as string));
        ratios.push(wrongFirst ? first / second : second / first);
      }
      return [...ratios].sort((a, b) => a - b)[Math.floor(ratios.length / 2)] as number;
    };
    const within = (ratio: number) => ratio > 1 / 1.3 && ratio < 1.3;
    const rounds: number[] = [];
    do rounds.push(await medianRatioOfPairs());
    while (!within(rounds.at(-1) as number) && rounds.length < 3);
    if (process.env.SHOW_TIMINGS)
      console.log(`wrong password / unknown identifier: median ratios of 40 pairs ${rounds.map((r) => r.toFixed(3))}`);
    const closest = rounds.reduce((a, b) => (Math.abs(Math.log(a)) <= Math.abs(Math.log(b)) ? a : b));
    expect(closest).toBeGreaterThan(1 / 1.3);
    expect(closest).toBeLessThan(1.3);
  }, 300_000);
});

describe("password authentication disabled (the default)", () => {
  let fresh: Awaited<ReturnType<typeof createOtherOrganization>>;
  beforeAll(async () => {
    fresh = await createOtherOrganization(server);
  });

  test.each([
    ["/identity/register/password", { identifier: "off@example.com", password: goodPassword }],
    ["/identity/login/password", { identifier: "off@example.com", password: goodPassword }],
    ["/identity/reset/password", { identity_id: "00000000-0000-4000-8000-000000000000", new_password: goodPassword, session_token: "x" }],
    ["/v1/identity/register", { email: "off@example.com", password: goodPassword }],
    ["/v1/identity/login", { username: "off@example.com", password: goodPassword }],
    ["/v1/identity/reset-password", { token: "x".repeat(43), new_password: goodPassword }],
  ])("%s answers 403 and stores nothing", async (path, body) => {
    const answer = await postRest(server, path, body, fresh.publishableKey);
    expect(answer.status).toBe(403);
    expect(answer.body).toMatchObject({ code: "permission_denied" });
    expect(reasonOf(answer)).toBe("password_auth_disabled");
    const db = server.app.database.client;
    const where = { organizationId: fresh.organizationId };
    expect(
      await Promise.all([
        db.identity.count({ where }),
        db.passwordCredential.count({ where }),
        db.identitySession.count({ where }),
        db.loginFailure.count({ where }),
        db.oneTimeToken.count({ where }),
      ]),
    ).toEqual([0, 0, 0, 0, 0]);
  });

  test("RequestPasswordReset with the secret key answers 403 too", async () => {
    const answer = await postRest(server, "/v1/identity/reset-password", { identifier: "off@example.com" }, fresh.secretKey);
    expect(answer.status).toBe(403);
    expect(reasonOf(answer)).toBe("password_auth_disabled");
  });

  test("turning it on takes effect at once, on the running server", async () => {
    await setIdentitySettings(server, { password: true }, fresh.organizationId);
    expectSignedIn(
      await postRest<SignedInJson>(
        server,
        "/identity/register/password",
        { identifier: newIdentifier(), password: goodPassword },
        fresh.publishableKey,
      ),
    );
    await setIdentitySettings(server, { password: false }, fresh.organizationId);
    expect(
      (await postRest(server, "/identity/login/password", { identifier: "x@example.com", password: goodPassword }, fresh.publishableKey))
        .status,
    ).toBe(403);
  });
});

describe("the /v1 alternate paths", () => {
  test("/v1/identity/register {email, password} and /v1/identity/login {username, password} are the same flows", async () => {
    const email = newIdentifier("v1");
    const registered = expectSignedIn(await postRest<SignedInJson>(server, "/v1/identity/register", { email, password: goodPassword }, pk));
    const signedIn = expectSignedIn(
      await postRest<SignedInJson>(server, "/v1/identity/login", { username: email, password: goodPassword }, pk),
    );
    expect(signedIn.identity_id).toBe(registered.identity_id);
    expectSignedIn(await login(email));
    expect((await postRest(server, "/v1/identity/register", { email, password: goodPassword }, pk)).status).toBe(409);
  });

  test("violations name the field the client sent", async () => {
    const answer = await postRest(server, "/v1/identity/register", { email: " ", password: goodPassword }, pk);
    expect(answer.status).toBe(400);
    expect(answer.text).toContain('"field":"email"');
    const loginAnswer = await postRest(server, "/v1/identity/login", { username: "", password: "" }, pk);
    expect(loginAnswer.text).toContain('"field":"username"');
  });

  test("/v1/identity/reset-password: the backend requests a token with {identifier}, the user spends it with {token, new_password}", async () => {
    const email = newIdentifier("reset");
    const { identity_id, session } = expectSignedIn(
      await postRest<SignedInJson>(server, "/v1/identity/register", { email, password: goodPassword }, pk),
    );
    const requested = await postRest<{ token: string; expires_at: string }>(
      server,
      "/v1/identity/reset-password",
      { identifier: email },
      sk,
    );
    expect(requested.status).toBe(200);
    expect(requested.body.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Date.parse(requested.body.expires_at) - Date.now()).toBeGreaterThan(14 * 60_000);
    // Only the token's hash is stored.
    expect(JSON.stringify(await server.app.database.client.oneTimeToken.findMany())).not.toContain(requested.body.token);

    const completed = await postRest(
      server,
      "/v1/identity/reset-password",
      { token: requested.body.token, new_password: "a brand new passphrase" },
      pk,
    );
    expect(completed.status).toBe(200);
    expect(completed.body).toEqual({ identity_id });
    expect((await login(email)).status).toBe(401);
    expectSignedIn(await login(email, "a brand new passphrase"));
    // The reset revoked the sessions the identity had.
    expect((await validate(session.token)).status).toBe(401);

    const again = await postRest(
      server,
      "/v1/identity/reset-password",
      { token: requested.body.token, new_password: "yet another passphrase" },
      pk,
    );
    expect(again.status).toBe(400);
    expect(reasonOf(again)).toBe("reset_token_spent");
    const unknown = await postRest(
      server,
      "/v1/identity/reset-password",
      { token: "A".repeat(43), new_password: "yet another passphrase" },
      pk,
    );
    expect(unknown.status).toBe(404);
    expect(reasonOf(unknown)).toBe("reset_token_not_found");
  });

  test("a weak new password does not spend the token", async () => {
    const email = newIdentifier("weak");
    expectSignedIn(await register(email));
    const { body } = await postRest<{ token: string }>(server, "/v1/identity/reset-password", { identifier: email }, sk);
    expect((await postRest(server, "/v1/identity/reset-password", { token: body.token, new_password: "password" }, pk)).status).toBe(400);
    expect(
      (await postRest(server, "/v1/identity/reset-password", { token: body.token, new_password: "a strong new passphrase" }, pk)).status,
    ).toBe(200);
  });

  test("requesting a token needs the secret key, and an existing identifier", async () => {
    const denied = await postRest(server, "/v1/identity/reset-password", { identifier: "a@example.com" }, pk);
    expect(denied.status).toBe(403);
    expect(reasonOf(denied)).toBe("wrong_credential_kind");
    const unknown = await postRest(server, "/v1/identity/reset-password", { identifier: newIdentifier("nobody") }, sk);
    expect(unknown.status).toBe(404);
    expect(reasonOf(unknown)).toBe("identity_not_found");
  });
});

describe("reset on /identity/reset/password", () => {
  test("with a publishable key and a fresh session of that identity: new password set, other sessions revoked, this one kept", async () => {
    const identifier = newIdentifier();
    const first = expectSignedIn(await register(identifier));
    const second = expectSignedIn(await login(identifier));
    const answer = await postRest(
      server,
      "/identity/reset/password",
      { identity_id: first.identity_id, new_password: "fresh passphrase here", session_token: second.session.token },
      pk,
    );
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ identity_id: first.identity_id });
    expect((await validate(first.session.token)).status).toBe(401);
    expect((await validate(second.session.token)).status).toBe(200);
    expect((await login(identifier)).status).toBe(401);
    expectSignedIn(await login(identifier, "fresh passphrase here"));
  });

  test("with a publishable key and no session, a revoked one, or another identity's: 403 and nothing changes", async () => {
    const identifier = newIdentifier();
    const mine = expectSignedIn(await register(identifier));
    const theirs = expectSignedIn(await register(newIdentifier()));
    const revoked = expectSignedIn(await login(identifier));
    expect((await callIdentity(server, "RevokeSession", { sessionId: decodeJwt(revoked.session.token).payload.sid }, sk)).status).toBe(200);
    for (const session_token of ["", "not-a-jwt", theirs.session.token, revoked.session.token]) {
      const answer = await postRest(
        server,
        "/identity/reset/password",
        { identity_id: mine.identity_id, new_password: "fresh passphrase here", session_token },
        pk,
      );
      expect(answer.status).toBe(403);
      expect(reasonOf(answer)).toBe("fresh_session_required");
    }
    expectSignedIn(await login(identifier));
  });

  test("with the secret key no session is needed, and every session is revoked", async () => {
    const identifier = newIdentifier();
    const { identity_id, session } = expectSignedIn(await register(identifier));
    const answer = await postRest(server, "/identity/reset/password", { identity_id, new_password: "backend chose this one" }, sk);
    expect(answer.status).toBe(200);
    expect((await validate(session.token)).status).toBe(401);
    expectSignedIn(await login(identifier, "backend chose this one"));
    const unknown = await postRest(
      server,
      "/identity/reset/password",
      { identity_id: "00000000-0000-4000-8000-000000000000", new_password: "backend chose this one" },
      sk,
    );
    expect(unknown.status).toBe(404);
  });
});

describe("credentials of each password endpoint", () => {
  test.each([
    ["RegisterPassword", { identifier: "a@example.com", password: goodPassword }],
    ["LoginPassword", { identifier: "a@example.com", password: goodPassword }],
  ])("%s takes only the publishable key", async (method, body) => {
    for (const [bearer, status] of [
      [undefined, 401],
      [`pk_${"A".repeat(43)}`, 401],
      [sk, 403],
      [server.credentials.api_key, 403],
    ] as const) {
      const answer = await postRest(server, `/svc.v1.IdentityService/${method}`, body, bearer);
      expect({ bearer: bearer?.slice(0, 3), status: answer.status }).toEqual({ bearer: bearer?.slice(0, 3), status });
    }
  });

  test("ResetPassword and CompletePasswordReset take the publishable or the secret key, nothing else", async () => {
    for (const method of ["ResetPassword", "CompletePasswordReset"]) {
      expect((await postRest(server, `/svc.v1.IdentityService/${method}`, {}, server.credentials.api_key)).status).toBe(403);
      expect((await postRest(server, `/svc.v1.IdentityService/${method}`, {})).status).toBe(401);
    }
  });
});
