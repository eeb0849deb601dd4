import { createPrivateKey, generateKeyPairSync } from "node:crypto";
import {
  calculateJwkThumbprint,
  type CryptoKey,
  decodeProtectedHeader,
  errors,
  importJWK,
  importPKCS8,
  jwtVerify,
  type JWTPayload,
  SignJWT,
} from "jose";
import { maxSessionTtlSeconds } from "./settings.js";

/** The claims of a session token (docs/identity.md, "Sessions"). */
export interface SessionClaims {
  /** PUBLIC_URL of the platform. */
  iss: string;
  /** The organisation id. */
  aud: string;
  /** The identity id. */
  sub: string;
  /** The session id. */
  sid: string;
  /** Issued at and expiry, seconds since the epoch (RFC 7519 NumericDate). */
  iat: number;
  exp: number;
}

/** A public key as published in the JWKS (RFC 7517, RFC 7518 6.2). */
export interface PublicJwk {
  kty: "EC";
  crv: "P-256";
  x: string;
  y: string;
  kid: string;
  alg: "ES256";
  use: "sig";
}

/**
 * Leeway on `exp`, `nbf` and `iat` (RFC 7519 4.1.4: "implementers MAY provide
 * for some small leeway, usually no more than a few minutes, to account for
 * clock skew"): instances, and the verifiers they answer, do not share one
 * clock. The platform's own checks then hold a session to its stored expiry
 * exactly (sessions.ts).
 */
export const clockToleranceSeconds = 30;

/** RFC 8725 3.1: the one algorithm we sign with is the only one we accept. */
const algorithms = ["ES256"];

/**
 * The order n of the P-256 group (SEC 2 2.4.2). ECDSA accepts (r, s) and
 * (r, n − s) alike; a signature is canonical when s ≤ n / 2 ("low s").
 */
const p256Order = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
const scalarBytes = 32;

function toScalar(value: bigint): Buffer {
  return Buffer.from(value.toString(16).padStart(scalarBytes * 2, "0"), "hex");
}

const halfOrder = toScalar(p256Order >> 1n);

/** Whether a raw R || S signature (RFC 7518 3.4) has the high form of s. */
export function isHighS(signature: Uint8Array): boolean {
  return Buffer.compare(signature.subarray(scalarBytes, scalarBytes * 2), halfOrder) > 0;
}

/** The low-s twin of an R || S signature: (r, n − s) when s > n / 2, else the signature itself. */
export function toLowS(signature: Buffer): Buffer {
  if (!isHighS(signature)) return signature;
  const s = BigInt(`0x${signature.subarray(scalarBytes).toString("hex")}`);
  return Buffer.concat([signature.subarray(0, scalarBytes), toScalar(p256Order - s)]);
}

/** A fresh ES256 (P-256) key pair, its kid the RFC 7638 thumbprint of the public key. */
export async function generateSigningKey(): Promise<{ kid: string; privateKeyDer: Buffer; publicJwk: PublicJwk }> {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const { x, y } = publicKey.export({ format: "jwk" }) as { x: string; y: string };
  const kid = await calculateJwkThumbprint({ kty: "EC", crv: "P-256", x, y }, "sha256");
  return {
    kid,
    privateKeyDer: privateKey.export({ format: "der", type: "pkcs8" }),
    publicJwk: { kty: "EC", crv: "P-256", x, y, kid, alg: "ES256", use: "sig" },
  };
}

/** The private half (PKCS#8 DER) as a signing key for jose. */
export function importSigningKey(der: Buffer): Promise<CryptoKey> {
  const pem = createPrivateKey({ key: der, format: "der", type: "pkcs8" }).export({ format: "pem", type: "pkcs8" }) as string;
  return importPKCS8(pem, "ES256");
}

/** A published key as a verification key for jose. */
export function importVerificationKey(jwk: PublicJwk): Promise<CryptoKey> {
  return importJWK({ kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y }, "ES256") as Promise<CryptoKey>;
}

/**
 * Signs the claims as a compact JWS (RFC 7515) with ES256, header
 * `{alg, typ: "JWT", kid}`. WebCrypto draws s on either side of n / 2; the
 * signature is canonicalised to low s, so that every token we issue has
 * exactly one encoding that verifies (verifySessionTokenSignature refuses the
 * other).
 */
export async function signSessionToken(claims: SessionClaims, key: { kid: string; privateKey: CryptoKey }): Promise<string> {
  const token = await new SignJWT({ ...claims }).setProtectedHeader({ alg: "ES256", typ: "JWT", kid: key.kid }).sign(key.privateKey);
  const cut = token.lastIndexOf(".");
  const signature = Buffer.from(token.slice(cut + 1), "base64url");
  return isHighS(signature) ? `${token.slice(0, cut + 1)}${toLowS(signature).toString("base64url")}` : token;
}

/** What can be read of a token before its key is known: its kid and its signature bytes. */
export interface SessionTokenForm {
  kid: string;
  /** R || S, 64 bytes (RFC 7518 3.4). */
  signature: Buffer;
}

/** 64 bytes in unpadded base64url (RFC 7515 2: "with all trailing '=' characters omitted"). */
const signatureSegment = /^[A-Za-z0-9_-]{86}$/;

/**
 * Reads the header's kid and the signature; null unless the token is three
 * segments with a 64-byte signature in canonical base64url. Canonical: an
 * 86-character segment carries 4 bits beyond the 64 bytes, which lenient
 * decoders (jose's included) ignore; unless they are zero, a second string
 * would verify as the same token (RFC 4648 3.5: "encoders MUST set the pad
 * bits to zero", and decoders MAY reject otherwise).
 */
export function readSessionTokenForm(token: string): SessionTokenForm | null {
  const parts = token.split(".");
  if (parts.length !== 3) return null;
  const encoded = parts[2] as string;
  if (!signatureSegment.test(encoded)) return null;
  const signature = Buffer.from(encoded, "base64url");
  if (signature.toString("base64url") !== encoded) return null;
  try {
    const { kid } = decodeProtectedHeader(token);
    if (typeof kid !== "string" || kid === "") return null;
    return { kid, signature };
  } catch {
    return null;
  }
}

export type TokenRefusal = { ok: false; reason: "session_invalid" | "session_expired"; message: string };
export type TokenVerdict = { ok: true; claims: SessionClaims } | TokenRefusal;

const refuse = (message: string, reason: TokenRefusal["reason"] = "session_invalid"): TokenRefusal => ({ ok: false, reason, message });

const claimMessages: Record<string, string> = {
  iss: "the session token was not issued by this platform",
  aud: "the session token belongs to another organisation",
  nbf: "the session token is not valid yet (nbf is in the future)",
  iat: "the session token was issued in the future",
  typ: 'the session token is not a JWT (its typ header is not "JWT")',
};

/** jose's refusals, as a verdict; anything else is not the token's fault and is rethrown. */
function verdictOf(error: unknown): TokenRefusal {
  if (error instanceof errors.JWTExpired) return refuse("the session has expired", "session_expired");
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.reason === "missing") return refuse(`the session token has no ${error.claim} claim`);
    return refuse(claimMessages[error.claim] ?? `the session token's ${error.claim} claim is not valid`);
  }
  if (error instanceof errors.JWSSignatureVerificationFailed) return refuse("the session token's signature does not verify");
  if (error instanceof errors.JOSEAlgNotAllowed) return refuse("the session token is not signed with ES256");
  if (error instanceof errors.JOSEError) return refuse("the session token is not a well-formed ES256 JWT");
  throw error;
}

function claimsOf(payload: JWTPayload): SessionClaims | null {
  const { iss, aud, sub, sid, iat, exp } = payload;
  if (typeof iss !== "string" || typeof aud !== "string" || typeof sub !== "string" || typeof sid !== "string") return null;
  if (typeof iat !== "number" || typeof exp !== "number") return null;
  return { iss, aud, sub, sid, iat, exp };
}

/**
 * Verifies a session token with jose against one key: ES256 only, `typ`
 * JWT, `iss` the platform, `aud` the organisation when given, `exp`, `nbf`
 * and `iat` against `now` with the leeway above, and every claim of the
 * contract present. It does not look at the form of the signature (see
 * readSessionTokenForm and isHighS) nor at the session's row.
 */
export async function verifySessionTokenSignature(
  token: string,
  key: CryptoKey,
  policy: { issuer: string; audience?: string; now: Date },
): Promise<TokenVerdict> {
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(token, key, {
      algorithms,
      typ: "JWT",
      issuer: policy.issuer,
      ...(policy.audience === undefined ? {} : { audience: policy.audience }),
      currentDate: policy.now,
      clockTolerance: clockToleranceSeconds,
      // No session outlives the longest lifetime a setting allows; with it, jose also refuses an iat in the future.
      maxTokenAge: maxSessionTtlSeconds,
      requiredClaims: ["iss", "aud", "sub", "sid", "iat", "exp"],
    }));
  } catch (error) {
    return verdictOf(error);
  }
  const claims = claimsOf(payload);
  return claims
    ? { ok: true, claims }
    : refuse("the session token's claims do not have the types of a session (strings and numeric dates)");
}
