import { createDashboard, type Dashboard } from "../dashboard/create-dashboard.js";
import { createInvitations } from "../dashboard/operators/invitations.js";
import { createMembers, type MembersTransactionStores } from "../dashboard/operators/members.js";
import { createOperatorPasskeys } from "../dashboard/operators/operator-passkeys.js";
import { createOperatorSessions, type SessionLifetimes } from "../dashboard/operators/operator-sessions.js";
import { createDashboardStore } from "../storage/dashboard-store.js";
import { createIdentityStore } from "../storage/identity-store.js";
import { createTenancyStore } from "../storage/tenancy-store.js";
import { operatorSignInLinksOf } from "./operator-links.js";
import type { Platform } from "./platform.js";
import { transact } from "./transactions.js";

export interface DashboardOptions {
  lifetimes?: SessionLifetimes;
}

/**
 * The server side of the dashboard: operator sessions, passkeys, members,
 * invitations and sign-in links over its stores, and what HTTP adds to them.
 */
export function dashboardOf(platform: Platform, options: DashboardOptions = {}): Dashboard {
  return platform.memo("dashboard", () => {
    const { database, config } = platform;
    const storeOf = (db: Parameters<typeof createDashboardStore>[0]) => createDashboardStore(db, database.provider);
    const store = storeOf(database.client);
    const tenancyStore = createTenancyStore(database.client);
    // The plain-SQL statements (sql.ts): sign-in's counters and failures are on its hot path.
    const identityStore = createIdentityStore(database.client, database.sql);
    const hasher = platform.passwordHasher;
    const sessions = createOperatorSessions({
      store,
      transaction: (fn) => database.transaction((tx) => fn(storeOf(tx))),
      findRole: (organizationId, accountId) => tenancyStore.findRole(organizationId, accountId),
      hitRateCounter: (key, windowStart) => identityStore.hitRateCounter(key, windowStart),
      failures: identityStore,
      signInLimits: config.signIn,
      hasher,
      clock: platform.clock,
      random: platform.random,
      ...(options.lifetimes ? { lifetimes: options.lifetimes } : {}),
      onTouchError: (error) => platform.logger.warn({ err: error }, "could not record dashboard session use"),
      onPurgeError: (error) => platform.logger.warn({ err: error }, "could not delete ended dashboard sessions"),
    });
    const passkeys = createOperatorPasskeys({
      store,
      transaction: (fn) => database.transaction((tx) => fn(storeOf(tx))),
      sessions,
      clock: platform.clock,
      random: platform.random,
      publicUrl: config.publicUrl,
      onRefusal: (refusal) => platform.logger.info(refusal, "operator passkey response refused"),
    });
    const links = operatorSignInLinksOf(database, { publicUrl: config.publicUrl, clock: platform.clock, random: platform.random });
    const membersTransaction = <T>(fn: (stores: MembersTransactionStores) => Promise<T>) =>
      transact(platform, ({ tx, events }) => fn({ dashboard: storeOf(tx), tenancy: createTenancyStore(tx), events }));
    const members = createMembers({ store, transaction: membersTransaction, clock: platform.clock });
    const invitations = createInvitations({
      store,
      transaction: membersTransaction,
      sessions,
      hasher,
      clock: platform.clock,
      random: platform.random,
      publicUrl: config.publicUrl,
    });
    return createDashboard({ links, sessions, passkeys, members, invitations }, config.publicUrl);
  });
}

export { dashboardDirectoryOf } from "./dashboard-directory.js";
