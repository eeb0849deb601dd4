import type { Clock } from "../../domain/clock.js";
import { DomainError, invalidArgument } from "../../domain/errors.js";
import type { EventLog } from "../../domain/events/event-log.js";
import type { DashboardStore, MemberRecord } from "./dashboard-store.js";
import type { Role, TenancyStore } from "../../domain/tenancy/tenancy-store.js";
import { endAccountCredentials } from "./end-account-credentials.js";
import { keysetOf, type PageRequest } from "./paging.js";

/** A store bound to one transaction: the dashboard's queries and the tenancy writes it reuses. */
export interface MembersTransactionStores {
  dashboard: DashboardStore;
  tenancy: Pick<TenancyStore, "addMembership">;
  /** Records the change's events in the transaction (docs/events.md). */
  events: EventLog;
}

export interface MembersDeps {
  store: DashboardStore;
  transaction<T>(fn: (stores: MembersTransactionStores) => Promise<T>): Promise<T>;
  clock: Clock;
}

const lastAdmin = () =>
  new DomainError("failed_precondition", "last_admin", "an organisation keeps at least one admin: make another member admin first");

const memberNotFound = (accountId: string) =>
  new DomainError("not_found", "member_not_found", `account ${accountId} is not a member of this organisation`);

/**
 * Operators of an organisation: listing, roles and removal (people join
 * through invitations: invitations.ts). Every operation names the account
 * within the organisation, so an account of another organisation is as unknown
 * as one that does not exist. Role changes and removals run under the
 * organisation's row lock, so that two admins demoting each other at once
 * cannot leave none.
 */
export function createMembers(deps: MembersDeps) {
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

    /** Changes a member's role; an admin made member loses the invitations whose link they made. */
    async changeRole(organizationId: string, accountId: string, role: Role | null): Promise<MemberRecord> {
      if (role === null) throw invalidArgument([{ field: "role", description: "must be ROLE_ADMIN or ROLE_MEMBER" }]);
      return deps.transaction(async ({ dashboard }) => {
        await dashboard.lockOrganization(organizationId);
        const member = await requireMember(dashboard, organizationId, accountId);
        if (member.role === role) return member;
        if (member.role === "admin" && (await dashboard.countAdmins(organizationId)) <= 1) throw lastAdmin();
        await dashboard.setRole(organizationId, accountId, role);
        // A demoted admin keeps no way back in: the links they were shown stop working.
        if (member.role === "admin") await dashboard.deleteInvitationsBy(organizationId, accountId);
        return { ...member, role };
      });
    },

    /**
     * Removes a member and revokes the invitations whose link they made; an
     * account left without any organisation is disabled, signed out and loses its passkeys.
     */
    async remove(organizationId: string, accountId: string): Promise<void> {
      await deps.transaction(async ({ dashboard, events }) => {
        await dashboard.lockOrganization(organizationId);
        const member = await requireMember(dashboard, organizationId, accountId);
        if (member.role === "admin" && (await dashboard.countAdmins(organizationId)) <= 1) throw lastAdmin();
        await dashboard.removeMembership(organizationId, accountId);
        await events.record(organizationId, { type: "member.removed", data: { account_id: accountId, email: member.email } });
        // Nor does a removed one: an invitation link they kept could otherwise bring them back.
        await dashboard.deleteInvitationsBy(organizationId, accountId);
        if ((await dashboard.countMembershipsOf(accountId)) === 0) {
          const now = deps.clock();
          await dashboard.disableAccount(accountId, now);
          await endAccountCredentials(dashboard, accountId, { at: now, keepSessionId: null });
        }
      });
    },
  };
}

export type Members = ReturnType<typeof createMembers>;
