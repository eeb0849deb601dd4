import { execFile } from "node:child_process";
import { createPrivateKey, generateKeyPairSync, sign as nodeSign } from "node:crypto";
import { join } from "node:path";
import { calculateJwkThumbprint, type CryptoKey, decodeJwt, decodeProtectedHeader, importPKCS8, type JWTPayload, SignJWT } from "jose";
import { createMasterKeyring, type MasterKeyring } from "../../src/crypto/envelope.js";
import { loadMasterKey } from "../../src/crypto/master-key.js";
import { callIdentity, newIdentifier } from "./identity-client.js";
import type { TestServer } from "./server.js";

/** The order n of the P-256 group (SEC 2 2.4.2). */
export const p256Order = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;

/** s of a compact ES256 JWS, as a number. */
export function sOf(token: string): bigint {
  const signature = Buffer.from(token.split(".")[2] ?? "", "base64url");
  return BigInt(`0x${signature.subarray(32).toString("hex")}`);
}

/** The same token with (r, n − s) for (r, s): it verifies under plain ECDSA just as well. */
export function twinOf(token: string): string {
  const [header, payload, encoded] = token.split(".") as [string, string, string];
  const signature = Buffer.from(encoded, "base64url");
  const twin = (p256Order - sOf(token)).toString(16).padStart(64, "0");
  return `${header}.${payload}.${Buffer.concat([signature.subarray(0, 32), Buffer.from(twin, "hex")]).toString("base64url")}`;
}

export const kidOf = (token: string) => decodeProtectedHeader(token).kid as string;
export const claimsOf = (token: string) => decodeJwt(token);

/** Signs an identity in with a magic link (the secret key's backend flow); returns the session token. */
export async function signInByMagicLink(server: TestServer, secretKey = server.credentials.secret_key): Promise<string> {
  const generated = await callIdentity<{ token: string }>(server, "GenerateMagicLink", { identifier: newIdentifier("session") }, secretKey);
  if (generated.status !== 200) throw new Error(`GenerateMagicLink: ${generated.status} ${generated.text}`);
  const verified = await callIdentity<{ session: { token: string } }>(
    server,
    "VerifyMagicLink",
    { token: generated.body.token },
    secretKey,
  );
  if (verified.status !== 200) throw new Error(`VerifyMagicLink: ${verified.status} ${verified.text}`);
  return verified.body.session.token;
}

/** The master keyring of a test server (its generated master.key). */
export function keyringOf(server: TestServer): MasterKeyring {
  return createMasterKeyring(loadMasterKey({ file: join(server.db.dataDir, "master.key") }));
}

/**
 * The organisation's live signing key, opened with the master key as the
 * server opens it: tests sign tokens with the platform's own key and vary one
 * thing at a time.
 */
export async function liveSigningKey(server: TestServer, organizationId: string): Promise<{ kid: string; privateKey: CryptoKey }> {
  const row = await server.app.database.client.sessionSigningKey.findFirst({
    where: { organizationId, retiredAt: null },
    orderBy: { createdAt: "desc" },
  });
  if (!row) throw new Error(`organisation ${organizationId} has no signing key yet`);
  const der = keyringOf(server).unwrap(Buffer.from(row.privateKeyEnc), `session-signing-key:${organizationId}:${row.id}`);
  const pem = createPrivateKey({ key: der, format: "der", type: "pkcs8" }).export({ format: "pem", type: "pkcs8" }) as string;
  return { kid: row.id, privateKey: await importPKCS8(pem, "ES256") };
}

/** The low-s form of an ES256 token (the one the platform accepts). */
export const lowSOf = (token: string) => (sOf(token) > p256Order / 2n ? twinOf(token) : token);

/** Signs claims with jose as given (header defaults to what the platform writes), in the low-s form. */
export async function signClaims(
  claims: JWTPayload,
  key: { kid: string; privateKey: CryptoKey | Uint8Array },
  header: Record<string, unknown> = {},
): Promise<string> {
  const token = await new SignJWT(claims).setProtectedHeader({ alg: "ES256", typ: "JWT", kid: key.kid, ...header }).sign(key.privateKey);
  return header.alg === undefined || header.alg === "ES256" ? lowSOf(token) : token;
}

/** A compact ES256 JWS of any header, signed with WebCrypto (jose refuses to sign headers it would not accept), low s. */
export async function signAnyHeader(header: Record<string, unknown>, claims: JWTPayload, privateKey: CryptoKey): Promise<string> {
  const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const input = `${encode(header)}.${encode(claims)}`;
  const signature = await crypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, privateKey, Buffer.from(input));
  return lowSOf(`${input}.${Buffer.from(signature).toString("base64url")}`);
}

/**
 * A shared signing key as the release before per-organisation keys stored it
 * (SigningKey: kid, private key wrapped under "identity-signing-key:<kid>"),
 * and a signer that writes tokens the way that release did (a hand-built
 * compact JWS, s as WebCrypto or OpenSSL drew it).
 */
export async function createLegacySigningKey(server: TestServer, createdAt: Date) {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const { x, y } = publicKey.export({ format: "jwk" }) as { x: string; y: string };
  const kid = await calculateJwkThumbprint({ kty: "EC", crv: "P-256", x, y }, "sha256");
  const der = privateKey.export({ format: "der", type: "pkcs8" });
  await server.app.database.client.signingKey.create({
    data: {
      id: kid,
      privateKeyEnc: new Uint8Array(keyringOf(server).wrap(der, `identity-signing-key:${kid}`)),
      publicJwk: JSON.stringify({ kty: "EC", crv: "P-256", x, y, kid, alg: "ES256", use: "sig" }),
      createdAt,
      retiredAt: null,
    },
  });
  const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
  return {
    kid,
    sign(claims: JWTPayload): string {
      const input = `${encode({ alg: "ES256", typ: "JWT", kid })}.${encode(claims)}`;
      const signature = nodeSign("sha256", Buffer.from(input), { key: privateKey, dsaEncoding: "ieee-p1363" });
      return `${input}.${signature.toString("base64url")}`;
    },
  };
}

export interface OutsideVerdict {
  ok: boolean;
  kid?: string;
  sub?: string;
  error?: string;
}

const verifierScript = join(process.cwd(), "test", "support", "verify_es256_jwt.py");

/**
 * Verifies a token as an outside party would: python3 with the `cryptography`
 * module fetches the JWKS over HTTP, picks the key by kid, checks the ES256
 * signature and iss, aud and exp at `now`. Asynchronous: the server answering
 * the JWKS request runs in this process.
 */
export function verifyOutside(server: TestServer, token: string, expected: { audience: string; now: Date }): Promise<OutsideVerdict> {
  const args = [
    verifierScript,
    `${server.url}/.well-known/jwks.json`,
    server.app.config.publicUrl,
    expected.audience,
    String(Math.floor(expected.now.getTime() / 1000)),
  ];
  return new Promise((resolve, reject) => {
    const child = execFile("python3", args, { timeout: 30_000 }, (error, stdout, stderr) => {
      try {
        resolve(JSON.parse(stdout) as OutsideVerdict);
      } catch {
        reject(new Error(`the outside verifier failed: ${error?.message ?? ""} ${stderr}`));
      }
    });
    child.stdin?.end(token);
  });
}
