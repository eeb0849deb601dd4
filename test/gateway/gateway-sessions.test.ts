import { SignJWT, generateKeyPair } from "jose";
import { twinOf } from "../support/session-tokens.js";
import type { JsonWebKeyLike } from "../../src/gateway/gateway-state.js";
import { createOtherOrganization } from "../support/credentials.js";
import {
  callIdentity,
  decodeJwt,
  enablePasswords,
  goodPassword,
  newIdentifier,
  postRest,
  type SessionJson,
} from "../support/identity-client.js";
import { startTestServer, type TestServer } from "../support/server.js";
import {
  echoOf,
  reasonOf,
  send,
  startEchoUpstream,
  startTestGateway,
  stateFromYaml,
  type EchoUpstream,
  type TestGateway,
} from "../support/gateway.js";

/**
 * docs/gateway.md, "The data plane: how the gateway enforces it", session-auth: a session token of this
 * organisation, issued by a real control plane, verified at the gateway
 * against the JWKS (ES256, iss, aud, exp, not revoked); 401 with
 * WWW-Authenticate: Bearer; required: false; forward_identity_header.
 */
let server: TestServer;
let upstream: EchoUpstream;
let gw: TestGateway;
let jwks: { keys: JsonWebKeyLike[] };
/** The gateway's clock (epoch ms), moved by hand. */
let now = Date.now();
const revoked = new Map<string, number>();

type SignedIn = { identity_id: string; session: SessionJson };

async function signUp(publishableKey = server.credentials.publishable_key): Promise<SignedIn> {
  const answer = await postRest<SignedIn>(
    server,
    "/identity/register/password",
    { identifier: newIdentifier(), password: goodPassword },
    publishableKey,
  );
  expect(answer.status).toBe(200);
  return answer.body;
}

const yaml = () => `version: 1
plugins:
  - name: session
    type: session-auth
    config: {forward_identity_header: x-identity-id}
  - name: session-optional
    type: session-auth
    config: {required: false, forward_identity_header: x-identity-id}
routes:
  - name: private
    path: /private/*
    upstream: ${upstream.url}
    plugins: [session]
  - name: optional
    path: /optional/*
    upstream: ${upstream.url}
    plugins: [session-optional]
`;

const state = (revision = 1) =>
  stateFromYaml(yaml(), {
    revision,
    issuer: server.app.config.publicUrl,
    organizationId: server.credentials.organization_id,
    audience: server.credentials.organization_id,
    jwks,
    revokedSessions: new Map(revoked),
  });

beforeAll(async () => {
  server = await startTestServer();
  await enablePasswords(server);
  upstream = await startEchoUpstream();
  // Keys exist once a first session was signed.
  await signUp();
  jwks = (await (await server.call("/.well-known/jwks.json")).json()) as { keys: JsonWebKeyLike[] };
  gw = await startTestGateway({ clock: () => now }, state());
});
afterAll(async () => {
  await gw.close();
  await upstream.close();
  await server.close();
});

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

describe("a valid session", () => {
  test("passes, and the identity id goes upstream in forward_identity_header", async () => {
    const { identity_id, session } = await signUp();
    const echo = echoOf(await send(gw.url, { path: "/private/x", headers: bearer(session.token) }));
    expect(echo.headers["x-identity-id"]).toBe(identity_id);
    // The token itself travels on: the upstream may check it again.
    expect(echo.headers.authorization).toBe(`Bearer ${session.token}`);
    // The second time comes from the cache, with the same outcome.
    expect(echoOf(await send(gw.url, { path: "/private/x", headers: bearer(session.token) })).headers["x-identity-id"]).toBe(identity_id);
  });

  test("a client-sent identity header never reaches the upstream", async () => {
    const { identity_id, session } = await signUp();
    const echo = echoOf(await send(gw.url, { path: "/private/x", headers: { ...bearer(session.token), "x-identity-id": "someone-else" } }));
    expect(echo.headers["x-identity-id"]).toBe(identity_id);
    const anonymous = echoOf(await send(gw.url, { path: "/optional/x", headers: { "x-identity-id": "someone-else" } }));
    expect(anonymous.headers["x-identity-id"]).toBeUndefined();
  });
});

describe("refusals", () => {
  test("no token is 401 with WWW-Authenticate: Bearer and the Connect error body", async () => {
    for (const headers of [{}, { authorization: "Basic dXNlcjpwYXNz" }, { authorization: "Bearer " }] as Record<string, string>[]) {
      const answer = await send(gw.url, { path: "/private/x", headers });
      expect(answer.status).toBe(401);
      expect(answer.headers["www-authenticate"]).toBe("Bearer");
      expect(answer.json.code).toBe("unauthenticated");
      expect(reasonOf(answer)).toBe("session_missing");
    }
  });

  test("a tampered, foreign, wrongly signed or malformed token is 401 invalid_token and never echoed", async () => {
    const { session } = await signUp();
    const [head, payload, signature] = session.token.split(".") as [string, string, string];
    const claims = decodeJwt(session.token).payload;
    const forged = Buffer.from(JSON.stringify({ ...claims, sub: "admin" })).toString("base64url");
    const other = await createOtherOrganization(server);
    await enablePasswords(server, other.organizationId);
    const foreign = (await signUp(other.publishableKey)).session.token;
    const { privateKey } = await generateKeyPair("ES256");
    const ownKey = await new SignJWT({ ...claims })
      .setProtectedHeader({ alg: "ES256", kid: decodeJwt(session.token).header.kid as string })
      .sign(privateKey);
    const hs256 = await new SignJWT({ ...claims }).setProtectedHeader({ alg: "HS256" }).sign(new Uint8Array(32));
    const unsigned = `${Buffer.from('{"alg":"none"}').toString("base64url")}.${payload}.`;
    for (const token of [`${head}.${forged}.${signature}`, foreign, ownKey, hs256, unsigned, "not.a.jwt", "garbage"]) {
      const answer = await send(gw.url, { path: "/private/x", headers: bearer(token) });
      expect(answer.status).toBe(401);
      expect(answer.headers["www-authenticate"]).toBe('Bearer error="invalid_token"');
      expect(reasonOf(answer)).toBe("session_invalid");
      expect(answer.text).not.toContain(token);
    }
  });

  test("one token, one encoding: the high-s twin of a genuine token is refused, the token itself passes", async () => {
    const { session } = await signUp();
    const twin = twinOf(session.token);
    expect(twin).not.toBe(session.token);
    expect((await send(gw.url, { path: "/private/x", headers: bearer(session.token) })).status).toBe(200);
    const answer = await send(gw.url, { path: "/private/x", headers: bearer(twin) });
    expect(answer.status).toBe(401);
    expect(reasonOf(answer)).toBe("session_invalid");
  });

  test("a token of the wrong issuer is refused", async () => {
    const gw2 = await startTestGateway({ clock: () => now }, { ...state(), issuer: "https://elsewhere.example.com" });
    try {
      const { session } = await signUp();
      expect((await send(gw2.url, { path: "/private/x", headers: bearer(session.token) })).status).toBe(401);
    } finally {
      await gw2.close();
    }
  });

  test("required: false lets requests without a token through, but an invalid token is still 401", async () => {
    const echo = echoOf(await send(gw.url, { path: "/optional/x" }));
    expect(echo.headers["x-identity-id"]).toBeUndefined();
    expect((await send(gw.url, { path: "/optional/x", headers: bearer("not.a.jwt") })).status).toBe(401);
    const { identity_id, session } = await signUp();
    expect(echoOf(await send(gw.url, { path: "/optional/x", headers: bearer(session.token) })).headers["x-identity-id"]).toBe(identity_id);
  });
});

describe("expiry and revocation", () => {
  test("a token past its exp is refused, even after it was verified and kept", async () => {
    const { session } = await signUp();
    expect((await send(gw.url, { path: "/private/x", headers: bearer(session.token) })).status).toBe(200);
    const exp = decodeJwt(session.token).payload.exp as number;
    const saved = now;
    try {
      now = exp * 1000 + 60_000;
      const answer = await send(gw.url, { path: "/private/x", headers: bearer(session.token) });
      expect(answer.status).toBe(401);
      expect(reasonOf(answer)).toBe("session_invalid");
    } finally {
      now = saved;
    }
  });

  test("a session revoked on the control plane is refused from the state that lists it on, cached or not", async () => {
    const { session } = await signUp();
    const sid = decodeJwt(session.token).payload.sid as string;
    expect((await send(gw.url, { path: "/private/x", headers: bearer(session.token) })).status).toBe(200);
    const revokedAnswer = await callIdentity(server, "RevokeSession", { sessionId: sid }, server.credentials.secret_key);
    expect(revokedAnswer.status).toBe(200);
    // The follower learns of the revocation and hands over a new state.
    revoked.set(sid, (decodeJwt(session.token).payload.exp as number) * 1000);
    gw.gateway.apply(state(1));
    const answer = await send(gw.url, { path: "/private/x", headers: bearer(session.token) });
    expect(answer.status).toBe(401);
    expect(answer.headers["www-authenticate"]).toBe('Bearer error="invalid_token"');
    // Other sessions are unaffected.
    const { session: other } = await signUp();
    expect((await send(gw.url, { path: "/private/x", headers: bearer(other.token) })).status).toBe(200);
  });

  test("a key set without the signing key refuses every token", async () => {
    const gw2 = await startTestGateway({ clock: () => now }, { ...state(), jwks: { keys: [] } });
    try {
      const { session } = await signUp();
      expect((await send(gw2.url, { path: "/private/x", headers: bearer(session.token) })).status).toBe(401);
      // The keys arrive: the same token passes.
      gw2.gateway.apply(state());
      expect((await send(gw2.url, { path: "/private/x", headers: bearer(session.token) })).status).toBe(200);
    } finally {
      await gw2.close();
    }
  });
});
