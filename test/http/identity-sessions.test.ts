import { createPrivateKey } from "node:crypto";
import { createLocalJWKSet, createRemoteJWKSet, jwtVerify, type JSONWebKeySet } from "jose";
import { createOtherOrganization } from "../support/credentials.js";
import {
  callIdentity,
  decodeJwt,
  enablePasswords,
  goodPassword,
  newIdentifier,
  postRest,
  reasonOf,
  type SessionJson,
} from "../support/identity-client.js";
import { createManualClock, startTestServer, type TestServer } from "../support/server.js";

/**
 * docs/identity.md, "Sessions": ES256 JWTs with iss, aud, sub, sid,
 * iat, exp and a kid header, verifiable by any JWT library against
 * /.well-known/jwks.json; ValidateSession and RevokeSession.
 */
type SignedInJson = { identity_id: string; session: SessionJson };

async function signUp(server: TestServer, publishableKey = server.credentials.publishable_key) {
  const answer = await postRest<SignedInJson>(
    server,
    "/identity/register/password",
    { identifier: newIdentifier(), password: goodPassword },
    publishableKey,
  );
  expect(answer.status).toBe(200);
  return answer.body;
}

async function jwks(server: TestServer): Promise<JSONWebKeySet> {
  const response = await server.call("/.well-known/jwks.json");
  expect(response.status).toBe(200);
  return (await response.json()) as JSONWebKeySet;
}

describe("with the system clock", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
    await enablePasswords(server);
  });
  afterAll(() => server.close());

  const validate = (token: string, sk = server.credentials.secret_key) => callIdentity(server, "ValidateSession", { token }, sk);

  test("a session token verifies with jose against the published JWKS, with the documented claims", async () => {
    const { identity_id, session } = await signUp(server);
    const keySet = createRemoteJWKSet(new URL(`${server.url}/.well-known/jwks.json`));
    const { payload, protectedHeader } = await jwtVerify(session.token, keySet, {
      issuer: server.app.config.publicUrl,
      audience: server.credentials.organization_id,
      algorithms: ["ES256"],
    });
    expect(protectedHeader).toMatchObject({ alg: "ES256", typ: "JWT" });
    expect(protectedHeader.kid).toEqual(expect.any(String));
    expect(payload.sub).toBe(identity_id);
    expect(payload.sid).toMatch(/^[0-9a-f-]{36}$/);
    expect(payload.exp! - payload.iat!).toBe(3600);
    expect(new Date(payload.exp! * 1000).toISOString()).toBe(new Date(session.expires_at!).toISOString());
  });

  test("the JWKS holds public EC P-256 keys only, served as JSON", async () => {
    const response = await server.call("/.well-known/jwks.json");
    expect(response.headers.get("content-type")).toBe("application/json");
    const { keys } = (await response.json()) as JSONWebKeySet;
    expect(keys.length).toBeGreaterThanOrEqual(1);
    for (const key of keys) {
      expect(key).toMatchObject({ kty: "EC", crv: "P-256", alg: "ES256", use: "sig" });
      expect(key).not.toHaveProperty("d");
    }
  });

  test("signing keys are stored encrypted under the master key", async () => {
    await signUp(server);
    const rows = await server.app.database.client.sessionSigningKey.findMany();
    expect(rows.length).toBeGreaterThanOrEqual(1);
    for (const row of rows) {
      expect(() => createPrivateKey({ key: Buffer.from(row.privateKeyEnc), format: "der", type: "pkcs8" })).toThrow();
      expect(JSON.parse(row.publicJwk)).not.toHaveProperty("d");
    }
  });

  test("ValidateSession answers identity, session and expiry; after RevokeSession it is unauthenticated", async () => {
    const { identity_id, session } = await signUp(server);
    const sid = decodeJwt(session.token).payload.sid;
    const valid = await validate(session.token);
    expect(valid.status).toBe(200);
    expect(valid.body).toEqual({ identityId: identity_id, sessionId: sid, expiresAt: expect.stringMatching(/Z$/) });

    expect((await callIdentity(server, "RevokeSession", { sessionId: sid }, server.credentials.secret_key)).status).toBe(200);
    const revoked = await validate(session.token);
    expect(revoked.status).toBe(401);
    expect(revoked.body).toMatchObject({ code: "unauthenticated" });
    expect(reasonOf(revoked)).toBe("session_revoked");
    // Revoking again is harmless; an unknown session is 404.
    expect((await callIdentity(server, "RevokeSession", { sessionId: sid }, server.credentials.secret_key)).status).toBe(200);
    const unknown = await callIdentity(
      server,
      "RevokeSession",
      { sessionId: "00000000-0000-4000-8000-000000000000" },
      server.credentials.secret_key,
    );
    expect(unknown.status).toBe(404);
  });

  test("tampered, foreign and malformed tokens are unauthenticated", async () => {
    const { session } = await signUp(server);
    const [header, payload, signature] = session.token.split(".") as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, "base64url").toString()) as Record<string, unknown>;
    const forged = `${header}.${Buffer.from(JSON.stringify({ ...claims, sub: "00000000-0000-4000-8000-000000000000" })).toString("base64url")}.${signature}`;
    const noneAlg = `${Buffer.from(JSON.stringify({ alg: "none", kid: "x" })).toString("base64url")}.${payload}.`;
    for (const token of [forged, noneAlg, "abc", `${header}.${payload}.${"A".repeat(86)}`]) {
      const answer = await validate(token);
      expect(answer.status).toBe(401);
      expect(reasonOf(answer)).toBe("session_invalid");
    }
    const empty = await validate("");
    expect(empty.status).toBe(400);
  });

  test("a session of one organisation does not validate with another organisation's secret key", async () => {
    const other = await createOtherOrganization(server);
    const { session } = await signUp(server);
    const answer = await validate(session.token, other.secretKey);
    expect(answer.status).toBe(401);
    const sid = decodeJwt(session.token).payload.sid;
    expect((await callIdentity(server, "RevokeSession", { sessionId: sid }, other.secretKey)).status).toBe(404);
    expect((await validate(session.token)).status).toBe(200);
  });

  test("ValidateSession and RevokeSession take only the secret key", async () => {
    const { session } = await signUp(server);
    expect((await validate(session.token, server.credentials.publishable_key)).status).toBe(403);
    expect((await callIdentity(server, "RevokeSession", { sessionId: "x" }, server.credentials.publishable_key)).status).toBe(403);
    expect((await callIdentity(server, "RevokeSession", { sessionId: "not-a-uuid" }, server.credentials.secret_key)).status).toBe(400);
  });
});

describe("with a manual clock", () => {
  const manual = createManualClock();
  let server: TestServer;
  const minute = 60_000;
  beforeAll(async () => {
    server = await startTestServer({ clock: manual.clock });
    await enablePasswords(server);
  });
  afterAll(() => server.close());

  const validate = (token: string) => callIdentity(server, "ValidateSession", { token }, server.credentials.secret_key);

  test("a session expires after the organisation's session lifetime", async () => {
    const { session } = await signUp(server);
    manual.advance(59 * minute);
    expect((await validate(session.token)).status).toBe(200);
    manual.advance(1 * minute);
    const expired = await validate(session.token);
    expect(expired.status).toBe(401);
    expect(reasonOf(expired)).toBe("session_expired");
  });

  test("the session lifetime follows the settings", async () => {
    await enablePasswords(server, undefined, { sessionTtlSeconds: 120 });
    const { session } = await signUp(server);
    const { payload } = decodeJwt(session.token);
    expect((payload.exp as number) - (payload.iat as number)).toBe(120);
    await enablePasswords(server, undefined, { sessionTtlSeconds: 3600 });
  });

  test("a reset with a publishable key accepts a session up to 15 minutes old, not older", async () => {
    const pk = server.credentials.publishable_key;
    const { identity_id, session } = await signUp(server);
    manual.advance(15 * minute);
    const fresh = await postRest(
      server,
      "/identity/reset/password",
      { identity_id, new_password: "first new passphrase", session_token: session.token },
      pk,
    );
    expect(fresh.status).toBe(200);
    manual.advance(1000);
    const stale = await postRest(
      server,
      "/identity/reset/password",
      { identity_id, new_password: "second new passphrase", session_token: session.token },
      pk,
    );
    expect(stale.status).toBe(403);
    expect(reasonOf(stale)).toBe("fresh_session_required");
  });

  test("key rotation: old tokens keep verifying and the old key stays published until they expire", async () => {
    const day = 24 * 60 * minute;
    await enablePasswords(server, undefined, { sessionTtlSeconds: 30 * 24 * 3600 });
    const before = await signUp(server);
    const oldKid = decodeJwt(before.session.token).header.kid;
    // The active key is replaced once it is 30 days old.
    manual.advance(31 * day);
    const after = await signUp(server);
    const newKid = decodeJwt(after.session.token).header.kid;
    expect(newKid).not.toBe(oldKid);

    // Both verify, with jose against the set as published now.
    const published = await jwks(server);
    expect(published.keys.map((k) => k.kid)).toEqual(expect.arrayContaining([oldKid, newKid]));
    const keySet = createLocalJWKSet(published);
    const options = { issuer: server.app.config.publicUrl, currentDate: manual.clock() };
    await expect(jwtVerify(after.session.token, keySet, options)).resolves.toBeDefined();
    // The first token was issued 31 days ago with a 30-day lifetime: expired by now.
    await expect(jwtVerify(before.session.token, keySet, options)).rejects.toThrow(/exp/);

    // A token signed by the old key just before rotation is still live and still verifies.
    manual.set(new Date(manual.clock().getTime() + 29 * day));
    const late = await signUp(server);
    expect(decodeJwt(late.session.token).header.kid).toBe(newKid);
    manual.advance(2 * day);
    const rotated = await signUp(server);
    const newestKid = decodeJwt(rotated.session.token).header.kid;
    expect(newestKid).not.toBe(newKid);
    const later = createLocalJWKSet(await jwks(server));
    await expect(jwtVerify(late.session.token, later, { ...options, currentDate: manual.clock() })).resolves.toBeDefined();
    expect((await validate(late.session.token)).status).toBe(200);
    expect((await jwks(server)).keys.map((k) => k.kid)).toEqual(expect.arrayContaining([newKid, newestKid]));

    // Once every token of the retired key has expired, it is no longer published.
    manual.advance(31 * day);
    const finalKids = (await jwks(server)).keys.map((k) => k.kid);
    expect(finalKids).not.toContain(newKid);
    expect(finalKids).not.toContain(oldKid);
    await enablePasswords(server, undefined, { sessionTtlSeconds: 3600 });
  });
});
