import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from "node:crypto";

/** The claims of a session token (CONTRACT.md "Identity API"). */
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

/** A fresh ES256 (P-256) key pair, its kid the RFC 7638 thumbprint of the public key. */
export function generateSigningKey(): { kid: string; privateKeyDer: Buffer; publicJwk: PublicJwk } {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const jwk = publicKey.export({ format: "jwk" }) as { x: string; y: string };
  // RFC 7638 3.2: the required members in lexicographic order, no whitespace.
  const kid = createHash("sha256").update(`{"crv":"P-256","kty":"EC","x":"${jwk.x}","y":"${jwk.y}"}`).digest("base64url");
  return {
    kid,
    privateKeyDer: privateKey.export({ format: "der", type: "pkcs8" }),
    publicJwk: { kty: "EC", crv: "P-256", x: jwk.x, y: jwk.y, kid, alg: "ES256", use: "sig" },
  };
}

export function privateKeyFromDer(der: Buffer): KeyObject {
  return createPrivateKey({ key: der, format: "der", type: "pkcs8" });
}

export function publicKeyFromJwk(jwk: PublicJwk): KeyObject {
  return createPublicKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y }, format: "jwk" });
}

const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");

/** Signs the claims as a compact JWS (RFC 7515) with ES256: R || S, 64 bytes (RFC 7518 3.4). */
export function signSessionToken(claims: SessionClaims, key: { kid: string; privateKey: KeyObject }): string {
  const input = `${encode({ alg: "ES256", typ: "JWT", kid: key.kid })}.${encode(claims)}`;
  const signature = sign("sha256", Buffer.from(input), { key: key.privateKey, dsaEncoding: "ieee-p1363" });
  return `${input}.${signature.toString("base64url")}`;
}

/** A token split into its parts; null when it is not a well-formed ES256 JWT with a kid. */
export interface ParsedSessionToken {
  kid: string;
  signingInput: string;
  signature: Buffer;
  claims: Partial<SessionClaims>;
}

const segment = /^[A-Za-z0-9_-]+$/;

export function parseSessionToken(token: string): ParsedSessionToken | null {
  const parts = token.split(".");
  if (parts.length !== 3 || !parts.every((part) => segment.test(part))) return null;
  const [headerPart, payloadPart, signaturePart] = parts as [string, string, string];
  try {
    const header = JSON.parse(Buffer.from(headerPart, "base64url").toString("utf8")) as Record<string, unknown>;
    const claims = JSON.parse(Buffer.from(payloadPart, "base64url").toString("utf8")) as unknown;
    // RFC 8725 3.1: accept only the one algorithm we sign with.
    if (header.alg !== "ES256" || typeof header.kid !== "string" || header.crit !== undefined) return null;
    if (claims === null || typeof claims !== "object" || Array.isArray(claims)) return null;
    return {
      kid: header.kid,
      signingInput: `${headerPart}.${payloadPart}`,
      signature: Buffer.from(signaturePart, "base64url"),
      claims: claims as Partial<SessionClaims>,
    };
  } catch {
    return null;
  }
}

export function verifySignature(parsed: ParsedSessionToken, publicKey: KeyObject): boolean {
  if (parsed.signature.length !== 64) return false;
  return verify("sha256", Buffer.from(parsed.signingInput), { key: publicKey, dsaEncoding: "ieee-p1363" }, parsed.signature);
}
