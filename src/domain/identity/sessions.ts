import { randomUUID, type KeyObject } from "node:crypto";
import type { MasterKeyring } from "../../crypto/envelope.js";
import type { IdentityStore, SessionMethod } from "../../storage/identity-store.js";
import type { Clock } from "../clock.js";
import { DomainError } from "../errors.js";
import {
  generateSigningKey,
  parseSessionToken,
  privateKeyFromDer,
  publicKeyFromJwk,
  signSessionToken,
  verifySignature,
  type PublicJwk,
} from "./session-token.js";
import { maxSessionTtlSeconds } from "./settings.js";

export type SessionStore = Pick<
  IdentityStore,
  "createSession" | "findSession" | "revokeSession" | "listSigningKeys" | "findSigningKey" | "createSigningKey" | "retireSigningKeys"
>;

export interface SessionIssuerDeps {
  store: SessionStore;
  /** Wraps the signing keys' private halves at rest. */
  keyring: MasterKeyring;
  clock: Clock;
  /** The `iss` of every token: the platform's PUBLIC_URL. */
  issuer: string;
  /** Age at which the signing key is replaced (default 30 days). */
  rotationSeconds?: number;
  /** Called when a background refresh of the signing key fails (the cached key keeps signing). */
  onError?: (error: unknown) => void;
}

/** A session just signed in: its row exists and its token is signed. */
export interface IssuedSession {
  token: string;
  sessionId: string;
  organizationId: string;
  identityId: string;
  issuedAt: Date;
  expiresAt: Date;
}

/** What a valid session token stands for. */
export interface VerifiedSession {
  organizationId: string;
  identityId: string;
  sessionId: string;
  method: SessionMethod;
  issuedAt: Date;
  expiresAt: Date;
}

/**
 * Retired keys stay published this long: a token lives at most
 * maxSessionTtlSeconds, so every token a retired key signed has expired by
 * then (plus a margin for verifiers' clocks and caches).
 */
export const retiredKeyRetentionSeconds = maxSessionTtlSeconds + 300;
const defaultRotationSeconds = 30 * 24 * 3600;
/** How long an instance trusts its cached view of the active key (another instance may rotate). */
const activeKeyRecheckMs = 60_000;

const purposeOf = (kid: string) => `identity-signing-key:${kid}`;

function unauthenticated(reason: string, message: string): DomainError {
  return new DomainError("unauthenticated", reason, message);
}

/**
 * Sessions as ES256 JWTs (CONTRACT.md "Identity API"): a row per sign-in, a
 * token with iss, aud = organisation, sub = identity, sid, iat and exp, and a
 * `kid` header naming a key published at /.well-known/jwks.json. The sign-in
 * flows of every method (password, magic link, passkey) and the sample plant
 * API share this module.
 */
export function createSessionIssuer(deps: SessionIssuerDeps) {
  const rotationMs = (deps.rotationSeconds ?? defaultRotationSeconds) * 1000;
  const retentionMs = retiredKeyRetentionSeconds * 1000;
  const verifyKeys = new Map<string, KeyObject>();
  let active: { kid: string; privateKey: KeyObject; createdAt: Date; checkedAt: number } | undefined;
  let loading: Promise<NonNullable<typeof active>> | undefined;

  async function createKey(now: Date) {
    const key = generateSigningKey();
    await deps.store.createSigningKey({
      id: key.kid,
      privateKeyEnc: deps.keyring.wrap(key.privateKeyDer, purposeOf(key.kid)),
      publicJwk: JSON.stringify(key.publicJwk),
      createdAt: now,
      retiredAt: null,
    });
    // Older keys retire but stay published until their tokens have expired.
    await deps.store.retireSigningKeys(now, now);
    verifyKeys.set(key.kid, publicKeyFromJwk(key.publicJwk));
    return { kid: key.kid, privateKey: privateKeyFromDer(key.privateKeyDer), createdAt: now, checkedAt: now.getTime() };
  }

  async function loadActiveKey(now: Date) {
    const keys = await deps.store.listSigningKeys(new Date(now.getTime() - retentionMs));
    const newest = keys.find((key) => key.retiredAt === null);
    if (!newest || now.getTime() - newest.createdAt.getTime() >= rotationMs) return createKey(now);
    if (active?.kid === newest.id) return { ...active, checkedAt: now.getTime() };
    const der = deps.keyring.unwrap(newest.privateKeyEnc, purposeOf(newest.id));
    return { kid: newest.id, privateKey: privateKeyFromDer(der), createdAt: newest.createdAt, checkedAt: now.getTime() };
  }

  function refresh(now: Date) {
    loading ??= loadActiveKey(now)
      .then((key) => {
        active = key;
        return key;
      })
      .finally(() => {
        loading = undefined;
      });
    return loading;
  }

  /** The key new tokens are signed with, rotated when it is old; one load at a time per instance. */
  async function activeKey(now: Date) {
    if (!active || now.getTime() - active.createdAt.getTime() >= rotationMs) return refresh(now);
    if (now.getTime() - active.checkedAt >= activeKeyRecheckMs || now.getTime() < active.checkedAt) {
      // Another instance may have rotated: look again in the background and
      // keep signing with the cached key meanwhile (it stays published). The
      // caller may hold a transaction, so it must not wait on the database.
      refresh(now).catch((error: unknown) => deps.onError?.(error));
    }
    return active;
  }

  async function publicKeyOf(kid: string): Promise<KeyObject | null> {
    const cached = verifyKeys.get(kid);
    if (cached) return cached;
    const row = await deps.store.findSigningKey(kid);
    if (!row) return null;
    const key = publicKeyFromJwk(JSON.parse(row.publicJwk) as PublicJwk);
    verifyKeys.set(kid, key);
    return key;
  }

  return {
    /**
     * Loads (or creates) the signing key. Call it before opening a transaction
     * in which issueSession will run, so signing never waits on the database.
     */
    async prepare(): Promise<void> {
      await activeKey(deps.clock());
    },

    /**
     * Signs an identity in: stores a session row (through `store`, which may
     * be bound to the caller's transaction) and signs its token.
     */
    async issueSession(
      input: { organizationId: string; identityId: string; method: SessionMethod; ttlSeconds: number },
      store: Pick<SessionStore, "createSession"> = deps.store,
    ): Promise<IssuedSession> {
      const now = deps.clock();
      const key = await activeKey(now);
      const iat = Math.floor(now.getTime() / 1000);
      const exp = iat + input.ttlSeconds;
      const sessionId = randomUUID();
      const issuedAt = new Date(iat * 1000);
      const expiresAt = new Date(exp * 1000);
      await store.createSession({
        id: sessionId,
        organizationId: input.organizationId,
        identityId: input.identityId,
        method: input.method,
        createdAt: issuedAt,
        expiresAt,
      });
      const token = signSessionToken({ iss: deps.issuer, aud: input.organizationId, sub: input.identityId, sid: sessionId, iat, exp }, key);
      return { token, sessionId, organizationId: input.organizationId, identityId: input.identityId, issuedAt, expiresAt };
    },

    /**
     * Checks a session token: signature by a key of ours, issuer, expiry, and
     * that its session row exists and is not revoked. With `organizationId`,
     * a token of another organisation is refused too. Any failure is
     * unauthenticated with a reason (session_invalid, session_expired,
     * session_revoked).
     */
    async verifySessionToken(token: string, options: { organizationId?: string } = {}): Promise<VerifiedSession> {
      const parsed = parseSessionToken(token.trim());
      if (!parsed) throw unauthenticated("session_invalid", "the session token is not a well-formed ES256 JWT");
      const publicKey = await publicKeyOf(parsed.kid);
      if (!publicKey || !verifySignature(parsed, publicKey)) {
        throw unauthenticated("session_invalid", "the session token's signature does not verify");
      }
      const { iss, aud, sub, sid, iat, exp } = parsed.claims;
      if (iss !== deps.issuer || typeof aud !== "string" || typeof sub !== "string" || typeof sid !== "string") {
        throw unauthenticated("session_invalid", "the session token was not issued by this platform");
      }
      if (typeof iat !== "number" || typeof exp !== "number")
        throw unauthenticated("session_invalid", "the session token has no iat or exp");
      if (options.organizationId !== undefined && aud !== options.organizationId) {
        throw unauthenticated("session_invalid", "the session token belongs to another organisation");
      }
      const now = deps.clock();
      if (exp * 1000 <= now.getTime()) throw unauthenticated("session_expired", "the session has expired");
      const session = await deps.store.findSession(aud, sid);
      if (!session || session.identityId !== sub) throw unauthenticated("session_invalid", "the session does not exist");
      if (session.revokedAt !== null) throw unauthenticated("session_revoked", "the session has been revoked");
      if (session.expiresAt.getTime() <= now.getTime()) throw unauthenticated("session_expired", "the session has expired");
      return {
        organizationId: aud,
        identityId: sub,
        sessionId: sid,
        method: session.method,
        issuedAt: new Date(iat * 1000),
        expiresAt: session.expiresAt,
      };
    },

    /** Revokes one session of an organisation; false when it does not exist. */
    revokeSession(organizationId: string, sessionId: string): Promise<boolean> {
      return deps.store.revokeSession(organizationId, sessionId, deps.clock());
    },

    /**
     * The JSON Web Key Set (RFC 7517 5): the active key and every retired key
     * whose tokens may still be live. Creates the first key when there is none,
     * so verifiers can fetch the set before the first sign-in.
     */
    async publishedKeys(): Promise<{ keys: PublicJwk[] }> {
      const now = deps.clock();
      await activeKey(now);
      const keys = await deps.store.listSigningKeys(new Date(now.getTime() - retentionMs));
      return { keys: keys.map((key) => JSON.parse(key.publicJwk) as PublicJwk) };
    },

    /** Replaces the signing key now (operators, tests); the old one stays published while its tokens live. */
    async rotateSigningKey(): Promise<string> {
      const key = await createKey(deps.clock());
      active = key;
      return key.kid;
    },
  };
}

export type SessionIssuer = ReturnType<typeof createSessionIssuer>;
