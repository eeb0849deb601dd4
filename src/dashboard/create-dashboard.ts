import type { AppDeps } from "../app-deps.js";
import { createPasswordHasher, type PasswordHasher } from "../domain/identity/password-hasher.js";
import type { ErrorLogger } from "../interceptors/errors.js";
import type { DashboardAuthenticator } from "../interceptors/auth.js";
import type { ExtraRoute } from "../server/http-server.js";
import { createDashboardStore } from "../storage/dashboard-store.js";
import { createIdentityStore } from "../storage/identity-store.js";
import { createTenancyStore } from "../storage/tenancy-store.js";
import { createDashboardAuthRoute } from "./auth-routes.js";
import { createInvitations, type Invitations } from "./invitations.js";
import { createMembers, type Members, type MembersTransactionStores } from "./members.js";
import { createOperatorPasskeys, type OperatorPasskeys } from "./operator-passkeys.js";
import { createOperatorSessions, type OperatorSessions, type SessionLifetimes } from "./operator-sessions.js";
import { operatorSignInLinksOf, type OperatorSignInLinks } from "./operator-sign-in-links.js";
import { createDashboardStaticRoute } from "./static-route.js";

/** The server side of the dashboard: operator sessions, members, the cookie authenticator and its HTTP routes. */
export interface Dashboard {
  sessions: OperatorSessions;
  /** Operators' own passkeys and passkey sign-in. */
  passkeys: OperatorPasskeys;
  /** One-time sign-in links (issued by an operator command, spent at /dashboard/auth/sign-in/link). */
  links: OperatorSignInLinks;
  members: Members;
  /** Invitations of people to organisations, accepted with their one-time token. */
  invitations: Invitations;
  /** The auth interceptor's hook for RPCs that accept CREDENTIAL_DASHBOARD_SESSION. */
  authenticate: DashboardAuthenticator;
  /** `/dashboard/auth/*` (sign-in by password or passkey, setup, invitations, sign-out) and the UI's pages and assets. */
  routes: ExtraRoute[];
}

export interface DashboardOptions {
  logError: ErrorLogger;
  /** argon2id hasher (default: OWASP parameters, one hash per core at a time). */
  hasher?: PasswordHasher;
  lifetimes?: SessionLifetimes;
}

export function createDashboard(
  deps: Pick<AppDeps, "config" | "database" | "clock" | "random" | "logger">,
  options: DashboardOptions,
): Dashboard {
  const { database } = deps;
  const storeOf = (db: Parameters<typeof createDashboardStore>[0]) => createDashboardStore(db, database.provider);
  const store = storeOf(database.client);
  const tenancyStore = createTenancyStore(database.client);
  // The plain-SQL statements (sql.ts): sign-in's counters and failures are on its hot path.
  const identityStore = createIdentityStore(database.client, database.sql);
  const hasher = options.hasher ?? createPasswordHasher();
  const sessions = createOperatorSessions({
    store,
    transaction: (fn) => database.transaction((tx) => fn(storeOf(tx))),
    findRole: (organizationId, accountId) => tenancyStore.findRole(organizationId, accountId),
    hitRateCounter: (key, windowStart) => identityStore.hitRateCounter(key, windowStart),
    failures: identityStore,
    signInLimits: deps.config.signIn,
    hasher,
    clock: deps.clock,
    random: deps.random,
    publicUrl: deps.config.publicUrl,
    ...(options.lifetimes ? { lifetimes: options.lifetimes } : {}),
    onTouchError: (error) => deps.logger.warn({ err: error }, "could not record dashboard session use"),
    onPurgeError: (error) => deps.logger.warn({ err: error }, "could not delete ended dashboard sessions"),
  });
  const passkeys = createOperatorPasskeys({
    store,
    transaction: (fn) => database.transaction((tx) => fn(storeOf(tx))),
    sessions,
    clock: deps.clock,
    random: deps.random,
    publicUrl: deps.config.publicUrl,
    onRefusal: (refusal) => deps.logger.info(refusal, "operator passkey response refused"),
  });
  const links = operatorSignInLinksOf(database, { publicUrl: deps.config.publicUrl, clock: deps.clock, random: deps.random });
  const membersTransaction = <T>(fn: (stores: MembersTransactionStores) => Promise<T>) =>
    database.transaction((tx) => fn({ dashboard: storeOf(tx), tenancy: createTenancyStore(tx) }));
  const members = createMembers({ store, transaction: membersTransaction, clock: deps.clock });
  const invitations = createInvitations({
    store,
    transaction: membersTransaction,
    sessions,
    hasher,
    clock: deps.clock,
    random: deps.random,
    publicUrl: deps.config.publicUrl,
  });
  return {
    sessions,
    passkeys,
    links,
    members,
    invitations,
    authenticate: (header, organizationId) => sessions.authenticate(header, organizationId),
    routes: [
      createDashboardAuthRoute({
        sessions,
        passkeys,
        invitations,
        links,
        publicUrl: deps.config.publicUrl,
        logError: options.logError,
      }),
      createDashboardStaticRoute(),
    ],
  };
}
