import { createHmac, createPublicKey, generateKeyPairSync, type JsonWebKey as NodeJsonWebKey, verify } from "node:crypto";
import { generateKeyPair, type JWK, type JWTPayload } from "jose";
import { createOtherOrganization } from "../support/credentials.js";
import { callIdentity, reasonOf } from "../support/identity-client.js";
import { createManualClock, startTestServer, type TestServer } from "../support/server.js";
import {
  claimsOf,
  keyringOf,
  kidOf,
  liveSigningKey,
  p256Order,
  signAnyHeader,
  signClaims,
  signInByMagicLink,
  sOf,
  twinOf,
} from "../support/session-tokens.js";

/**
 * Session tokens (docs/identity.md, "Sessions"): ES256 JWTs of this platform,
 * verified with jose (ES256 only, typ JWT, iss, aud, exp, nbf and iat with a
 * 30 s leeway), each with exactly one encoding that verifies.
 */
const manual = createManualClock();
let server: TestServer;
let org: string;
const second = 1000;

beforeAll(async () => {
  server = await startTestServer({ clock: manual.clock });
  org = server.credentials.organization_id;
});
afterAll(() => server.close());

const validate = (token: string, sk = server.credentials.secret_key) => callIdentity(server, "ValidateSession", { token }, sk);

async function postPlant(token: string): Promise<{ status: number; message: string }> {
  const response = await fetch(`${server.sampleUrl}/plants`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "fern", id: Math.floor(Math.random() * 1e15) + 1 }),
  });
  return { status: response.status, message: ((await response.json()) as { message: string }).message };
}

async function expectRefused(token: string, reason = "session_invalid", words: RegExp = /./) {
  const answer = await validate(token);
  expect({ status: answer.status, reason: reasonOf(answer) }).toEqual({ status: 401, reason });
  expect((answer.body as { message: string }).message).toMatch(words);
  expect((await postPlant(token)).status).toBe(401);
}

/** The published JWK of a kid, as a node public key. */
async function publishedKey(kid: string) {
  const { keys } = (await (await server.call("/.well-known/jwks.json")).json()) as { keys: JWK[] };
  const jwk = keys.find((key) => key.kid === kid);
  if (!jwk) throw new Error(`kid ${kid} is not published`);
  return { jwk, key: createPublicKey({ key: jwk as NodeJsonWebKey, format: "jwk" }) };
}

const signingInputOf = (token: string) => Buffer.from(token.split(".").slice(0, 2).join("."));
const signatureOf = (token: string) => Buffer.from(token.split(".")[2] ?? "", "base64url");

describe("one token, one encoding", () => {
  test("every token the platform signs has the low form of s (s <= n/2)", async () => {
    const tokens = await Promise.all(Array.from({ length: 32 }, () => signInByMagicLink(server)));
    // A signer that did not canonicalise would pass this with probability 2^-32.
    for (const token of tokens) expect(sOf(token) <= p256Order / 2n).toBe(true);
  });

  test("the high-s twin of a genuine token verifies under plain ECDSA, and the platform refuses it", async () => {
    const token = await signInByMagicLink(server);
    const twin = twinOf(token);
    expect(twin).not.toBe(token);
    const { key } = await publishedKey(kidOf(token));
    // The twin is a valid ECDSA signature of the same bytes: only its form differs.
    expect(verify("sha256", signingInputOf(twin), { key, dsaEncoding: "ieee-p1363" }, signatureOf(twin))).toBe(true);
    await expectRefused(twin, "session_invalid", /canonical/);
    expect((await validate(token)).status).toBe(200);
    expect((await postPlant(token)).status).toBe(200);
  });

  test("a signature segment with its base64url pad bits set (the same 64 bytes) is refused", async () => {
    const token = await signInByMagicLink(server);
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const last = token.at(-1) as string;
    const padded = `${token.slice(0, -1)}${alphabet[alphabet.indexOf(last) | 0b1111]}`;
    expect(padded).not.toBe(token);
    expect(signatureOf(padded).equals(signatureOf(token))).toBe(true);
    await expectRefused(padded, "session_invalid", /well-formed/);
    expect((await validate(token)).status).toBe(200);
  });
});

describe("only ES256 tokens of this platform's keys, with the documented claims", () => {
  let genuine: string;
  let claims: JWTPayload;
  let key: Awaited<ReturnType<typeof liveSigningKey>>;
  const now = () => Math.floor(manual.clock().getTime() / 1000);
  const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");

  beforeAll(async () => {
    genuine = await signInByMagicLink(server);
    claims = claimsOf(genuine);
    key = await liveSigningKey(server, org);
    expect(key.kid).toBe(kidOf(genuine));
  });

  test("the genuine claims signed again with the organisation's key verify (the refusals below vary one thing)", async () => {
    const token = await signClaims(claims, key);
    expect((await validate(token)).status).toBe(200);
    expect((await postPlant(token)).status).toBe(200);
  });

  test("alg none, HS256 and HS512 (keyed with the public key, the algorithm-confusion attack) are refused", async () => {
    const [header, payload] = genuine.split(".") as [string, string];
    await expectRefused(`${b64({ alg: "none", typ: "JWT", kid: key.kid })}.${payload}.`);
    await expectRefused(`${b64({ alg: "none", typ: "JWT", kid: key.kid })}.${payload}.${genuine.split(".")[2]}`);
    const { jwk } = await publishedKey(key.kid);
    const secret = Buffer.from(JSON.stringify(jwk));
    for (const [alg, hash] of [
      ["HS256", "sha256"],
      ["HS512", "sha512"],
    ] as const) {
      const head = b64({ alg, typ: "JWT", kid: key.kid });
      const mac = createHmac(hash, secret).update(`${head}.${payload}`).digest("base64url");
      await expectRefused(`${head}.${payload}.${mac}`);
    }
    // HS512's 64-byte MAC has the shape of an ES256 signature: jose's algorithm list refuses it.
    const head = b64({ alg: "HS512", typ: "JWT", kid: key.kid });
    const answer = await validate(`${head}.${payload}.${createHmac("sha512", secret).update(`${head}.${payload}`).digest("base64url")}`);
    expect((answer.body as { message: string }).message).toMatch(/ES256/);
    expect(header).not.toBe(head);
  });

  test("a key this platform does not know, under a kid of its own or under the platform's kid, is refused", async () => {
    const { privateKey } = await generateKeyPair("ES256");
    await expectRefused(await signClaims(claims, { kid: "not-a-key-of-ours", privateKey }), "session_invalid", /signature/);
    await expectRefused(await signClaims(claims, { kid: key.kid, privateKey }), "session_invalid", /signature/);
    const { privateKey: p384 } = generateKeyPairSync("ec", { namedCurve: "P-384" });
    const es384 = await import("jose").then(({ SignJWT }) =>
      new SignJWT(claims).setProtectedHeader({ alg: "ES384", typ: "JWT", kid: key.kid }).sign(p384),
    );
    await expectRefused(es384);
  });

  test("wrong audience or issuer is refused", async () => {
    await expectRefused(
      await signClaims({ ...claims, aud: "00000000-0000-4000-8000-000000000000" }, key),
      "session_invalid",
      /organisation/,
    );
    await expectRefused(await signClaims({ ...claims, aud: [org] }, key));
    await expectRefused(await signClaims({ ...claims, iss: "https://gatehouse.example.org" }, key), "session_invalid", /issued/);
  });

  test("a key of one organisation cannot vouch for another organisation's session", async () => {
    const other = await createOtherOrganization(server);
    await signInByMagicLink(server, other.secretKey);
    const otherKey = await liveSigningKey(server, other.organizationId);
    expect(otherKey.kid).not.toBe(key.kid);
    // Claims of this organisation's live session, signed with the other organisation's key.
    await expectRefused(await signClaims(claims, otherKey), "session_invalid", /organisation/);
    // ...and what the other key signs for its own organisation is not a session of this one.
    const answer = await validate(await signClaims({ ...claims, aud: other.organizationId }, otherKey));
    expect(answer.status).toBe(401);
  });

  test("expired: beyond the leeway by the token, or on the server's clock by the session row", async () => {
    await expectRefused(await signClaims({ ...claims, iat: now() - 600, exp: now() - 31 }, key), "session_expired", /expired/);
    const token = await signInByMagicLink(server);
    const { exp } = claimsOf(token);
    manual.set(new Date((exp as number) * 1000 + 10 * second));
    // Within jose's 30 s leeway, but the platform holds a session to its own expiry exactly.
    await expectRefused(token, "session_expired", /expired/);
    manual.set(new Date((claims.iat as number) * 1000 + 60 * second));
  });

  test("nbf in the future is refused beyond the 30 s leeway, accepted within it", async () => {
    await expectRefused(await signClaims({ ...claims, nbf: now() + 120 }, key), "session_invalid", /nbf/);
    expect((await validate(await signClaims({ ...claims, nbf: now() + 20 }, key))).status).toBe(200);
  });

  test("iat in the future, a missing claim, another typ and an unknown critical header are refused", async () => {
    await expectRefused(await signClaims({ ...claims, iat: now() + 120 }, key), "session_invalid", /future/);
    const { sid: _sid, ...withoutSid } = claims;
    await expectRefused(await signClaims(withoutSid, key), "session_invalid", /sid/);
    await expectRefused(await signClaims(claims, key, { typ: "at+jwt" }), "session_invalid", /typ/);
    const critical = { alg: "ES256", typ: "JWT", kid: key.kid, crit: ["urn:example:must-understand"], "urn:example:must-understand": 1 };
    await expectRefused(await signAnyHeader(critical, claims, key.privateKey));
    // The same way of signing, without the critical header, is accepted.
    expect((await validate(await signAnyHeader({ alg: "ES256", typ: "JWT", kid: key.kid }, claims, key.privateKey))).status).toBe(200);
  });

  test("a signing key's private half, wrapped at rest, opens only as its own organisation's key", async () => {
    const row = await server.app.database.client.sessionSigningKey.findUniqueOrThrow({ where: { id: key.kid } });
    const keyring = keyringOf(server);
    expect(() => keyring.unwrap(Buffer.from(row.privateKeyEnc), `session-signing-key:${org}:${key.kid}`)).not.toThrow();
    expect(() =>
      keyring.unwrap(Buffer.from(row.privateKeyEnc), `session-signing-key:00000000-0000-4000-8000-000000000000:${key.kid}`),
    ).toThrow();
    expect(JSON.parse(row.publicJwk)).not.toHaveProperty("d");
  });
});
