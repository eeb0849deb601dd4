import { randomUUID } from "node:crypto";
import { hashToken, newOpaqueToken, systemRandom, type RandomSource } from "../../crypto/tokens.js";
import type { IdentityRecord, IdentityStore, OneTimeTokenKind, SessionMethod } from "./identity-store.js";
import type { Publish } from "../changes/topic.js";
import { gatewayChanges } from "../changes/topics.js";
import type { Clock } from "../clock.js";
import type { SessionRevocationReason } from "../events/catalogue.js";
import type { EventLog } from "../events/event-log.js";
import { DomainError, invalidArgument, type Violation } from "../errors.js";
import { readIdentifier, readUuid } from "./identifiers.js";
import { clientBucketOf } from "../../net/ip-address.js";
import { createLimits } from "./limits.js";
import type { HashingClient, PasswordHasher } from "./password-hasher.js";
import { checkNewPassword } from "./password-policy.js";
import type { IssuedSession, PreparedSession, SessionIssuer, VerifiedSession } from "./sessions.js";
import { effectiveSettings, type IdentitySettings } from "./settings.js";
import { createRefusalDelay, createSignInGate, defaultSignInLimits, type SignInLimits } from "./sign-in-limits.js";

/** What one transaction of the identity area hands its function. */
export interface IdentityScope {
  store: IdentityStore;
  /** Records the change's events in the transaction (docs/events.md). */
  events: EventLog;
  /** Notifies every instance once the transaction commits (revoked sessions reach the gateways). */
  publish: Publish;
}

export interface IdentityDeps {
  store: IdentityStore;
  /** Runs fn with a store bound to one transaction. */
  transaction<T>(fn: (scope: IdentityScope) => Promise<T>): Promise<T>;
  sessions: SessionIssuer;
  hasher: PasswordHasher;
  clock: Clock;
  random?: RandomSource;
  /** PUBLIC_URL: the default relying-party ID and origin. */
  publicUrl: string;
  /** Housekeeping failures (never fail a request). */
  onError?: (error: unknown) => void;
  /** Bounds on unauthenticated work (default: defaultSignInLimits). */
  signInLimits?: Pick<SignInLimits, "concurrencyPerClient" | "refusalDelayMs">;
}

/** Who calls: the organisation of the key, its kind, and the client's address when known. */
export interface Caller {
  organizationId: string;
  credential: "publishable" | "secret";
  /** The client's IP address (client-side calls are limited per address). */
  address?: string | undefined;
}

/** A signed-in identity: what every sign-in answers. */
export interface SignedIn {
  identityId: string;
  session: IssuedSession;
}

/** A one-time token for the caller to deliver (magic link, password reset). */
export interface DeliverableToken {
  token: string;
  expiresAt: Date;
}

/** How fresh a session must be to reset the password with a publishable key (docs/identity.md, "Password reset"). */
export const resetSessionMaxAgeSeconds = 15 * 60;

function assertValid(violations: Violation[]): void {
  if (violations.length > 0) throw invalidArgument(violations);
}

function requiredText(value: string, field: string, violations: Violation[]): string {
  if (value.length === 0) violations.push({ field, description: "is required" });
  return value;
}

const wrongCredentials = () => new DomainError("unauthenticated", "invalid_credentials", "the identifier or the password is wrong");

const tokenWords: Record<OneTimeTokenKind, { name: string; reason: string }> = {
  magic_link: { name: "magic link", reason: "magic_link" },
  password_reset: { name: "password-reset token", reason: "reset_token" },
};

/**
 * Identity flows of docs/identity.md: passwords, magic links,
 * password reset and sessions. Passkey ceremonies build on signIn,
 * settingsOf, limitClient and findOrCreateIdentity.
 */
export function createIdentity(deps: IdentityDeps) {
  const random = deps.random ?? systemRandom;
  const limits = createLimits({ store: deps.store, clock: deps.clock, ...(deps.onError ? { onError: deps.onError } : {}) });
  const gate = createSignInGate(deps.signInLimits ?? defaultSignInLimits);
  const delayRefusal = createRefusalDelay(deps.signInLimits ?? defaultSignInLimits);

  /**
   * A client-side (publishable-key) call waits for a free slot of its client
   * address before it costs a query or a hash (sign-in-limits.ts); the
   * organisation's backend (secret key) is not gated.
   */
  function gated<A, T>(fn: (caller: Caller, input: A) => Promise<T>): (caller: Caller, input: A) => Promise<T> {
    return (caller, input) => {
      if (caller.credential !== "publishable") return fn(caller, input);
      return delayRefusal(
        (async () => {
          // An address this instance already saw over its minute is refused from memory, before it takes a slot.
          if (caller.address) limits.refuseKnownClient(caller.organizationId, caller.address);
          return gate.run(clientBucketOf(caller.address), () => fn(caller, input));
        })(),
      );
    };
  }

  /** Whose turn a password computation waits for: the organisation and the client address (or its backend). */
  function hashingClient(caller: Caller): HashingClient {
    return {
      organization: caller.organizationId,
      client: caller.credential === "publishable" ? clientBucketOf(caller.address) : "backend",
    };
  }

  async function settingsOf(organizationId: string): Promise<IdentitySettings> {
    return effectiveSettings(await deps.store.findSettings(organizationId), deps.publicUrl);
  }

  function requirePassword(settings: IdentitySettings): void {
    if (!settings.password) {
      throw new DomainError(
        "permission_denied",
        "password_auth_disabled",
        "password authentication is disabled for this organisation (an operator enables it in the identity settings)",
      );
    }
  }

  function requireMagicLinks(settings: IdentitySettings): void {
    if (!settings.magicLinks) {
      throw new DomainError("permission_denied", "magic_links_disabled", "magic links are disabled for this organisation");
    }
  }

  /** The per-IP limit; it applies to client-side (publishable-key) calls, whose address is the user's. */
  async function limitClient(caller: Caller, settings: IdentitySettings): Promise<void> {
    if (caller.credential === "publishable" && caller.address) {
      await limits.checkClientAddress(caller.organizationId, caller.address, settings);
    }
  }

  /**
   * Signs the session token of a sign-in. Outside any transaction: signing
   * must not hold one open (sessions.ts, prepareSession).
   */
  function prepareSignIn(
    organizationId: string,
    identityId: string,
    method: SessionMethod,
    settings: Pick<IdentitySettings, "sessionTtlSeconds">,
  ): Promise<PreparedSession> {
    return deps.sessions.prepareSession({ organizationId, identityId, method, ttlSeconds: settings.sessionTtlSeconds });
  }

  /** Records a prepared sign-in's session and its session.created event, in the caller's transaction. */
  async function signIn(
    prepared: PreparedSession,
    scope: { store: Pick<IdentityStore, "createSession">; events: EventLog },
  ): Promise<SignedIn> {
    const session = await deps.sessions.recordSession(prepared, scope.store);
    await scope.events.record(prepared.organizationId, {
      type: "session.created",
      data: {
        identity_id: prepared.identityId,
        session_id: prepared.sessionId,
        method: prepared.method,
        expires_at: prepared.expiresAt.toISOString(),
      },
    });
    return { identityId: prepared.identityId, session };
  }

  /** Revokes sessions in the caller's transaction: their events, and the notice that reaches every gateway at commit. */
  async function revokedIn(
    scope: IdentityScope,
    organizationId: string,
    identityId: string,
    sessionIds: readonly string[],
    reason: SessionRevocationReason,
  ): Promise<void> {
    if (sessionIds.length === 0) return;
    for (const sessionId of sessionIds) {
      await scope.events.record(organizationId, {
        type: "session.revoked",
        data: { identity_id: identityId, session_id: sessionId, reason },
      });
    }
    scope.publish(gatewayChanges, { organizationId, kind: "sessions" });
  }

  /** Revokes one session of the organisation (null when it does not exist; [] when it was revoked already). */
  async function revokeOne(organizationId: string, sessionId: string): Promise<string[] | null> {
    return deps.transaction(async (scope) => {
      const session = await scope.store.findSession(organizationId, sessionId);
      if (!session) return null;
      if (!(await scope.store.revokeSession(organizationId, sessionId, deps.clock()))) return [];
      await revokedIn(scope, organizationId, session.identityId, [sessionId], "revoked");
      return [sessionId];
    });
  }

  async function findOrCreateIdentity(organizationId: string, identifier: string): Promise<IdentityRecord> {
    const existing = await deps.store.findIdentityByIdentifier(organizationId, identifier);
    if (existing) return existing;
    const created: IdentityRecord = { id: randomUUID(), organizationId, identifier, createdAt: deps.clock() };
    try {
      await deps.transaction(async ({ store, events }) => {
        await store.createIdentity(created);
        await events.record(organizationId, {
          type: "identity.created",
          data: { identity_id: created.id, identifier, method: "magic_link" },
        });
      });
      return created;
    } catch (error) {
      // Created meanwhile by a concurrent request (on any instance): use that one.
      if (!(error instanceof DomainError && error.reason === "identity_exists")) throw error;
      const winner = await deps.store.findIdentityByIdentifier(organizationId, identifier);
      if (!winner) throw error;
      return winner;
    }
  }

  async function issueToken(kind: OneTimeTokenKind, identity: IdentityRecord, ttlSeconds: number): Promise<DeliverableToken> {
    const token = newOpaqueToken(random);
    const now = deps.clock();
    const expiresAt = new Date(now.getTime() + ttlSeconds * 1000);
    await deps.store.createOneTimeToken({
      id: randomUUID(),
      organizationId: identity.organizationId,
      identityId: identity.id,
      kind,
      hash: hashToken(token),
      createdAt: now,
      expiresAt,
    });
    return { token, expiresAt };
  }

  /** Finds an unspent, unexpired token of the caller's organisation, or says exactly why not. */
  async function findToken(kind: OneTimeTokenKind, organizationId: string, hash: string) {
    const found = await deps.store.findOneTimeToken(hash);
    const words = tokenWords[kind];
    if (!found || found.organizationId !== organizationId || found.kind !== kind) {
      throw new DomainError("not_found", `${words.reason}_not_found`, `this ${words.name} does not exist`);
    }
    return found;
  }

  function unusable(kind: OneTimeTokenKind, token: { spentAt: Date | null; expiresAt: Date }, now: Date): DomainError | null {
    const words = tokenWords[kind];
    if (token.spentAt !== null) {
      return new DomainError("failed_precondition", `${words.reason}_spent`, `this ${words.name} has already been used; request a new one`);
    }
    if (token.expiresAt.getTime() <= now.getTime()) {
      return new DomainError("failed_precondition", `${words.reason}_expired`, `this ${words.name} has expired; request a new one`);
    }
    return null;
  }

  /** Spends a token inside a transaction: the one conditional update decides; a loser learns why. */
  async function spendIn(tx: IdentityStore, kind: OneTimeTokenKind, organizationId: string, hash: string): Promise<void> {
    const now = deps.clock();
    if (await tx.spendOneTimeToken(organizationId, hash, kind, now)) return;
    const again = await tx.findOneTimeToken(hash);
    throw (
      (again && unusable(kind, again, now)) ??
      new DomainError("not_found", `${tokenWords[kind].reason}_not_found`, `this ${tokenWords[kind].name} does not exist`)
    );
  }

  const flows = {
    settingsOf,
    limitClient,
    prepareSignIn,
    signIn,
    findOrCreateIdentity,
    sessions: deps.sessions,

    /** Creates an identity with a password and signs it in. */
    async registerPassword(caller: Caller, input: { identifier: string; password: string }): Promise<SignedIn> {
      const settings = await settingsOf(caller.organizationId);
      requirePassword(settings);
      await limitClient(caller, settings);
      const violations: Violation[] = [];
      const identifier = readIdentifier(input.identifier, "identifier", violations);
      await checkNewPassword(input.password, "password", violations);
      assertValid(violations);
      if (await deps.store.findIdentityByIdentifier(caller.organizationId, identifier)) {
        throw new DomainError("already_exists", "identity_exists", "an identity with this identifier already exists");
      }
      const hash = await deps.hasher.hash(input.password, hashingClient(caller));
      const prepared = await prepareSignIn(caller.organizationId, randomUUID(), "password", settings);
      return deps.transaction(async (scope) => {
        const identity: IdentityRecord = {
          id: prepared.identityId,
          organizationId: caller.organizationId,
          identifier,
          createdAt: deps.clock(),
        };
        await scope.store.createIdentity(identity);
        await scope.store.savePasswordHash(caller.organizationId, identity.id, hash, identity.createdAt);
        await scope.events.record(caller.organizationId, {
          type: "identity.created",
          data: { identity_id: identity.id, identifier, method: "password" },
        });
        return signIn(prepared, scope);
      });
    },

    /**
     * Signs in with identifier and password. An unknown identifier and a wrong
     * password answer the same 401 after the same work (a dummy hash is
     * verified); a hash made with older parameters is replaced.
     */
    async loginPassword(caller: Caller, input: { identifier: string; password: string }): Promise<SignedIn> {
      const violations: Violation[] = [];
      const identifier = readIdentifier(input.identifier, "identifier", violations);
      requiredText(input.password, "password", violations);
      const { identityId, settings, needsRehash } = await limits.oneAtATime(caller.organizationId, identifier, async () => {
        // One query for the settings, the identity, its hash and its recent
        // failures, whether or not the identifier exists.
        const query = limits.failureQuery(caller.organizationId, identifier, caller.address);
        const context = await deps.store.findLoginContext(caller.organizationId, identifier, query);
        const effective = effectiveSettings(context.settings, deps.publicUrl);
        requirePassword(effective);
        await limitClient(caller, effective);
        assertValid(violations);
        const attempt = await limits.beginLogin(caller.organizationId, effective, { query, failures: context.failures });
        // The same hashing work for an unknown identifier: a dummy hash is verified.
        const verdict = await deps.hasher.verify(context.hash, input.password, hashingClient(caller));
        if (!verdict.ok || context.identityId === null) {
          await attempt.failed();
          throw wrongCredentials();
        }
        return { identityId: context.identityId, settings: effective, needsRehash: verdict.needsRehash };
      });
      if (needsRehash) {
        const rehashed = await deps.hasher.hash(input.password, hashingClient(caller));
        await deps.store.savePasswordHash(caller.organizationId, identityId, rehashed, deps.clock());
      }
      const prepared = await prepareSignIn(caller.organizationId, identityId, "password", settings);
      return deps.transaction((scope) => signIn(prepared, scope));
    },

    /**
     * Sets a new password. A publishable-key caller proves itself with a
     * session of that identity issued within the last 15 minutes; a secret-key
     * caller (the organisation's backend) needs none. Every other session of
     * the identity is revoked.
     */
    async resetPassword(
      caller: Caller,
      input: { identityId: string; newPassword: string; sessionToken: string },
    ): Promise<{ identityId: string }> {
      const settings = await settingsOf(caller.organizationId);
      requirePassword(settings);
      await limitClient(caller, settings);
      const violations: Violation[] = [];
      const identityId = readUuid(input.identityId, "identity_id", violations);
      await checkNewPassword(input.newPassword, "new_password", violations);
      assertValid(violations);
      let keep: string | null = null;
      if (caller.credential === "publishable") keep = await requireFreshSession(caller.organizationId, identityId, input.sessionToken);
      const identity = await deps.store.findIdentity(caller.organizationId, identityId);
      if (!identity) throw new DomainError("not_found", "identity_not_found", `identity ${identityId} does not exist`);
      const hash = await deps.hasher.hash(input.newPassword, hashingClient(caller));
      await deps.transaction(async (scope) => {
        const now = deps.clock();
        await scope.store.savePasswordHash(caller.organizationId, identityId, hash, now);
        const revoked = await scope.store.revokeLiveSessionsOf(caller.organizationId, identityId, keep, now);
        await scope.store.spendOneTimeTokensOf(caller.organizationId, identityId, "password_reset", now);
        await scope.events.record(caller.organizationId, { type: "password.changed", data: { identity_id: identityId, method: "reset" } });
        await revokedIn(scope, caller.organizationId, identityId, revoked, "password_changed");
      });
      await limits.clearFailures(caller.organizationId, identity.identifier);
      return { identityId };
    },

    /** Issues a one-time password-reset token for the backend to deliver. */
    async requestPasswordReset(caller: Caller, input: { identifier: string }): Promise<DeliverableToken> {
      const settings = await settingsOf(caller.organizationId);
      requirePassword(settings);
      const violations: Violation[] = [];
      const identifier = readIdentifier(input.identifier, "identifier", violations);
      assertValid(violations);
      const identity = await deps.store.findIdentityByIdentifier(caller.organizationId, identifier);
      if (!identity) throw new DomainError("not_found", "identity_not_found", "no identity has this identifier");
      await limits.checkIssuance("password_reset", caller.organizationId, identifier, settings);
      return issueToken("password_reset", identity, settings.magicLinkTtlSeconds);
    },

    /** Spends a password-reset token and sets the new password; every session of the identity is revoked. */
    async completePasswordReset(caller: Caller, input: { token: string; newPassword: string }): Promise<{ identityId: string }> {
      const settings = await settingsOf(caller.organizationId);
      requirePassword(settings);
      await limitClient(caller, settings);
      const violations: Violation[] = [];
      const token = requiredText(input.token.trim(), "token", violations);
      await checkNewPassword(input.newPassword, "new_password", violations);
      assertValid(violations);
      const tokenHash = hashToken(token);
      const found = await findToken("password_reset", caller.organizationId, tokenHash);
      const early = unusable("password_reset", found, deps.clock());
      if (early) throw early;
      const hash = await deps.hasher.hash(input.newPassword, hashingClient(caller));
      await deps.transaction(async (scope) => {
        await spendIn(scope.store, "password_reset", caller.organizationId, tokenHash);
        const now = deps.clock();
        await scope.store.savePasswordHash(caller.organizationId, found.identityId, hash, now);
        const revoked = await scope.store.revokeLiveSessionsOf(caller.organizationId, found.identityId, null, now);
        await scope.store.spendOneTimeTokensOf(caller.organizationId, found.identityId, "password_reset", now);
        await scope.events.record(caller.organizationId, {
          type: "password.changed",
          data: { identity_id: found.identityId, method: "reset_token" },
        });
        await revokedIn(scope, caller.organizationId, found.identityId, revoked, "password_changed");
      });
      const identity = await deps.store.findIdentity(caller.organizationId, found.identityId);
      if (identity) await limits.clearFailures(caller.organizationId, identity.identifier);
      return { identityId: found.identityId };
    },

    /** Issues a magic-link token, creating the identity when absent. Gatehouse delivers nothing. */
    async generateMagicLink(caller: Caller, input: { identifier: string }): Promise<DeliverableToken> {
      const settings = await settingsOf(caller.organizationId);
      requireMagicLinks(settings);
      const violations: Violation[] = [];
      const identifier = readIdentifier(input.identifier, "identifier", violations);
      assertValid(violations);
      await limits.checkIssuance("magic_link", caller.organizationId, identifier, settings);
      const identity = await findOrCreateIdentity(caller.organizationId, identifier);
      return issueToken("magic_link", identity, settings.magicLinkTtlSeconds);
    },

    /** Spends a magic-link token and signs its identity in; of concurrent calls exactly one succeeds. */
    async verifyMagicLink(caller: Caller, input: { token: string }): Promise<SignedIn> {
      const settings = await settingsOf(caller.organizationId);
      requireMagicLinks(settings);
      await limitClient(caller, settings);
      const violations: Violation[] = [];
      const token = requiredText(input.token.trim(), "token", violations);
      assertValid(violations);
      const tokenHash = hashToken(token);
      const found = await findToken("magic_link", caller.organizationId, tokenHash);
      const early = unusable("magic_link", found, deps.clock());
      if (early) throw early;
      const prepared = await prepareSignIn(caller.organizationId, found.identityId, "magic_link", settings);
      return deps.transaction(async (scope) => {
        await spendIn(scope.store, "magic_link", caller.organizationId, tokenHash);
        return signIn(prepared, scope);
      });
    },

    /** Checks a session token of the caller's organisation: signature, expiry and revocation. */
    async validateSession(caller: Caller, input: { token: string }) {
      const violations: Violation[] = [];
      const token = requiredText(input.token.trim(), "token", violations);
      assertValid(violations);
      return deps.sessions.verifySessionToken(token, { organizationId: caller.organizationId });
    },

    /**
     * Operators (the dashboard): revokes one session of an identity of the
     * organisation, or, with an empty sessionId, every live one. The tokens
     * stop validating at once and the revocation is announced like any other
     * (the store of identityFor tells every instance's gateways). Answers how
     * many sessions this call revoked (0 when they were revoked already).
     */
    async revokeIdentitySessions(organizationId: string, input: { identityId: string; sessionId: string }): Promise<{ revoked: number }> {
      const violations: Violation[] = [];
      const identityId = readUuid(input.identityId, "identity_id", violations);
      const all = input.sessionId.trim() === "";
      const sessionId = all ? "" : readUuid(input.sessionId, "session_id", violations);
      assertValid(violations);
      if (!(await deps.store.findIdentity(organizationId, identityId))) {
        throw new DomainError("not_found", "identity_not_found", `identity ${identityId} does not exist`);
      }
      if (all) {
        return deps.transaction(async (scope) => {
          const revoked = await scope.store.revokeLiveSessionsOf(organizationId, identityId, null, deps.clock());
          await revokedIn(scope, organizationId, identityId, revoked, "revoked");
          return { revoked: revoked.length };
        });
      }
      const session = await deps.store.findSession(organizationId, sessionId);
      if (!session || session.identityId !== identityId) {
        throw new DomainError("not_found", "session_not_found", `session ${sessionId} of this identity does not exist`);
      }
      if (session.revokedAt !== null) return { revoked: 0 };
      return { revoked: ((await revokeOne(organizationId, sessionId)) ?? []).length };
    },

    /** Revokes one session; its token stops validating at once. Revoking a revoked session is a no-op. */
    async revokeSession(caller: Caller, input: { sessionId: string }): Promise<void> {
      const violations: Violation[] = [];
      const sessionId = readUuid(input.sessionId, "session_id", violations);
      assertValid(violations);
      if ((await revokeOne(caller.organizationId, sessionId)) === null) {
        throw new DomainError("not_found", "session_not_found", `session ${sessionId} does not exist`);
      }
    },

    /**
     * Deletes an identity of the organisation (backend, DeleteIdentity; operators, the
     * dashboard): its password, passkeys and one-time tokens go, its live sessions are
     * revoked (gateways refuse their tokens at once). not_found when there is none.
     */
    async deleteIdentity(organizationId: string, input: { identityId: string }): Promise<{ revokedSessions: number }> {
      const violations: Violation[] = [];
      const identityId = readUuid(input.identityId, "identity_id", violations);
      assertValid(violations);
      return deps.transaction(async (scope) => {
        const now = deps.clock();
        const revoked = await scope.store.revokeLiveSessionsOf(organizationId, identityId, null, now);
        if (!(await scope.store.deleteIdentity(organizationId, identityId))) {
          throw new DomainError("not_found", "identity_not_found", `identity ${identityId} does not exist`);
        }
        await revokedIn(scope, organizationId, identityId, revoked, "identity_deleted");
        await scope.events.record(organizationId, { type: "identity.deleted", data: { identity_id: identityId } });
        return { revokedSessions: revoked.length };
      });
    },

    /** An identity of the organisation, or null (operators' reads). */
    findIdentity: (organizationId: string, identityId: string) => deps.store.findIdentity(organizationId, identityId),
    /** A session of the organisation, or null (operators' reads). */
    findSession: (organizationId: string, sessionId: string) => deps.store.findSession(organizationId, sessionId),
  };

  // Every flow that checks a password or spends a token an end user holds runs behind the per-address gate.
  return {
    ...flows,
    registerPassword: gated(flows.registerPassword),
    loginPassword: gated(flows.loginPassword),
    resetPassword: gated(flows.resetPassword),
    completePasswordReset: gated(flows.completePasswordReset),
    verifyMagicLink: gated(flows.verifyMagicLink),
  };

  /** The session a publishable-key reset presents: valid, of that identity, at most 15 minutes old. Returns its id. */
  async function requireFreshSession(organizationId: string, identityId: string, token: string): Promise<string> {
    const refuse = (why: string) =>
      new DomainError(
        "permission_denied",
        "fresh_session_required",
        `resetting a password with a publishable key needs session_token, a session of this identity issued within the last 15 minutes: ${why}`,
      );
    if (token.trim().length === 0) throw refuse("none was given");
    let session: VerifiedSession;
    try {
      session = await deps.sessions.verifySessionToken(token, { organizationId });
    } catch (error) {
      if (error instanceof DomainError && error.kind === "unauthenticated") throw refuse(error.message);
      throw error;
    }
    if (session.identityId !== identityId) throw refuse("the session belongs to another identity");
    if (deps.clock().getTime() - session.issuedAt.getTime() > resetSessionMaxAgeSeconds * 1000) {
      throw refuse("the session is older than 15 minutes; sign in again");
    }
    return session.sessionId;
  }
}

export type Identity = ReturnType<typeof createIdentity>;
