import { randomUUID } from "node:crypto";
import { hashToken, newOpaqueToken, systemRandom, type RandomSource } from "../../crypto/tokens.js";
import type { Clock } from "../../domain/clock.js";
import { DomainError, invalidArgument, type Violation } from "../../domain/errors.js";
import type { DashboardStore } from "./dashboard-store.js";
import type { SignInLinkStore } from "./sign-in-link-store.js";
import { endAccountCredentials } from "./end-account-credentials.js";
import { readEmail, type OperatorSessions, type StartedSession } from "./operator-sessions.js";

/** How long a sign-in link works by default, and at most. */
export const signInLinkTtlSeconds = { default: 15 * 60, max: 24 * 3600 } as const;

export interface OperatorSignInLinksDeps {
  links: SignInLinkStore;
  accounts: Pick<DashboardStore, "findAccountByEmail" | "findAccount">;
  /** Runs fn with stores bound to one transaction. */
  transaction<T>(fn: (stores: { links: SignInLinkStore; dashboard: DashboardStore }) => Promise<T>): Promise<T>;
  clock: Clock;
  random?: RandomSource;
  /** PUBLIC_URL: links point at its dashboard. */
  publicUrl: string;
}

/** A link just issued: shown once; only the hash of its token is stored. */
export interface IssuedSignInLink {
  /** `{PUBLIC_URL}/dashboard/sign-in#link=<token>` (the token in the fragment, which browsers never send). */
  url: string;
  token: string;
  accountId: string;
  expiresAt: Date;
}

function unusable(reason: "sign_in_link_not_found" | "sign_in_link_used" | "sign_in_link_expired"): DomainError {
  if (reason === "sign_in_link_not_found") {
    return new DomainError("not_found", reason, "this sign-in link does not exist: ask for a new one (gatehouse operators sign-in-link)");
  }
  const why = reason === "sign_in_link_used" ? "has already been used" : "has expired";
  return new DomainError("failed_precondition", reason, `this sign-in link ${why}: ask for a new one`);
}

/**
 * One-time dashboard sign-in links: the recovery of an operator account,
 * issued by a headless operator command acting on the data store (whoever can
 * run it holds the store already, and gives the link to the person of the
 * address): for an operator whose password is locked, throttled or
 * forgotten, and for a person who finds their address's account made by
 * someone else. A link signs its account in once, within its lifetime (15
 * minutes by default), whatever the password failures; it is 32 random bytes,
 * stored only as a hash.
 *
 * A recovery is the one credential of an address that no organisation can
 * hand out, so it wins over every other: signing in with it ends every other
 * session of the account and removes its password and passkeys, and the
 * person signing in sets their own (docs/security.md, "The dashboard and
 * operator accounts").
 */
export function createOperatorSignInLinks(deps: OperatorSignInLinksDeps) {
  const random = deps.random ?? systemRandom;
  return {
    /** Issues a link for the account of an e-mail address (a person's, enabled; with or without a password). */
    async issue(input: { email: string; ttlSeconds?: number }): Promise<IssuedSignInLink> {
      const violations: Violation[] = [];
      const email = readEmail(input.email, "email", violations);
      const ttlSeconds = input.ttlSeconds ?? signInLinkTtlSeconds.default;
      if (!Number.isInteger(ttlSeconds) || ttlSeconds < 60 || ttlSeconds > signInLinkTtlSeconds.max) {
        violations.push({ field: "ttl_seconds", description: `must be a whole number from 60 to ${signInLinkTtlSeconds.max}` });
      }
      if (violations.length > 0) throw invalidArgument(violations);
      const account = await deps.accounts.findAccountByEmail(email);
      if (account?.kind !== "person") {
        throw new DomainError("not_found", "account_not_found", "no operator account has this e-mail address");
      }
      if (account.disabledAt !== null) {
        throw new DomainError(
          "failed_precondition",
          "account_not_usable",
          "this operator account is disabled (it belongs to no organisation): it needs an invitation, not a sign-in link",
        );
      }
      const now = deps.clock();
      // Expired links are of no use to anyone: they go when new ones are made.
      await deps.links.purgeLinks(now);
      const token = newOpaqueToken(random);
      const expiresAt = new Date(now.getTime() + ttlSeconds * 1000);
      await deps.links.createLink({ id: randomUUID(), accountId: account.id, hash: hashToken(token), createdAt: now, expiresAt });
      const url = `${new URL(deps.publicUrl).origin}/dashboard/sign-in#link=${token}`;
      return { url, token, accountId: account.id, expiresAt };
    },

    /**
     * Spends a link and starts a dashboard session for its account, the only
     * credential it keeps: every other session ends, the password and the
     * passkeys are removed and the account's other unused links are void, in
     * the same transaction. Of concurrent uses exactly one succeeds (one
     * conditional update decides).
     */
    async signIn(sessions: Pick<OperatorSessions, "startVerified" | "purgeExpired">, input: { token: string }): Promise<StartedSession> {
      const token = input.token.trim();
      if (token.length === 0) throw invalidArgument([{ field: "token", description: "is required" }]);
      if (token.length > 64) throw unusable("sign_in_link_not_found");
      const hash = hashToken(token);
      await sessions.purgeExpired();
      return deps.transaction(async (stores) => {
        const link = await stores.links.findLink(hash);
        if (!link) throw unusable("sign_in_link_not_found");
        // The account's lock before the link's: every change of an account's
        // credentials takes it first, and a recovery voids the account's other
        // links, so two recoveries of one account at once run one after the
        // other instead of each holding a link the other wants (a deadlock on
        // PostgreSQL).
        await stores.dashboard.lockAccount(link.accountId);
        const now = deps.clock();
        const accountId = await stores.links.spendLink(hash, now);
        if (accountId === null) {
          const found = await stores.links.findLink(hash);
          throw unusable(found && found.usedAt !== null ? "sign_in_link_used" : "sign_in_link_expired");
        }
        const account = await stores.dashboard.findAccount(accountId);
        if (account?.kind !== "person" || account.disabledAt !== null) {
          throw new DomainError("failed_precondition", "account_not_usable", "this sign-in link's account is disabled");
        }
        await stores.dashboard.setPasswordHash(accountId, null);
        await endAccountCredentials(stores.dashboard, accountId, { at: now, keepSessionId: null });
        await stores.links.voidLinksOf(accountId, now);
        return sessions.startVerified(stores.dashboard, accountId);
      });
    },
  };
}

export type OperatorSignInLinks = ReturnType<typeof createOperatorSignInLinks>;
