import { randomUUID } from "node:crypto";
import { hashToken, newOpaqueToken, systemRandom, type RandomSource } from "../crypto/tokens.js";
import type { Clock } from "../domain/clock.js";
import { DomainError, invalidArgument, type Violation } from "../domain/errors.js";
import type { DashboardStore, MemberRecord } from "../storage/dashboard-store.js";
import type { Role, TenancyStore } from "../storage/tenancy-store.js";
import { readDisplayName, readEmail } from "./operator-sessions.js";
import { keysetOf, type PageRequest } from "./paging.js";

/** A store bound to one transaction: the dashboard's queries and the tenancy writes it reuses. */
export interface MembersTransactionStores {
  dashboard: DashboardStore;
  tenancy: Pick<TenancyStore, "createAccount" | "addMembership" | "createSetupToken">;
}

export interface MembersDeps {
  store: DashboardStore;
  transaction<T>(fn: (stores: MembersTransactionStores) => Promise<T>): Promise<T>;
  clock: Clock;
  random?: RandomSource;
  /** PUBLIC_URL: setup links point at its dashboard. */
  publicUrl: string;
}

/** Setup links of invited members last as long as the owner's (`gatehouse init`). */
export const setupLinkLifetimeSeconds = 7 * 24 * 3600;

/** The one-time setup link of an account (the form `gatehouse init` prints). */
export function setupUrlOf(publicUrl: string, token: string): string {
  return `${publicUrl}/dashboard/setup#token=${token}`;
}

export interface SetupLink {
  setupUrl: string;
  expiresAt: Date;
}

const lastAdmin = () =>
  new DomainError("failed_precondition", "last_admin", "an organisation keeps at least one admin: make another member admin first");

const memberNotFound = (accountId: string) =>
  new DomainError("not_found", "member_not_found", `account ${accountId} is not a member of this organisation`);

/**
 * Operators of an organisation: invitation by a one-time setup link, roles and
 * removal. Role changes and removals run under the organisation's row lock, so
 * that two admins demoting each other at once cannot leave none.
 */
export function createMembers(deps: MembersDeps) {
  const random = deps.random ?? systemRandom;

  async function issueLink(store: Pick<TenancyStore, "createSetupToken">, accountId: string): Promise<SetupLink> {
    const token = newOpaqueToken(random);
    const expiresAt = new Date(deps.clock().getTime() + setupLinkLifetimeSeconds * 1000);
    await store.createSetupToken({ id: randomUUID(), accountId, hash: hashToken(token), expiresAt });
    return { setupUrl: setupUrlOf(deps.publicUrl, token), expiresAt };
  }

  async function requireMember(store: DashboardStore, organizationId: string, accountId: string): Promise<MemberRecord> {
    const member = await store.findMember(organizationId, accountId);
    if (!member) throw memberNotFound(accountId);
    return member;
  }

  return {
    /** A page of members by e-mail address: read with keysetOf, cut with pageOf and cursors.members. */
    async list(organizationId: string, page: PageRequest<string>): Promise<MemberRecord[]> {
      return deps.store.listMembers(organizationId, keysetOf(page));
    },

    /**
     * Makes a person a member with a role. A new e-mail address gets an account
     * and a one-time setup link; an operator who already signs in elsewhere just
     * gains the membership (no link); an account that was removed from every
     * organisation is re-opened and must set a new password through a new link.
     */
    async invite(
      organizationId: string,
      input: { email: string; displayName: string; role: Role | null },
    ): Promise<{ member: MemberRecord; setupLink: SetupLink | null }> {
      const violations: Violation[] = [];
      const email = readEmail(input.email, "email", violations);
      const displayName = readDisplayName(input.displayName, "display_name", violations);
      if (input.role === null) violations.push({ field: "role", description: "must be ROLE_ADMIN or ROLE_MEMBER" });
      if (violations.length > 0) throw invalidArgument(violations);
      const role = input.role as Role;
      const alreadyMember = () =>
        new DomainError("already_exists", "member_exists", "this person is already a member of this organisation", [
          { field: "email", description: "is already a member of this organisation" },
        ]);
      const existing = await deps.store.findAccountByEmail(email);
      if (existing && existing.kind !== "person") throw alreadyMember();
      try {
        return await deps.transaction(async ({ dashboard, tenancy }) => {
          if (existing) {
            if (await dashboard.findMember(organizationId, existing.id)) throw alreadyMember();
            await tenancy.addMembership({ organizationId, accountId: existing.id, role });
            let setupLink: SetupLink | null = null;
            if (existing.disabledAt !== null || existing.passwordHash === null) {
              await dashboard.reopenAccount(existing.id);
              await dashboard.voidSetupTokensOf(existing.id, deps.clock());
              setupLink = await issueLink(tenancy, existing.id);
            }
            return { member: await requireMember(dashboard, organizationId, existing.id), setupLink };
          }
          const accountId = randomUUID();
          await tenancy.createAccount({ id: accountId, email, displayName, kind: "person" });
          await tenancy.addMembership({ organizationId, accountId, role });
          return { member: await requireMember(dashboard, organizationId, accountId), setupLink: await issueLink(tenancy, accountId) };
        });
      } catch (error) {
        // The same person invited twice at once: one transaction won, the other rolled back.
        if (!(error instanceof DomainError) && (await deps.store.findAccountByEmail(email)) !== null) throw alreadyMember();
        throw error;
      }
    },

    /** A new setup link for a member who has not set up their account; earlier links stop working. */
    async reissueSetupLink(organizationId: string, accountId: string): Promise<SetupLink> {
      return deps.transaction(async ({ dashboard, tenancy }) => {
        const member = await requireMember(dashboard, organizationId, accountId);
        if (!member.pending) {
          throw new DomainError(
            "failed_precondition",
            "member_active",
            "this member has already set up their account: they sign in with their password",
          );
        }
        await dashboard.voidSetupTokensOf(accountId, deps.clock());
        return issueLink(tenancy, accountId);
      });
    },

    async changeRole(organizationId: string, accountId: string, role: Role | null): Promise<MemberRecord> {
      if (role === null) throw invalidArgument([{ field: "role", description: "must be ROLE_ADMIN or ROLE_MEMBER" }]);
      return deps.transaction(async ({ dashboard }) => {
        await dashboard.lockOrganization(organizationId);
        const member = await requireMember(dashboard, organizationId, accountId);
        if (member.role === role) return member;
        if (member.role === "admin" && (await dashboard.countAdmins(organizationId)) <= 1) throw lastAdmin();
        await dashboard.setRole(organizationId, accountId, role);
        return { ...member, role };
      });
    },

    /** Removes a member; an account left without any organisation is disabled, signed out and loses its passkeys. */
    async remove(organizationId: string, accountId: string): Promise<void> {
      await deps.transaction(async ({ dashboard }) => {
        await dashboard.lockOrganization(organizationId);
        const member = await requireMember(dashboard, organizationId, accountId);
        if (member.role === "admin" && (await dashboard.countAdmins(organizationId)) <= 1) throw lastAdmin();
        await dashboard.removeMembership(organizationId, accountId);
        if ((await dashboard.countMembershipsOf(accountId)) === 0) {
          const now = deps.clock();
          await dashboard.disableAccount(accountId, now);
          await dashboard.revokeSessionsOf(accountId, now);
          await dashboard.voidSetupTokensOf(accountId, now);
          await dashboard.removeOperatorPasskeysOf(accountId);
        }
      });
    },
  };
}

export type Members = ReturnType<typeof createMembers>;
