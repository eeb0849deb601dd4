import { randomUUID } from "node:crypto";
import { hashToken, newOpaqueToken, systemRandom, type RandomSource } from "../../crypto/tokens.js";
import type { Clock } from "../../domain/clock.js";
import { DomainError, invalidArgument, type Violation } from "../../domain/errors.js";
import type { PasswordHasher } from "../../domain/identity/password-hasher.js";
import { checkNewPassword } from "../../domain/identity/password-policy.js";
import type { InvitationRecord } from "./dashboard-store.js";
import type { Role } from "../../domain/tenancy/tenancy-store.js";
import { endAccountCredentials } from "./end-account-credentials.js";
import type { MembersTransactionStores } from "./members.js";
import type { OperatorSessions, SignedIn, StartedSession } from "./operator-sessions.js";
import { readCurrentPassword, readDisplayName, readEmail } from "./operator-sessions.js";
import { keysetOf, type PageRequest } from "./paging.js";

export interface InvitationsDeps {
  store: MembersTransactionStores["dashboard"];
  transaction<T>(fn: (stores: MembersTransactionStores) => Promise<T>): Promise<T>;
  /**
   * Starts the invitee's dashboard session inside the accepting transaction;
   * checks the current password and the session of an operator who accepts.
   */
  sessions: Pick<OperatorSessions, "startVerified" | "purgeExpired" | "confirmPassword" | "lockSignedIn" | "hashingClientOf">;
  hasher: PasswordHasher;
  clock: Clock;
  random?: RandomSource;
  /** PUBLIC_URL: invitation links point at its dashboard. */
  publicUrl: string;
}

/** An invitation's link works for 7 days, as the owner's setup link (`gatehouse init`) does. */
export const invitationLifetimeSeconds = 7 * 24 * 3600;

/** The one-time link of an invitation. The token is in the fragment, which browsers never send to a server. */
export function invitationUrlOf(publicUrl: string, token: string): string {
  return `${publicUrl}/dashboard/invitation#token=${token}`;
}

/** An invitation with its link, shown once. */
export interface IssuedInvitation {
  invitation: InvitationRecord;
  url: string;
}

/** What the invitation page shows before anything is accepted. */
export interface InvitationPreview {
  organizationName: string;
  email: string;
  displayName: string;
  role: Role;
  invitedBy: string;
  expiresAt: Date;
}

/**
 * One answer for every token that cannot be accepted: unknown, expired,
 * revoked, spent, or addressed to another account. Telling them apart would
 * tell a guesser which tokens once existed, and to whom.
 */
const invitationNotValid = () =>
  new DomainError(
    "not_found",
    "invitation_not_found",
    "this invitation link cannot be used (unknown, expired, revoked, already used, or for another account): ask the admin who invited you for a new link",
  );

const invitationNotFound = (id: string) =>
  new DomainError("not_found", "invitation_not_found", `invitation ${id} does not exist in this organisation`);

const alreadyMember = () =>
  new DomainError("already_exists", "member_exists", "this person is already a member of this organisation", [
    { field: "email", description: "is already a member of this organisation" },
  ]);

const accountExists = (email: string) =>
  new DomainError(
    "already_exists",
    "account_exists",
    `an account with the address ${email} already exists: sign in as ${email} on this page to accept the invitation ` +
      "(without its password, ask the platform's operator for a recovery sign-in link: gatehouse operators sign-in-link)",
  );

const memberExists = (organizationName: string) =>
  new DomainError(
    "already_exists",
    "member_exists",
    `you are already a member of ${organizationName}: the invitation stays until an admin revokes it`,
  );

function readToken(raw: string, violations: Violation[]): string {
  const token = raw.trim();
  if (token.length === 0) violations.push({ field: "token", description: "is required" });
  else if (token.length > 128) violations.push({ field: "token", description: "must be the token of an invitation link" });
  return token;
}

/**
 * Invitations of people to organisations. Inviting never creates, changes or
 * looks up an account: the service sends no e-mail, so nobody has proven they
 * own an address, and whoever held a link for an address could otherwise take
 * over the account of that address (and every organisation it belongs to).
 * Instead an invitation is a row of the inviting organisation with a one-time
 * token, and accepting it needs BOTH that token (which only that
 * organisation's admins could hand out) and being the account of the
 * invitation's address: signed in as it (AcceptInvitation), or creating it on
 * the invitation page when no account has the address. Nothing one
 * organisation does to its invitations reaches another's.
 *
 * An invitation link is a credential for joining one organisation, never
 * proof of owning the address: the account an earlier link made may be in the
 * hands of whoever held that link (another organisation's admin included).
 * So joining a further organisation replaces the account's credentials: the
 * acceptance sets a new password and ends every other session and passkey of
 * the account, and only the person who held this link keeps a way in
 * (docs/security.md, "The dashboard and operator accounts").
 */
export function createInvitations(deps: InvitationsDeps) {
  const random = deps.random ?? systemRandom;

  /** A new link's token, valid for 7 days from `now` (one reading of the clock, so an invitation lasts exactly that). */
  function newToken(now: Date): { token: string; tokenHash: string; expiresAt: Date } {
    const token = newOpaqueToken(random);
    return { token, tokenHash: hashToken(token), expiresAt: new Date(now.getTime() + invitationLifetimeSeconds * 1000) };
  }

  /** The invitation of a token, if it can still be accepted now. */
  async function usable(store: InvitationsDeps["store"], token: string) {
    const found = await store.findInvitationByToken(hashToken(token));
    if (!found || found.expiresAt.getTime() <= deps.clock().getTime()) return null;
    return found;
  }

  return {
    /**
     * InviteMember: an invitation of the organisation and its link, answered
     * the same way whether or not an account has the address. The only
     * refusals are about this organisation's own rows: the address is already
     * a member here, or already invited here.
     */
    async invite(
      organizationId: string,
      invitedById: string,
      input: { email: string; displayName: string; role: Role | null },
    ): Promise<IssuedInvitation> {
      const violations: Violation[] = [];
      const email = readEmail(input.email, "email", violations);
      const displayName = readDisplayName(input.displayName, "display_name", violations);
      if (input.role === null) violations.push({ field: "role", description: "must be ROLE_ADMIN or ROLE_MEMBER" });
      if (violations.length > 0) throw invalidArgument(violations);
      const role = input.role as Role;
      const now = deps.clock();
      const { token, tokenHash, expiresAt } = newToken(now);
      const invitation: InvitationRecord = {
        id: randomUUID(),
        organizationId,
        email,
        displayName,
        role,
        invitedById,
        invitedBy: "",
        createdAt: now,
        expiresAt,
      };
      try {
        await deps.transaction(async ({ dashboard, events }) => {
          if (await dashboard.isMemberByEmail(organizationId, email)) throw alreadyMember();
          const { invitedBy: _derived, ...row } = invitation;
          await dashboard.createInvitation({ ...row, tokenHash });
          await events.record(organizationId, {
            type: "member.invited",
            data: { invitation_id: invitation.id, email, role, invited_by: invitedById },
          });
        });
      } catch (error) {
        if (error instanceof DomainError && error.reason === "invitation_exists") {
          throw new DomainError(
            "already_exists",
            "invitation_exists",
            `${email} already has an invitation to this organisation: re-issue its link or revoke it`,
            [{ field: "email", description: "already has an invitation to this organisation" }],
          );
        }
        throw error;
      }
      const stored = await deps.store.findInvitation(organizationId, invitation.id);
      return { invitation: stored ?? invitation, url: invitationUrlOf(deps.publicUrl, token) };
    },

    /** A page of pending invitations by e-mail: read with keysetOf, cut with pageOf and cursors.invitations. */
    list(organizationId: string, page: PageRequest<string>): Promise<InvitationRecord[]> {
      return deps.store.listInvitations(organizationId, keysetOf(page));
    },

    /**
     * A new link for an invitation of this organisation; its earlier link
     * stops working. The admin who re-issues it is its inviter from now on:
     * they hold the link.
     */
    async reissue(organizationId: string, invitationId: string, reissuedById: string): Promise<IssuedInvitation> {
      const { token, tokenHash, expiresAt } = newToken(deps.clock());
      if (!(await deps.store.replaceInvitationToken(organizationId, invitationId, { tokenHash, expiresAt, invitedById: reissuedById }))) {
        throw invitationNotFound(invitationId);
      }
      const invitation = await deps.store.findInvitation(organizationId, invitationId);
      // Revoked between the two statements: the link just made is already void.
      if (!invitation) throw invitationNotFound(invitationId);
      return { invitation, url: invitationUrlOf(deps.publicUrl, token) };
    },

    /** Withdraws an invitation of this organisation. */
    async revoke(organizationId: string, invitationId: string): Promise<void> {
      if (!(await deps.store.deleteInvitation(organizationId, invitationId))) throw invitationNotFound(invitationId);
    },

    /** What an invitation link is for, without spending it. */
    async inspect(input: { token: string }): Promise<InvitationPreview> {
      const violations: Violation[] = [];
      const token = readToken(input.token, violations);
      if (violations.length > 0) throw invalidArgument(violations);
      const found = await usable(deps.store, token);
      if (!found) throw invitationNotValid();
      return {
        organizationName: found.organizationName,
        email: found.email,
        displayName: found.displayName,
        role: found.role,
        invitedBy: found.invitedBy,
        expiresAt: found.expiresAt,
      };
    },

    /**
     * The invitation page's "create your account": when no account has the
     * invitation's address, creates it (the invitation's address, a name and a
     * password) and accepts this one invitation, then signs it in. An account
     * disabled for belonging to no organisation any more is re-opened the same
     * way (new password, its passkeys gone). Spending the token, creating the
     * account, the membership and the session are one transaction: of
     * concurrent uses of one token exactly one succeeds.
     */
    async createAccount(input: {
      token: string;
      displayName: string;
      password: string;
    }): Promise<StartedSession & { organizationId: string }> {
      const violations: Violation[] = [];
      const token = readToken(input.token, violations);
      const displayName = readDisplayName(input.displayName, "display_name", violations);
      await checkNewPassword(input.password, "password", violations);
      if (violations.length > 0) throw invalidArgument(violations);
      const invitation = await usable(deps.store, token);
      if (!invitation) throw invitationNotValid();
      const passwordHash = await deps.hasher.hash(input.password);
      await deps.sessions.purgeExpired();
      return deps.transaction(async ({ dashboard, tenancy, events }) => {
        const now = deps.clock();
        if (!(await dashboard.spendInvitation(invitation.id, hashToken(token), now))) throw invitationNotValid();
        const existing = await dashboard.findAccountByEmail(invitation.email);
        let accountId: string;
        if (existing === null) {
          accountId = randomUUID();
          try {
            await dashboard.createPersonAccount({ id: accountId, email: invitation.email, displayName, passwordHash });
          } catch (error) {
            // Another invitation for the address created the account meanwhile.
            if (error instanceof DomainError && error.reason === "email_taken") throw accountExists(invitation.email);
            throw error;
          }
        } else {
          // Only an account that belongs nowhere any more may be claimed anew;
          // anything else is someone's account: they sign in as it.
          const reopenable =
            existing.kind === "person" && existing.disabledAt !== null && (await dashboard.countMembershipsOf(existing.id)) === 0;
          if (!reopenable || !(await dashboard.reopenAccount(existing.id, { displayName, passwordHash }))) {
            throw accountExists(invitation.email);
          }
          await endAccountCredentials(dashboard, existing.id, { at: now, keepSessionId: null });
          accountId = existing.id;
        }
        await tenancy.addMembership({ organizationId: invitation.organizationId, accountId, role: invitation.role });
        await events.record(invitation.organizationId, {
          type: "member.joined",
          data: { account_id: accountId, email: invitation.email, role: invitation.role },
        });
        const session = await deps.sessions.startVerified(dashboard, accountId);
        return { ...session, organizationId: invitation.organizationId };
      });
    },

    /**
     * AcceptInvitation: the signed-in account joins the inviting organisation
     * with the invitation's role, if it is the account of the invitation's
     * address, and its credentials are replaced: `newPassword` becomes its
     * password, every other session ends and its passkeys go, in the
     * transaction that spends the token and makes the membership. With a
     * password set, `currentPassword` must be it (a session alone never
     * replaces a password).
     */
    async accept(
      signedIn: SignedIn,
      input: { token: string; currentPassword: string; newPassword: string; clientAddress?: string | undefined },
    ): Promise<{ organizationId: string; name: string; role: Role }> {
      const violations: Violation[] = [];
      const token = readToken(input.token, violations);
      const account = await deps.store.findAccount(signedIn.accountId);
      if (account) readCurrentPassword(account, input.currentPassword, violations);
      await checkNewPassword(input.newPassword, "new_password", violations);
      if (violations.length > 0) throw invalidArgument(violations);
      // Tokens this account cannot accept answer before any password is hashed, all alike.
      const invitation = await usable(deps.store, token);
      if (!invitation || !account || account.disabledAt !== null || account.email !== invitation.email) throw invitationNotValid();
      if (await deps.store.findMember(invitation.organizationId, account.id)) throw memberExists(invitation.organizationName);
      const expected = await deps.sessions.confirmPassword(account, input.currentPassword, input.clientAddress);
      const passwordHash = await deps.hasher.hash(input.newPassword, deps.sessions.hashingClientOf(input.clientAddress));
      return deps.transaction(async ({ dashboard, tenancy, events }) => {
        const now = deps.clock();
        // Spent first: a concurrent use of the token waits here for the first
        // to finish and then finds nothing, so it answers as any spent token.
        if (!(await dashboard.spendInvitation(invitation.id, hashToken(token), now))) throw invitationNotValid();
        // Then the account's lock, as every change of its credentials takes it.
        await deps.sessions.lockSignedIn(dashboard, signedIn, expected);
        // Rolls the spend back: the invitation stays.
        if (await dashboard.findMember(invitation.organizationId, account.id)) throw memberExists(invitation.organizationName);
        await dashboard.setPasswordHash(account.id, passwordHash);
        await endAccountCredentials(dashboard, account.id, { at: now, keepSessionId: signedIn.sessionId });
        await tenancy.addMembership({ organizationId: invitation.organizationId, accountId: account.id, role: invitation.role });
        await events.record(invitation.organizationId, {
          type: "member.joined",
          data: { account_id: account.id, email: invitation.email, role: invitation.role },
        });
        return { organizationId: invitation.organizationId, name: invitation.organizationName, role: invitation.role };
      });
    },
  };
}

export type Invitations = ReturnType<typeof createInvitations>;
