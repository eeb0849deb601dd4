import type { Interceptor } from "@connectrpc/connect";
import { DashboardService } from "../../gen/svc/v1/dashboard_pb.js";
import { DashboardAuthService } from "../../gen/svc/v1/dashboard_auth_pb.js";
import type { DashboardAuthenticator } from "../interceptors/auth.js";
import type { ExtraRoute } from "../server/http-server.js";
import type { ServiceEntry } from "../server/procedures.js";
import { createDashboardAuthService } from "./http/dashboard-auth-service.js";
import { createRequestGuard } from "./http/request-guard.js";
import { readSessionCookie } from "./http/session-cookie.js";
import { createDashboardStaticRoute } from "./http/static-route.js";
import type { Invitations } from "./operators/invitations.js";
import type { Members } from "./operators/members.js";
import type { OperatorPasskeys } from "./operators/operator-passkeys.js";
import type { OperatorSessions } from "./operators/operator-sessions.js";
import type { OperatorSignInLinks } from "./operators/operator-sign-in-links.js";

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

/** The dashboard's operator logic, built over its stores by the composition root (src/composition/dashboard.ts). */
export interface DashboardOperators {
  links: OperatorSignInLinks;
  sessions: OperatorSessions;
  passkeys: OperatorPasskeys;
  members: Members;
  invitations: Invitations;
}

export function createDashboard(operators: DashboardOperators, publicUrl: string): Dashboard {
  const { links, sessions, passkeys, members, invitations } = operators;
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
