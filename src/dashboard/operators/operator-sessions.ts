import { randomUUID } from "node:crypto";
import { hashToken, newOpaqueToken, systemRandom, type RandomSource } from "../../crypto/tokens.js";
import type { Clock } from "../../domain/clock.js";
import { DomainError, invalidArgument, type Violation } from "../../domain/errors.js";
import { invisibleCharacterProblem, normalizeIdentifier } from "../../domain/identity/identifiers.js";
import { createLimitsHousekeeping } from "../../domain/identity/limits.js";
import { createKeyedSerializer, identifierFailureLimit, lockoutRefusal, type LockoutPolicy } from "../../domain/identity/lockout.js";
import type { HashingClient, PasswordHasher } from "../../domain/identity/password-hasher.js";
import { checkNewPassword } from "../../domain/identity/password-policy.js";
import {
  createRefusalDelay,
  createSignInGate,
  createWindowLimiter,
  defaultSignInLimits,
  type SignInLimits,
} from "../../domain/identity/sign-in-limits.js";
import { isOwnerPlaceholderEmail } from "../../domain/tenancy/tenancy.js";
import type { Principal } from "../../interceptors/auth.js";
import { clientBucketOf } from "../../server/client-address.js";
import type { DashboardStore, OperatorAccountRecord, OperatorSessionRecord } from "./dashboard-store.js";
import type { IdentityStore } from "../../domain/identity/identity-store.js";
import type { Role } from "../../domain/tenancy/tenancy-store.js";

/** How long a dashboard session lasts without a request, and at most. */
export interface SessionLifetimes {
  idleSeconds: number;
  maxSeconds: number;
}

/**
 * OWASP Session Management Cheat Sheet: "Common idle timeouts ranges are 2-5
 * minutes for high-value applications and 15-30 minutes for low risk
 * applications"; an absolute timeout bounds a stolen cookie's use.
 */
export const defaultSessionLifetimes: SessionLifetimes = { idleSeconds: 30 * 60, maxSeconds: 12 * 3600 };

/** lastSeenAt is written at most this often (a write per request would be wasted). */
const touchResolutionMs = 60_000;
/** Ended sessions and expired passkey challenges are deleted at most this often (per instance), on a write. */
export const purgeEveryMs = 10 * 60_000;
/**
 * The lockout rule of password sign-in (src/domain/identity/lockout.ts), as
 * for end users: 5 failures within 15 minutes lock that e-mail address for
 * that client address; from other addresses the e-mail address only waits
 * growing delays. Passkeys and one-time sign-in links work whatever the failures.
 */
export const operatorLockout: LockoutPolicy = { threshold: 5, windowSeconds: 15 * 60 };
/** Operators' failures are kept with end users' (LoginFailure) under this scope instead of an organisation. */
export const operatorFailureScope = "dashboard";
const maxDisplayName = 100;
const maxEmail = 254;

export type DashboardPrincipal = Extract<Principal, { kind: "dashboard" }>;

export interface OperatorSessionsDeps {
  store: DashboardStore;
  /** Runs fn with a store bound to one transaction. */
  transaction<T>(fn: (store: DashboardStore) => Promise<T>): Promise<T>;
  /** The role of an account in an organisation (null: not a member). */
  findRole(organizationId: string, accountId: string): Promise<Role | null>;
  /** Adds a hit to a fixed-window counter shared by every instance; returns the window's count. */
  hitRateCounter(key: string, windowStart: Date): Promise<number>;
  /** Failed password sign-ins (shared by every instance), and their housekeeping. */
  failures: Pick<IdentityStore, "recentLoginFailures" | "recordLoginFailure" | "prune">;
  /** Bounds on unauthenticated work (default: defaultSignInLimits). */
  signInLimits?: Pick<SignInLimits, "concurrencyPerClient" | "dashboardPerMinute" | "refusalDelayMs">;
  hasher: PasswordHasher;
  clock: Clock;
  random?: RandomSource;
  lifetimes?: SessionLifetimes;
  /** Called when recording a session's last use fails; never fails the request. */
  onTouchError?: (error: unknown) => void;
  /** Called when deleting ended sessions fails; never fails the request. */
  onPurgeError?: (error: unknown) => void;
}

/** A session just started: the cookie value is returned once, only its hash is stored. */
export interface StartedSession {
  token: string;
  accountId: string;
  expiresAt: Date;
}

function unauthenticated(reason: string, message: string): DomainError {
  return new DomainError("unauthenticated", reason, message);
}

const signInAgain = () => unauthenticated("dashboard_session_missing", "sign in to the dashboard first (no live dashboard session)");

const invalidCredentials = () => unauthenticated("invalid_credentials", "the e-mail address or the password is wrong");

/**
 * Reads an e-mail address of a form: NFKC, trimmed, lower-cased (as
 * identifiers are), adding violations under `field`; control, format and
 * invisible characters (identifiers.ts) are refused.
 */
export function readEmail(raw: string, field: string, violations: Violation[]): string {
  const email = normalizeIdentifier(raw);
  const invisible = invisibleCharacterProblem(email);
  if (email.length === 0) violations.push({ field, description: "is required" });
  else if (invisible) violations.push({ field, description: invisible });
  else if (email.length > maxEmail || !/^[^\s@]+@[^\s@]+\.[^\s@]+$/u.test(email)) {
    violations.push({ field, description: "must be an e-mail address such as ops@example.com" });
  } else if (email.endsWith(".invalid")) {
    violations.push({ field, description: "must be a real e-mail address (.invalid addresses are placeholders)" });
  }
  return email;
}

/** Reads a display name: NFKC, trimmed, 1 to 100 characters, no control, format or invisible characters. */
export function readDisplayName(raw: string, field: string, violations: Violation[]): string {
  const name = raw.normalize("NFKC").trim();
  const invisible = invisibleCharacterProblem(name);
  if (name.length === 0) violations.push({ field, description: "is required" });
  else if ([...name].length > maxDisplayName) violations.push({ field, description: `must be at most ${maxDisplayName} characters` });
  else if (invisible) violations.push({ field, description: invisible });
  return name;
}

/**
 * The current password a signed-in operator gives to change their
 * credentials: required when the account has one (a session alone never
 * replaces a password), not asked when it has none (after a recovery sign-in).
 */
export function readCurrentPassword(account: Pick<OperatorAccountRecord, "passwordHash">, raw: string, violations: Violation[]): void {
  if (account.passwordHash !== null && raw.length === 0) {
    violations.push({ field: "current_password", description: "is required: give your account's current password" });
  }
}

/** A signed-in operator's account and session, as the dashboard principal names them. */
export interface SignedIn {
  accountId: string;
  sessionId: string;
}

/** Whether a browser's session token (if any) names a live session: what the sign-in page greets with. */
export type SignInState = "signed_out" | "ended" | "signed_in";

/**
 * Operators' dashboard sessions: the one-time setup of an account, password
 * sign-in, sign-out, and the session check every dashboard RPC runs (the
 * DashboardAuthenticator of the auth interceptor). Sessions are named by an
 * opaque token; how it travels (a cookie) is the HTTP side's business.
 */
export function createOperatorSessions(deps: OperatorSessionsDeps) {
  const random = deps.random ?? systemRandom;
  const lifetimes = deps.lifetimes ?? defaultSessionLifetimes;
  let lastPurge = Number.NEGATIVE_INFINITY;
  const signInLimits = { ...defaultSignInLimits, ...deps.signInLimits };
  const gate = createSignInGate(signInLimits);
  const delayRefusal = createRefusalDelay(signInLimits);
  /** Password sign-ins of one e-mail address run one at a time on this instance (each sees the failures before it). */
  const oneAtATime = createKeyedSerializer();
  const housekeeping = createLimitsHousekeeping({ store: deps.failures, onError: (error) => deps.onPurgeError?.(error) });

  const windowLimiter = createWindowLimiter(deps.hitRateCounter);

  /** The per-address limit of unauthenticated dashboard requests, counted in the database across instances. */
  async function limitClient(bucket: string, counted: boolean): Promise<void> {
    const key = `dashboard-auth:${bucket}`;
    const seconds = counted
      ? await windowLimiter.hit(key, deps.clock(), 60_000, signInLimits.dashboardPerMinute)
      : windowLimiter.knownOver(key, deps.clock(), 60_000);
    if (seconds !== null) {
      throw new DomainError(
        "resource_exhausted",
        "too_many_attempts",
        `too many sign-in requests from this address (${signInLimits.dashboardPerMinute} a minute); try again in ${seconds} s`,
        [],
        seconds,
      );
    }
  }

  /**
   * Purge on write: sessions that have ended (expired, or idle past the idle
   * limit, signed out or not) and expired passkey challenges are deleted when
   * a session or a challenge is created, at most every 10 minutes of the
   * clock. The rows are dead already (authentication refuses them); this
   * keeps the tables from growing. Any instance may do it; deleting twice is harmless.
   */
  async function purgeExpired(): Promise<void> {
    const now = deps.clock().getTime();
    if (now - lastPurge < purgeEveryMs && now >= lastPurge) return;
    lastPurge = now;
    try {
      await deps.store.purgeExpired(new Date(now), new Date(now - lifetimes.idleSeconds * 1000));
    } catch (error) {
      deps.onPurgeError?.(error);
    }
  }

  /** Creates a session; callers purge first, outside any transaction (the purge uses its own connection). */
  async function startSession(store: DashboardStore, accountId: string): Promise<StartedSession> {
    const token = newOpaqueToken(random);
    const now = deps.clock();
    const expiresAt = new Date(now.getTime() + lifetimes.maxSeconds * 1000);
    await store.createSession({ id: randomUUID(), accountId, hash: hashToken(token), createdAt: now, lastSeenAt: now, expiresAt });
    return { token, accountId, expiresAt };
  }

  /** Why a stored session no longer counts, or null while it is live. */
  function deadReason(session: OperatorSessionRecord, now: Date): string | null {
    if (session.revokedAt !== null) return "signed out";
    if (session.expiresAt.getTime() <= now.getTime()) return "expired";
    if (session.lastSeenAt.getTime() + lifetimes.idleSeconds * 1000 <= now.getTime()) return "idle too long";
    return null;
  }

  /** The live session and enabled person account of a cookie value. */
  async function liveSession(token: string | null): Promise<{ session: OperatorSessionRecord; account: OperatorAccountRecord }> {
    if (token === null) throw signInAgain();
    const session = await deps.store.findSessionByHash(hashToken(token));
    const now = deps.clock();
    if (!session) throw unauthenticated("dashboard_session_unknown", "this dashboard session does not exist: sign in again");
    const dead = deadReason(session, now);
    if (dead) throw unauthenticated("dashboard_session_expired", `this dashboard session has ended (${dead}): sign in again`);
    const account = await deps.store.findAccount(session.accountId);
    if (account?.kind !== "person" || account.disabledAt !== null) {
      throw unauthenticated("dashboard_session_expired", "this dashboard session's account is disabled");
    }
    return { session, account };
  }

  async function findUsableToken(token: string) {
    const found = await deps.store.findSetupToken(hashToken(token));
    if (!found) throw new DomainError("not_found", "setup_link_not_found", "this setup link does not exist: ask an admin for a new one");
    const now = deps.clock();
    if (found.usedAt !== null) {
      throw new DomainError(
        "failed_precondition",
        "setup_link_used",
        "this setup link has already been used: sign in, or ask an admin for a new one",
      );
    }
    if (found.expiresAt.getTime() <= now.getTime()) {
      throw new DomainError("failed_precondition", "setup_link_expired", "this setup link has expired: ask an admin for a new one");
    }
    const account = await deps.store.findAccount(found.accountId);
    // Setup links belong to organisation owners' placeholder accounts only (people join
    // through invitations): a link never sets a new password on an account that has one,
    // nor on one whose password a recovery sign-in removed.
    if (
      account?.kind !== "person" ||
      account.disabledAt !== null ||
      account.passwordHash !== null ||
      !isOwnerPlaceholderEmail(account.email)
    ) {
      throw new DomainError("not_found", "setup_link_not_found", "this setup link's account no longer exists");
    }
    return { found, account };
  }

  function hashingClientOf(clientAddress: string | undefined): HashingClient {
    return { organization: operatorFailureScope, client: clientBucketOf(clientAddress) };
  }

  /**
   * Checks an e-mail address's password under the lockout rule
   * (operatorLockout): an unknown address and a wrong password answer the
   * same 401 after the same work (a dummy hash is verified), and count as
   * failures of the address from this client. `known`: the account as the
   * caller read it already (its hash is the one checked).
   */
  async function checkPassword(email: string, password: string, clientAddress: string | undefined, known?: OperatorAccountRecord) {
    const bucket = clientBucketOf(clientAddress);
    const hashingClient = hashingClientOf(clientAddress);
    return oneAtATime(email, async () => {
      const now = deps.clock();
      const query = {
        identifierHash: hashToken(email),
        clientHash: hashToken(bucket),
        since: new Date(now.getTime() - operatorLockout.windowSeconds * 1000 + 1),
        threshold: operatorLockout.threshold,
        identifierLimit: identifierFailureLimit(operatorLockout.threshold),
      };
      const failures = await deps.failures.recentLoginFailures(operatorFailureScope, query);
      housekeeping(now.getTime());
      const refusal = lockoutRefusal(operatorLockout, failures, now, "e-mail address");
      if (refusal) throw refusal;
      const account = known ?? (await deps.store.findAccountByEmail(email));
      const found = account && account.kind === "person" && account.disabledAt === null ? account : null;
      const check = await deps.hasher.verify(found?.passwordHash ?? null, password, hashingClient);
      if (!check.ok || !found || found.passwordHash === null) {
        await deps.failures.recordLoginFailure({
          id: randomUUID(),
          organizationId: operatorFailureScope,
          identifierHash: query.identifierHash,
          clientHash: query.clientHash,
          createdAt: deps.clock(),
        });
        throw invalidCredentials();
      }
      return { account: { ...found, passwordHash: found.passwordHash }, needsRehash: check.needsRehash, hashingClient };
    });
  }

  /**
   * Checks the current password a signed-in operator gave (readCurrentPassword
   * asked for it) as a sign-in checks one, lockout included, against the
   * account as the caller read it; answers the hash it matched, or null when
   * the account has none. A wrong one is invalid_argument (wrong_password):
   * the session is fine, the input is not. Whether the hash is still the
   * account's is lockSignedIn's to check, in the transaction that changes it.
   */
  async function confirmPassword(account: OperatorAccountRecord, password: string, clientAddress: string | undefined) {
    if (account.passwordHash === null) return null;
    try {
      return (await checkPassword(account.email, password, clientAddress, account)).account.passwordHash;
    } catch (error) {
      if (error instanceof DomainError && error.reason === "invalid_credentials") {
        throw invalidArgument([{ field: "current_password", description: "is not your account's password" }], "wrong_password");
      }
      throw error;
    }
  }

  /**
   * Takes the account's lock in a transaction and checks that it is still an
   * enabled person's with the password hash a check before it matched
   * (`expected`, null for none; undefined: any); else throws `refused()`. Every change of an
   * account's credentials takes this lock first, so such changes and the
   * sessions they start or end happen one after another.
   */
  async function lockUnchanged(
    store: DashboardStore,
    accountId: string,
    expected: string | null | undefined,
    refused: () => DomainError,
  ): Promise<OperatorAccountRecord> {
    await store.lockAccount(accountId);
    const account = await store.findAccount(accountId);
    if (account?.kind !== "person" || account.disabledAt !== null) throw refused();
    if (expected !== undefined && account.passwordHash !== expected) throw refused();
    return account;
  }

  /**
   * lockUnchanged for a signed-in operator changing their credentials: the
   * session that asked must also still be live (a recovery or another change
   * may have ended it since the request was authenticated).
   */
  async function lockSignedIn(store: DashboardStore, signedIn: SignedIn, expected?: string | null): Promise<OperatorAccountRecord> {
    const account = await lockUnchanged(
      store,
      signedIn.accountId,
      expected,
      () => new DomainError("aborted", "credentials_changed", "your account's credentials changed meanwhile: sign in again and retry"),
    );
    const session = await store.findSession(signedIn.sessionId);
    if (!session || session.accountId !== signedIn.accountId || deadReason(session, deps.clock()) !== null) {
      throw unauthenticated("dashboard_session_expired", "this dashboard session has ended: sign in again");
    }
    return account;
  }

  return {
    lifetimes,
    purgeExpired,

    /**
     * Starts a session for an account whose credential the caller has just
     * verified (a passkey), in the caller's transaction (purge first, outside it).
     */
    startVerified: (store: DashboardStore, accountId: string) => startSession(store, accountId),

    /** What a setup link is for, without spending it: the invited e-mail (empty for the owner's placeholder) and name. */
    async inspectSetupLink(input: { token: string }): Promise<{ email: string; displayName: string }> {
      const token = input.token.trim();
      if (token.length === 0) throw invalidArgument([{ field: "token", description: "is required" }]);
      const { account } = await findUsableToken(token);
      return { email: account.email.endsWith(".invalid") ? "" : account.email, displayName: account.displayName };
    },

    /**
     * Sets up an account from its one-time link: e-mail, name and password
     * (argon2id), then signs it in. Of concurrent uses of one link exactly one succeeds.
     */
    async setUp(input: { token: string; email: string; displayName: string; password: string }): Promise<StartedSession> {
      const violations: Violation[] = [];
      const token = input.token.trim();
      if (token.length === 0) violations.push({ field: "token", description: "is required" });
      const email = readEmail(input.email, "email", violations);
      const displayName = readDisplayName(input.displayName, "display_name", violations);
      await checkNewPassword(input.password, "password", violations);
      if (violations.length > 0) throw invalidArgument(violations);
      const { account } = await findUsableToken(token);
      const passwordHash = await deps.hasher.hash(input.password);
      await purgeExpired();
      return deps.transaction(async (store) => {
        const now = deps.clock();
        if (!(await store.spendSetupToken(hashToken(token), now))) {
          throw new DomainError(
            "failed_precondition",
            "setup_link_used",
            "this setup link has just been used or has expired: sign in, or ask an admin for a new one",
          );
        }
        await store.setUpAccount(account.id, { email, displayName, passwordHash });
        return startSession(store, account.id);
      });
    },

    /**
     * Runs an unauthenticated dashboard request (sign-in, setup, passkey
     * sign-in, sign-in link) of a client address: first a free slot of the
     * address on this instance (else 429 at once), then the address's
     * per-minute count across instances (else 429), both before any hashing.
     */
    guard<T>(clientAddress: string | undefined, fn: () => Promise<T>): Promise<T> {
      const bucket = clientBucketOf(clientAddress);
      // An address already over its minute is refused from memory, before it takes a slot.
      return delayRefusal(
        limitClient(bucket, false).then(() =>
          gate.run(bucket, async () => {
            await limitClient(bucket, true);
            return fn();
          }),
        ),
      );
    },

    /**
     * Password sign-in. An unknown e-mail and a wrong password answer the same
     * 401 after the same work (a dummy hash is verified). Failures count
     * towards the lockout rule (operatorLockout): the e-mail address is locked
     * for the client that failed, and waits growing delays from elsewhere;
     * its passkeys and one-time links keep working.
     */
    async signIn(input: { email: string; password: string; clientAddress?: string | undefined }): Promise<StartedSession> {
      const violations: Violation[] = [];
      const email = normalizeIdentifier(input.email);
      const invisible = invisibleCharacterProblem(email);
      if (email.length === 0) violations.push({ field: "email", description: "is required" });
      else if (email.length > maxEmail) violations.push({ field: "email", description: `must be at most ${maxEmail} characters` });
      else if (invisible) violations.push({ field: "email", description: invisible });
      if (input.password.length === 0) violations.push({ field: "password", description: "is required" });
      if (violations.length > 0) throw invalidArgument(violations);
      const checked = await checkPassword(email, input.password, input.clientAddress);
      const rehashed = checked.needsRehash ? await deps.hasher.hash(input.password, checked.hashingClient) : null;
      await purgeExpired();
      return deps.transaction(async (store) => {
        // The password just verified must still be the account's: a recovery
        // sign-in or a new password committed meanwhile would otherwise leave
        // a session started with the old one alive.
        await lockUnchanged(store, checked.account.id, checked.account.passwordHash, invalidCredentials);
        if (rehashed) await store.setPasswordHash(checked.account.id, rehashed);
        return startSession(store, checked.account.id);
      });
    },

    /**
     * Sets a signed-in operator's own password and ends the account's other
     * sessions (its passkeys stay). With a password already set,
     * `currentPassword` must be it; after a recovery sign-in there is none.
     */
    async setPassword(
      signedIn: SignedIn,
      input: { currentPassword: string; newPassword: string; clientAddress?: string | undefined },
    ): Promise<void> {
      const account = await deps.store.findAccount(signedIn.accountId);
      if (!account) throw signInAgain();
      const violations: Violation[] = [];
      readCurrentPassword(account, input.currentPassword, violations);
      await checkNewPassword(input.newPassword, "new_password", violations);
      if (violations.length > 0) throw invalidArgument(violations);
      const expected = await confirmPassword(account, input.currentPassword, input.clientAddress);
      const passwordHash = await deps.hasher.hash(input.newPassword, hashingClientOf(input.clientAddress));
      await deps.transaction(async (store) => {
        await lockSignedIn(store, signedIn, expected);
        await store.setPasswordHash(signedIn.accountId, passwordHash);
        await store.revokeSessionsOf(signedIn.accountId, deps.clock(), signedIn.sessionId);
      });
    },

    confirmPassword,
    lockSignedIn,
    hashingClientOf,

    /** Ends the session of a cookie value (nothing to do when there is none). */
    async signOut(token: string | null): Promise<void> {
      if (token === null) return;
      const session = await deps.store.findSessionByHash(hashToken(token));
      if (session) await deps.store.revokeSession(session.id, deps.clock());
    },

    /** The signed-in operator's account, organisations and session times (for GetOperatorSession). */
    async describe(principal: DashboardPrincipal) {
      const [account, organizations, session] = await Promise.all([
        deps.store.findAccount(principal.accountId),
        deps.store.listOrganizationsOf(principal.accountId),
        deps.store.findSession(principal.sessionId),
      ]);
      if (!account || !session) throw signInAgain();
      const idleEnds = session.lastSeenAt.getTime() + lifetimes.idleSeconds * 1000;
      return {
        account,
        organizations,
        idleExpiresAt: new Date(Math.min(idleEnds, session.expiresAt.getTime())),
        expiresAt: session.expiresAt,
      };
    },

    /**
     * Whether a token (null: the browser sent none) names a live session,
     * without extending it (the session's last use is not recorded).
     */
    async signInState(token: string | null): Promise<SignInState> {
      if (token === null) return "signed_out";
      try {
        await liveSession(token);
        return "signed_in";
      } catch (error) {
        if (error instanceof DomainError && error.kind === "unauthenticated") return "ended";
        throw error;
      }
    },

    /**
     * The DashboardAuthenticator: a live session (else 401) and membership of
     * the organisation the request names (else 404). That the request came
     * from a dashboard page is the request guard's to check, before this runs.
     */
    async authenticate(token: string | null, organizationId: string | undefined): Promise<DashboardPrincipal> {
      const { session, account } = await liveSession(token);
      const now = deps.clock();
      if (now.getTime() - session.lastSeenAt.getTime() >= touchResolutionMs) {
        deps.store.touchSession(session.id, now).catch((error: unknown) => deps.onTouchError?.(error));
      }
      const base = {
        kind: "dashboard" as const,
        accountId: account.id,
        sessionId: session.id,
        actor: `${account.displayName} <${account.email}> (dashboard)`,
      };
      // RPCs that name no organisation (GetOperatorSession) act on the account alone.
      if (organizationId === undefined) return { ...base, organizationId: "", role: "member" };
      if (organizationId.trim() === "")
        throw invalidArgument([{ field: "organization_id", description: "is required" }], "organization_missing");
      const role = await deps.findRole(organizationId, account.id);
      if (role === null) {
        throw new DomainError(
          "not_found",
          "organization_not_found",
          `organisation "${organizationId}" does not exist or you are not a member of it`,
        );
      }
      return { ...base, organizationId, role };
    },
  };
}

export type OperatorSessions = ReturnType<typeof createOperatorSessions>;
