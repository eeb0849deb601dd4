import { sessionSigningKeyPurpose } from "../master-key/wrapped-purposes.js";
import { randomUUID } from "node:crypto";
import type { CryptoKey } from "jose";
import type { MasterKeyring } from "../../crypto/envelope.js";
import type { IdentityStore, SessionMethod, SessionSigningKeyInfo, SessionSigningKeyRecord } from "./identity-store.js";
import type { Publish } from "../changes/topic.js";
import { gatewayChanges, sessionSigningKeyChanges } from "../changes/topics.js";
import type { Clock } from "../clock.js";
import type { EventLog } from "../events/event-log.js";
import { DomainError } from "../errors.js";
import {
  generateSigningKey,
  importSigningKey,
  importVerificationKey,
  isHighS,
  readSessionTokenForm,
  signSessionToken,
  verifySessionTokenSignature,
  type PublicJwk,
} from "./session-token.js";
import { defaultSettings, maxSessionTtlSeconds } from "./settings.js";

export type SessionStore = Pick<
  IdentityStore,
  | "createSession"
  | "findSession"
  | "revokeSession"
  | "findSettings"
  | "listSigningKeys"
  | "findSigningKey"
  | "retireSigningKeys"
  | "findLiveSessionSigningKey"
  | "findSessionSigningKey"
  | "listPublishedSessionSigningKeys"
  | "createSessionSigningKey"
  | "retireSessionSigningKeys"
  | "latestSessionExpiry"
>;

export interface SessionIssuerDeps {
  store: SessionStore;
  /**
   * Runs fn in one transaction with a store bound to it; what it publishes
   * reaches every instance (keyChanged there, and the gateways' streams) once,
   * and only if, the transaction commits; `events` records in it.
   */
  transaction<T>(fn: (scope: { store: SessionStore; publish: Publish; events: EventLog }) => Promise<T>): Promise<T>;
  /** Wraps the signing keys' private halves at rest. */
  keyring: MasterKeyring;
  clock: Clock;
  /** The `iss` of every token: the platform's PUBLIC_URL. */
  issuer: string;
  /** Age at which an organisation's signing key is replaced (default 30 days). */
  rotationSeconds?: number;
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

/** A session whose token is signed and whose row is not written yet (see recordSession). */
export interface PreparedSession extends IssuedSession {
  method: SessionMethod;
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

/** One of an organisation's signing keys, as operators see it. */
export interface SigningKeyView {
  kid: string;
  createdAt: Date;
  /** Null while it signs the organisation's new sessions. */
  retiredAt: Date | null;
  /** When a retired key leaves the JWKS. */
  publishedUntil: Date | null;
}

/** What an operator's rotation did: the key that signs from now on, and the keys it replaced. */
export interface RotatedSigningKey {
  organizationId: string;
  key: SigningKeyView;
  retired: SigningKeyView[];
}

/**
 * Legacy keys (one key shared by every organisation, from before each
 * organisation had its own) stay published this long after they retire: a
 * token lives at most maxSessionTtlSeconds, plus a margin for verifiers'
 * clocks. Nothing records which tokens they signed, so this is the bound.
 */
export const legacyKeyRetentionSeconds = maxSessionTtlSeconds + 300;
const defaultRotationSeconds = 30 * 24 * 3600;
/** How long an instance trusts its cached view of an organisation's key (another instance, or the CLI, may rotate). */
const activeKeyRecheckMs = 60_000;
/**
 * An instance that missed a rotation's announcement (a CLI in another process
 * on SQLite) learns of it within activeKeyRecheckMs and a load; until then it
 * signs with the key it has. Twice the recheck bounds that window.
 */
const rotationNoticeMs = 2 * activeKeyRecheckMs;
/** Beyond the last expiry: verifiers whose clocks run behind (the 30 s leeway) and an in-flight sign-in. */
const publicationMarginMs = 300_000;

/** The master key's purpose: a wrapped key opens only as this organisation's key under this kid. */
const purposeOf = sessionSigningKeyPurpose;

function unauthenticated(reason: string, message: string): DomainError {
  return new DomainError("unauthenticated", reason, message);
}

const viewOf = (key: Pick<SessionSigningKeyInfo, "id" | "createdAt" | "retiredAt" | "publishedUntil">): SigningKeyView => ({
  kid: key.id,
  createdAt: key.createdAt,
  retiredAt: key.retiredAt,
  publishedUntil: key.publishedUntil,
});

interface ActiveKey {
  kid: string;
  privateKey: CryptoKey;
  createdAt: Date;
  /** When this instance last compared it with the database (0: look again before signing). */
  checkedAt: number;
}

interface VerificationKey {
  /** Null for a legacy key, shared by every organisation. */
  organizationId: string | null;
  publicKey: CryptoKey;
}

/**
 * Sessions as ES256 JWTs (docs/identity.md, "Sessions"): a row per sign-in, a
 * token with iss, aud = organisation, sub = identity, sid, iat and exp, and a
 * `kid` header naming a key published at /.well-known/jwks.json. The sign-in
 * flows of every method (password, magic link, passkey) and the sample plant
 * API share this module.
 *
 * Each organisation's sessions are signed by a key of its own, so rotating
 * one organisation's key (an admin's action) never touches another's. A key
 * is replaced when it is 30 days old or when an operator rotates it; a
 * retired key stays in the JWKS until the last token it signed has expired.
 * Keys from before per-organisation keys (legacy) sign nothing any more but
 * keep verifying their tokens until those expire.
 */
export function createSessionIssuer(deps: SessionIssuerDeps) {
  const rotationMs = (deps.rotationSeconds ?? defaultRotationSeconds) * 1000;
  const verifyKeys = new Map<string, VerificationKey>();
  const active = new Map<string, ActiveKey>();
  const loading = new Map<string, Promise<ActiveKey>>();
  /** Bumped by each rotation made here, so that a load begun before it cannot put the old key back. */
  const generation = new Map<string, number>();
  let legacyRetiredAt = Number.NEGATIVE_INFINITY;

  /**
   * Legacy keys sign nothing: the first look of each minute retires any still
   * active (an instance of an older release may have made one meanwhile); they
   * stay published for legacyKeyRetentionSeconds from then.
   */
  async function retireLegacyKeys(now: Date): Promise<void> {
    if (now.getTime() - legacyRetiredAt < activeKeyRecheckMs && now.getTime() >= legacyRetiredAt) return;
    legacyRetiredAt = now.getTime();
    await deps.store.retireSigningKeys(now);
  }

  /**
   * When a key retired now may leave the JWKS: every token it signed has a
   * session row, so the latest session expiry of the organisation bounds them;
   * an instance that has not heard of the rotation yet may sign for
   * rotationNoticeMs more, with the lifetime in force.
   */
  async function publicationEnd(store: SessionStore, organizationId: string, now: Date): Promise<Date> {
    const [latest, settings] = await Promise.all([store.latestSessionExpiry(organizationId), store.findSettings(organizationId)]);
    const ttlMs = (settings?.sessionTtlSeconds ?? defaultSettings.sessionTtlSeconds) * 1000;
    const laggard = now.getTime() + rotationNoticeMs + ttlMs;
    return new Date(Math.max(latest?.getTime() ?? 0, laggard) + publicationMarginMs);
  }

  /** Creates the organisation's new key and retires the others, in one transaction announced to every instance. */
  async function createKey(organizationId: string, now: Date, byOperator: boolean): Promise<{ key: ActiveKey; retired: SigningKeyView[] }> {
    const generated = await generateSigningKey();
    const retired = await deps.transaction(async ({ store, publish, events }) => {
      // The write comes first: on SQLite it takes the write lock (waiting for
      // another instance's writer) before this transaction reads anything; a
      // read first would pin a snapshot that such a writer makes stale, and
      // the write would then fail at once (SQLITE_BUSY).
      await store.createSessionSigningKey({
        id: generated.kid,
        organizationId,
        privateKeyEnc: deps.keyring.wrap(generated.privateKeyDer, purposeOf(organizationId, generated.kid)),
        masterKeyId: deps.keyring.currentId,
        publicJwk: JSON.stringify(generated.publicJwk),
        createdAt: now,
      });
      const publishedUntil = await publicationEnd(store, organizationId, now);
      const replaced = await store.retireSessionSigningKeys(organizationId, generated.kid, now, publishedUntil);
      publish(sessionSigningKeyChanges, organizationId);
      // Gateways follow the JWKS through their stream.
      publish(gatewayChanges, { organizationId, kind: "signing_keys" });
      // A rotation (by age or by an operator), not the organisation's first key.
      if (replaced.length > 0 || byOperator) {
        await events.record(organizationId, {
          type: "signing_key.rotated",
          data: { kid: generated.kid, retired_kids: replaced.map((key) => key.id) },
        });
      }
      return replaced.map((key) => ({ kid: key.id, createdAt: key.createdAt, retiredAt: now, publishedUntil }));
    });
    const publicKey = await importVerificationKey(generated.publicJwk);
    verifyKeys.set(generated.kid, { organizationId, publicKey });
    const privateKey = await importSigningKey(generated.privateKeyDer);
    return { key: { kid: generated.kid, privateKey, createdAt: now, checkedAt: now.getTime() }, retired };
  }

  async function loadActiveKey(organizationId: string, now: Date): Promise<ActiveKey> {
    await retireLegacyKeys(now);
    const live = await deps.store.findLiveSessionSigningKey(organizationId);
    if (!live || now.getTime() - live.createdAt.getTime() >= rotationMs) {
      try {
        return (await createKey(organizationId, now, false)).key;
      } catch (error) {
        // Another instance made the key at the same moment (SQLite may refuse the second writer): sign with that one.
        const made = await deps.store.findLiveSessionSigningKey(organizationId);
        if (!made || made.id === live?.id) throw error;
        return openKey(organizationId, made, now);
      }
    }
    return openKey(organizationId, live, now);
  }

  async function openKey(organizationId: string, row: SessionSigningKeyRecord, now: Date): Promise<ActiveKey> {
    const cached = active.get(organizationId);
    if (cached?.kid === row.id) return { ...cached, checkedAt: now.getTime() };
    const privateKey = await importSigningKey(deps.keyring.unwrap(row.privateKeyEnc, purposeOf(organizationId, row.id), row.masterKeyId));
    return { kid: row.id, privateKey, createdAt: row.createdAt, checkedAt: now.getTime() };
  }

  /** One load per organisation at a time per instance. */
  function refresh(organizationId: string, now: Date): Promise<ActiveKey> {
    let pending = loading.get(organizationId);
    if (!pending) {
      const startedIn = generation.get(organizationId) ?? 0;
      pending = loadActiveKey(organizationId, now)
        .then((key) => {
          if ((generation.get(organizationId) ?? 0) !== startedIn) return active.get(organizationId) ?? key;
          active.set(organizationId, key);
          return key;
        })
        .finally(() => loading.delete(organizationId));
      loading.set(organizationId, pending);
    }
    return pending;
  }

  /**
   * The key the organisation's new tokens are signed with: created at its
   * first use, rotated when it is old, and looked up again once a minute (or
   * when an announcement says it changed), in case another instance replaced it.
   */
  async function activeKey(organizationId: string, now: Date): Promise<ActiveKey> {
    const cached = active.get(organizationId);
    if (!cached || now.getTime() - cached.createdAt.getTime() >= rotationMs) return refresh(organizationId, now);
    if (now.getTime() - cached.checkedAt >= activeKeyRecheckMs || now.getTime() < cached.checkedAt) return refresh(organizationId, now);
    return cached;
  }

  async function verificationKeyOf(kid: string): Promise<VerificationKey | null> {
    const cached = verifyKeys.get(kid);
    if (cached) return cached;
    const own = await deps.store.findSessionSigningKey(kid);
    const row = own ?? (await deps.store.findSigningKey(kid));
    if (!row) return null;
    const key = {
      organizationId: own?.organizationId ?? null,
      publicKey: await importVerificationKey(JSON.parse(row.publicJwk) as PublicJwk),
    };
    verifyKeys.set(kid, key);
    return key;
  }

  return {
    /**
     * Signs a session token for an identity, before the transaction that
     * records it (recordSession): signing runs on WebCrypto's thread pool, and
     * a transaction held open across it would keep SQLite's write lock from
     * other connections that long. Loads (or creates) the organisation's key,
     * and looks whether another instance replaced it, so call it outside any
     * transaction.
     */
    async prepareSession(input: {
      organizationId: string;
      identityId: string;
      method: SessionMethod;
      ttlSeconds: number;
    }): Promise<PreparedSession> {
      const now = deps.clock();
      const key = await activeKey(input.organizationId, now);
      const iat = Math.floor(now.getTime() / 1000);
      const exp = iat + input.ttlSeconds;
      const sessionId = randomUUID();
      const token = await signSessionToken(
        { iss: deps.issuer, aud: input.organizationId, sub: input.identityId, sid: sessionId, iat, exp },
        key,
      );
      return { ...input, token, sessionId, issuedAt: new Date(iat * 1000), expiresAt: new Date(exp * 1000) };
    },

    /**
     * Signs an identity in with a prepared session: stores its row (through
     * `store`, which may be bound to the caller's transaction); the token
     * holds from then on.
     */
    async recordSession(prepared: PreparedSession, store: Pick<SessionStore, "createSession"> = deps.store): Promise<IssuedSession> {
      await store.createSession({
        id: prepared.sessionId,
        organizationId: prepared.organizationId,
        identityId: prepared.identityId,
        method: prepared.method,
        createdAt: prepared.issuedAt,
        expiresAt: prepared.expiresAt,
      });
      const { token, sessionId, organizationId, identityId, issuedAt, expiresAt } = prepared;
      return { token, sessionId, organizationId, identityId, issuedAt, expiresAt };
    },

    /**
     * Checks a session token: signed by a key of ours, verified by jose
     * (ES256, typ, iss, aud = the key's organisation, exp/nbf/iat with a
     * 30 s leeway), in its one encoding (canonical base64url, low s), then its session
     * row: it exists, is not revoked, and has not expired on this server's
     * clock (exactly: the leeway is for other clocks). With `organizationId`,
     * a token of another organisation is refused too. Any failure is
     * unauthenticated with a reason (session_invalid, session_expired,
     * session_revoked).
     */
    async verifySessionToken(token: string, options: { organizationId?: string } = {}): Promise<VerifiedSession> {
      const trimmed = token.trim();
      const form = readSessionTokenForm(trimmed);
      if (!form) throw unauthenticated("session_invalid", "the session token is not a well-formed ES256 JWT");
      const key = await verificationKeyOf(form.kid);
      if (!key) throw unauthenticated("session_invalid", "the session token's signature does not verify with any key of this platform");
      if (options.organizationId !== undefined && key.organizationId !== null && key.organizationId !== options.organizationId) {
        throw unauthenticated("session_invalid", "the session token belongs to another organisation");
      }
      const now = deps.clock();
      const verdict = await verifySessionTokenSignature(trimmed, key.publicKey, {
        issuer: deps.issuer,
        audience: key.organizationId ?? options.organizationId,
        now,
      });
      if (!verdict.ok) throw unauthenticated(verdict.reason, verdict.message);
      // (r, n − s) verifies as well as (r, s) (jose accepts both): only the
      // low-s form is ours. Legacy keys signed either form before tokens were
      // canonicalised, so their tokens (live for at most 30 days) keep both.
      if (key.organizationId !== null && isHighS(form.signature)) {
        throw unauthenticated("session_invalid", "the session token's signature is not in its canonical form (high s)");
      }
      const { aud, sub, sid, iat } = verdict.claims;
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

    /**
     * The JSON Web Key Set (RFC 7517 5): every organisation's live key and
     * each retired key until its last token has expired, then the legacy keys
     * still in their retention. Verifiers pick a key by kid and check `aud`.
     */
    /** The JWKS: every organisation's published keys, or one organisation's (what its gateways need), with the legacy shared ones. */
    async publishedKeys(organizationId?: string): Promise<{ keys: PublicJwk[] }> {
      const now = deps.clock();
      await retireLegacyKeys(now);
      const [own, legacy] = await Promise.all([
        deps.store.listPublishedSessionSigningKeys(now, organizationId),
        deps.store.listSigningKeys(new Date(now.getTime() - legacyKeyRetentionSeconds * 1000)),
      ]);
      return { keys: [...own, ...legacy].map((key) => JSON.parse(key.publicJwk) as PublicJwk) };
    },

    /** The organisation's published keys: the live one first, then retired ones, the most recently retired first. */
    async signingKeysOf(organizationId: string): Promise<SigningKeyView[]> {
      const keys = await deps.store.listPublishedSessionSigningKeys(deps.clock(), organizationId);
      const order = (key: SessionSigningKeyInfo) => key.retiredAt?.getTime() ?? Number.POSITIVE_INFINITY;
      return keys.sort((a, b) => order(b) - order(a) || b.createdAt.getTime() - a.createdAt.getTime()).map(viewOf);
    },

    /**
     * Replaces the organisation's signing key now (operators): the new kid
     * signs from now on, here at once and on every other instance when the
     * announcement reaches it; the old key stays published until its last
     * token has expired. Other organisations' keys are untouched.
     */
    async rotateSigningKey(organizationId: string): Promise<RotatedSigningKey> {
      const now = deps.clock();
      const { key, retired } = await createKey(organizationId, now, true);
      // A load that began before this commit may have read the old key: it must not put it back.
      generation.set(organizationId, (generation.get(organizationId) ?? 0) + 1);
      active.set(organizationId, key);
      return { organizationId, key: { kid: key.kid, createdAt: now, retiredAt: null, publishedUntil: null }, retired };
    },

    /**
     * Told that an organisation's key changed elsewhere (undefined: maybe any,
     * after a gap in the announcements): its next sign-in looks again first.
     */
    keyChanged(organizationId: string | undefined): void {
      for (const [id, key] of active) {
        if (organizationId === undefined || id === organizationId) active.set(id, { ...key, checkedAt: 0 });
      }
    },
  };
}

export type SessionIssuer = ReturnType<typeof createSessionIssuer>;
