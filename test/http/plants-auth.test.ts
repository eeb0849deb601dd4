import { generateKeyPair, SignJWT } from "jose";
import { createApiKey } from "../support/credentials.js";
import { callIdentity, decodeJwt, newIdentifier, setIdentitySettings } from "../support/identity-client.js";
import { createManualClock, startTestServer, type TestServer } from "../support/server.js";

/**
 * docs/plants.md, "The sample plant API": `Authorization: Bearer <session token
 * issued by this platform>`, checked as ValidateSession checks it. Every
 * refusal is 401 with the Error body, and nothing is stored.
 */
const manual = createManualClock();
let server: TestServer;
let nextId = 1n;

type Answer = { status: number; headers: Headers; body: Record<string, unknown> };

async function signIn(): Promise<string> {
  const sk = server.credentials.secret_key;
  const generated = await callIdentity<{ token: string }>(server, "GenerateMagicLink", { identifier: newIdentifier("gardener") }, sk);
  const verified = await callIdentity<{ session: { token: string } }>(server, "VerifyMagicLink", { token: generated.body.token }, sk);
  expect(verified.status).toBe(200);
  return verified.body.session.token;
}

async function postPlant(authorization: string | undefined, json = `{"name": "guarded", "id": ${nextId++}}`): Promise<Answer> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (authorization !== undefined) headers.authorization = authorization;
  const response = await fetch(`${server.sampleUrl}/plants`, { method: "POST", headers, body: json });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown> };
}

async function expectUnauthenticated(answer: Answer, ...words: string[]) {
  expect(answer.status).toBe(401);
  expect(answer.headers.get("content-type")).toBe("application/json");
  expect(answer.body).toEqual({ error: 401, message: expect.any(String) });
  for (const word of words) expect(answer.body.message).toContain(word);
  expect(answer.headers.get("www-authenticate")).toMatch(/^Bearer realm="plants"/);
}

beforeAll(async () => {
  server = await startTestServer({ clock: manual.clock });
  await setIdentitySettings(server, { ipLimitPerMinute: 100_000 });
});
afterAll(() => server.close());

afterEach(async () => {
  // No refused request ever leaves a plant behind.
  const refused = await server.app.database.client.plant.count({ where: { name: "refused" } });
  expect(refused).toBe(0);
});

describe("a valid session", () => {
  test("is accepted, with the Bearer scheme in any case (RFC 7235 2.1)", async () => {
    const token = await signIn();
    expect((await postPlant(`Bearer ${token}`)).status).toBe(200);
    expect((await postPlant(`bearer ${token}`)).status).toBe(200);
    expect((await postPlant(`BEARER   ${token}`)).status).toBe(200);
  });
});

describe("401 for every credential that is not a live session of this platform", () => {
  const refused = `{"name": "refused", "id": 999}`;

  test("missing: no Authorization header, or an empty one; the challenge carries no error code (RFC 6750 3.1)", async () => {
    const missing = await postPlant(undefined, refused);
    await expectUnauthenticated(missing, "Bearer");
    expect(missing.headers.get("www-authenticate")).toBe('Bearer realm="plants"');
    await expectUnauthenticated(await postPlant("", refused));
  });

  test("malformed: another scheme, no token, two tokens, not a JWT", async () => {
    const token = await signIn();
    for (const header of [
      `Basic ${Buffer.from("a:b").toString("base64")}`,
      "Bearer",
      "Bearer ",
      `Bearer ${token} ${token}`,
      `Token ${token}`,
    ]) {
      const answer = await postPlant(header, refused);
      await expectUnauthenticated(answer, "authorization");
      expect(answer.headers.get("www-authenticate")).toBe('Bearer realm="plants", error="invalid_token"');
    }
    for (const header of ["Bearer abc", "Bearer a.b.c", `Bearer ${token.split(".").slice(0, 2).join(".")}`]) {
      await expectUnauthenticated(await postPlant(header, refused));
    }
  });

  test("the platform's other credentials (API, publishable and secret keys) are not sessions", async () => {
    const apiKey = (await createApiKey(server, "admin")).apiKey;
    for (const key of [apiKey, server.credentials.publishable_key, server.credentials.secret_key]) {
      await expectUnauthenticated(await postPlant(`Bearer ${key}`, refused));
    }
  });

  test("expired: once the session's lifetime has passed on the server's clock", async () => {
    const token = await signIn();
    const { payload } = decodeJwt(token);
    manual.set(new Date((payload.exp as number) * 1000 - 1000));
    expect((await postPlant(`Bearer ${token}`)).status).toBe(200);
    manual.advance(1000);
    await expectUnauthenticated(await postPlant(`Bearer ${token}`, refused), "expired");
  });

  test("revoked: after RevokeSession", async () => {
    const token = await signIn();
    expect((await postPlant(`Bearer ${token}`)).status).toBe(200);
    const sid = decodeJwt(token).payload.sid as string;
    const revoked = await callIdentity(server, "RevokeSession", { sessionId: sid }, server.credentials.secret_key);
    expect(revoked.status).toBe(200);
    await expectUnauthenticated(await postPlant(`Bearer ${token}`, refused), "revoked");
  });

  test("signed by another key: a token forged with a fresh ES256 key under the platform's kid and with live claims", async () => {
    const genuine = await signIn();
    const { header, payload } = decodeJwt(genuine);
    const { privateKey } = await generateKeyPair("ES256");
    const forged = await new SignJWT(payload).setProtectedHeader({ alg: "ES256", typ: "JWT", kid: header.kid as string }).sign(privateKey);
    await expectUnauthenticated(await postPlant(`Bearer ${forged}`, refused), "signature");
    // The same claims signed by the platform are fine: only the key differs.
    expect((await postPlant(`Bearer ${genuine}`)).status).toBe(200);
  });

  test("tampered or unsigned: claims edited after signing, alg none", async () => {
    const token = await signIn();
    const [head, body, signature] = token.split(".") as [string, string, string];
    const claims = JSON.parse(Buffer.from(body, "base64url").toString()) as Record<string, unknown>;
    const edited = Buffer.from(JSON.stringify({ ...claims, exp: (claims.exp as number) + 86_400 })).toString("base64url");
    await expectUnauthenticated(await postPlant(`Bearer ${head}.${edited}.${signature}`, refused));
    const none = Buffer.from(JSON.stringify({ alg: "none", typ: "JWT" })).toString("base64url");
    await expectUnauthenticated(await postPlant(`Bearer ${none}.${body}.`, refused));
  });

  test("authentication comes before the body: an invalid body without a session is 401, not 400 or 415", async () => {
    await expectUnauthenticated(await postPlant(undefined, "not json"));
    const response = await fetch(`${server.sampleUrl}/plants`, { method: "POST", headers: { "content-type": "text/plain" }, body: "x" });
    expect(response.status).toBe(401);
  });
});
