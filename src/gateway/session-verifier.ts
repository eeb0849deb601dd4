import { createLocalJWKSet, jwtVerify, type JSONWebKeySet } from "jose";
import { isHighS, readSessionTokenForm } from "../domain/identity/session-token.js";
import type { JsonWebKeyLike } from "./gateway-state.js";

/** A session token the gateway verified: who it is for and until when. */
export interface VerifiedSession {
  /** The identity id (`sub`). */
  readonly identityId: string;
  /** The session id (`sid`), checked against revocations on every request. */
  readonly sessionId: string;
  /** `exp` in epoch ms. */
  readonly expiresAt: number;
}

export interface SessionVerifier {
  /** A cached verdict for this exact token, if one is still good at `now`; never past `exp`. */
  cached(token: string, now: number): VerifiedSession | undefined;
  /** Verifies the signature (ES256 against the JWKS), `iss`, `aud` and `exp`; undefined when invalid. */
  verify(token: string, now: number): Promise<VerifiedSession | undefined>;
  /** Whether this verifier serves the given keys and claims (a new state may keep it). */
  serves(jwks: { keys: readonly JsonWebKeyLike[] }, issuer: string, audience: string): boolean;
}

export interface SessionVerifierOptions {
  jwks: { keys: readonly JsonWebKeyLike[] };
  issuer: string;
  audience: string;
  /** Clock skew tolerated on `exp` and `nbf`, in seconds (default 5). */
  leewaySeconds?: number;
  /** Verified tokens kept, by their exact string (default 10,000). */
  cacheSize?: number;
  /** At most this long a verdict is reused without verifying again, in ms (default 60 s). */
  cacheMs?: number;
}

/**
 * Verifies session tokens at the gateway (docs/gateway.md, "The data plane:
 * how the gateway enforces it", session-auth) with jose: a local JWKS built once per set of keys, ES256
 * only. Verdicts are kept by the exact token string for a short while, so a
 * client sending the same token again costs a map lookup instead of an ECDSA
 * verification; a kept verdict never outlives the token's `exp`, and
 * revocation is checked by the caller on every request, cached or not.
 */
export function createSessionVerifier(options: SessionVerifierOptions): SessionVerifier {
  const keysJson = JSON.stringify(options.jwks);
  const keySet = createLocalJWKSet(JSON.parse(keysJson) as JSONWebKeySet);
  const leeway = options.leewaySeconds ?? 5;
  const cacheSize = options.cacheSize ?? 10_000;
  const cacheMs = options.cacheMs ?? 60_000;
  const cache = new Map<string, { session: VerifiedSession; until: number }>();

  return {
    cached(token, now) {
      const entry = cache.get(token);
      if (entry === undefined) return undefined;
      if (now >= entry.until) {
        cache.delete(token);
        return undefined;
      }
      return entry.session;
    },
    async verify(token, now) {
      // One token, one encoding (as the platform checks it): a high-s twin of a signature, or a
      // signature segment with stray pad bits, verifies with jose but is not a token the platform made.
      const form = readSessionTokenForm(token);
      if (!form || isHighS(form.signature)) return undefined;
      let payload: Awaited<ReturnType<typeof jwtVerify>>["payload"];
      try {
        ({ payload } = await jwtVerify(token, keySet, {
          algorithms: ["ES256"],
          issuer: options.issuer,
          audience: options.audience,
          clockTolerance: leeway,
          currentDate: new Date(now),
          requiredClaims: ["exp", "sub", "sid"],
        }));
      } catch {
        return undefined;
      }
      const { sub, sid, exp } = payload;
      // The identity id travels upstream in a header: only visible ASCII is accepted.
      if (typeof sub !== "string" || !/^[\x21-\x7e]{1,256}$/.test(sub) || typeof sid !== "string" || typeof exp !== "number") {
        return undefined;
      }
      const session: VerifiedSession = { identityId: sub, sessionId: sid, expiresAt: exp * 1000 };
      if (cache.size >= cacheSize) {
        const oldest = cache.keys().next();
        if (!oldest.done) cache.delete(oldest.value);
      }
      cache.set(token, { session, until: Math.min(session.expiresAt, now + cacheMs) });
      return session;
    },
    serves(jwks, issuer, audience) {
      return issuer === options.issuer && audience === options.audience && JSON.stringify(jwks) === keysJson;
    },
  };
}
