import type { Interceptor } from "@connectrpc/connect";
import { DashboardService } from "../../gen/svc/v1/dashboard_pb.js";
import { DashboardAuthService } from "../../gen/svc/v1/dashboard_auth_pb.js";
import type { AppDeps } from "../app-deps.js";
import { createPasswordHasher, type PasswordHasher } from "../domain/identity/password-hasher.js";
import type { DashboardAuthenticator } from "../interceptors/auth.js";
import type { ExtraRoute } from "../server/http-server.js";
import type { ServiceEntry } from "../server/procedures.js";
import { createDashboardStore } from "../storage/dashboard-store.js";
import { createIdentityStore } from "../storage/identity-store.js";
import { createTenancyStore } from "../storage/tenancy-store.js";
import { createDashboardAuthService } from "./http/dashboard-auth-service.js";
import { createRequestGuard } from "./http/request-guard.js";
import { readSessionCookie } from "./http/session-cookie.js";
import { createDashboardStaticRoute } from "./http/static-route.js";
import { createInvitations, type Invitations } from "./operators/invitations.js";
import { createMembers, type Members, type MembersTransactionStores } from "./operators/members.js";
import { createOperatorPasskeys, type OperatorPasskeys } from "./operators/operator-passkeys.js";
import { createOperatorSessions, type OperatorSessions, type SessionLifetimes } from "./operators/operator-sessions.js";
import { operatorSignInLinksOf, type OperatorSignInLinks } from "./operators/operator-sign-in-links.js";

/**
 * The server side of the dashboard, a wing of its own: operator sessions,
 * passkeys, members and invitations (operators/), and what HTTP adds to them
 * (http/): the auth service that sets the cookies, the request guard that
 * every dashboard RPC passes, the session-cookie authenticator, the UI's route.
 */
export interface Dashboard {
  /** One-time sign-in links (issued by an operator command, spent through DashboardAuthService.SignInWithLink). */
  links: OperatorSignInLinks;
  sessions: OperatorSessions;
  /** Operators' own passkeys and passkey sign-in. */
  passkeys: OperatorPasskeys;
  members: Members;
  /** Invitations of people to organisations, accepted with their one-time token. */
  invitations: Invitations;
  /** The auth interceptor's hook for RPCs that accept CREDENTIAL_DASHBOARD_SESSION: the session of the request's cookie. */
  authenticate: DashboardAuthenticator;
  /** svc.v1.DashboardAuthService (sign-in by password or passkey, setup, invitations, sign-out), served by the pipeline. */
  services: ServiceEntry[];
  /**
   * Cross-site request forgery defence of every RPC of DashboardService and
   * DashboardAuthService (and any RPC a dashboard session authenticates): an
   * interceptor of the app's chain, placed before authentication.
   */
  requestGuard: Interceptor;
  /** The UI's pages and assets. */
  routes: ExtraRoute[];
}

export interface DashboardOptions {
  /** argon2id hasher (default: OWASP parameters, one hash per core at a time). */
  hasher?: PasswordHasher;
  lifetimes?: SessionLifetimes;
}

export function createDashboard(
  deps: Pick<AppDeps, "config" | "database" | "clock" | "random" | "logger">,
  options: DashboardOptions = {},
): Dashboard {
  const { publicUrl } = deps.config;
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
    publicUrl,
    onRefusal: (refusal) => deps.logger.info(refusal, "operator passkey response refused"),
  });
  const links = operatorSignInLinksOf(database, { publicUrl, clock: deps.clock, random: deps.random });
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
    publicUrl,
  });
  return {
    links,
    sessions,
    passkeys,
    members,
    invitations,
    authenticate: (header, organizationId) => sessions.authenticate(readSessionCookie(header.get("cookie"), publicUrl), organizationId),
    services: [{ service: DashboardAuthService, impl: createDashboardAuthService({ sessions, passkeys, invitations, links, publicUrl }) }],
    requestGuard: createRequestGuard({ publicUrl, services: [DashboardService, DashboardAuthService] }),
    routes: [createDashboardStaticRoute()],
  };
}
