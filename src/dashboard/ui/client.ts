import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { DashboardAuthService } from "../../../gen/svc/v1/dashboard_auth_pb.js";
import { DashboardService } from "../../../gen/svc/v1/dashboard_pb.js";
import { ErrorDetailSchema } from "../../../gen/svc/v1/errors_pb.js";
import { WebhooksService } from "../../../gen/svc/v1/webhooks_pb.js";

/** The header that proves a request comes from a dashboard page (the server refuses dashboard calls without it). */
const dashboardHeader = "x-gatehouse-dashboard";

const markDashboard: Interceptor = (next) => (req) => {
  req.header.set(dashboardHeader, "1");
  return next(req);
};

let sessionEnded: (() => void) | undefined;

/** Registers what to do when any call finds the session ended (idle, expired, signed out elsewhere). */
export function onSessionEnded(handler: () => void): void {
  sessionEnded = handler;
}

/** The services the dashboard calls with its session cookie alone. */
const sessionServices = new Set([DashboardService.typeName, WebhooksService.typeName]);

/**
 * A DashboardService (or WebhooksService) call refused as unauthenticated means the session has
 * ended. DashboardAuthService's refusals (a wrong password) mean no such thing.
 */
const watchSession: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (error) {
    if (sessionServices.has(req.service.typeName) && ConnectError.from(error).code === Code.Unauthenticated) sessionEnded?.();
    throw error;
  }
};

/** One Connect transport for both dashboard services; the cookies go along (same origin). */
const transport = createConnectTransport({
  baseUrl: location.origin,
  interceptors: [markDashboard, watchSession],
  fetch: (input, init) => fetch(input, { ...init, credentials: "same-origin" }),
});

/** The typed DashboardService client: every page's operations, with the session cookie. */
export const api = createClient(DashboardService, transport);

/** The typed WebhooksService client: webhook endpoints and deliveries, with the session cookie (admins). */
export const webhooksApi = createClient(WebhooksService, transport);

/** The typed DashboardAuthService client: sign-in, setup, invitations, sign-out (they set and clear the cookie). */
export const authApi = createClient(DashboardAuthService, transport);

/** One problem with one field, as the server lists it. */
export interface FieldProblem {
  field: string;
  description: string;
}

/** What went wrong, in the server's words, with its field violations. */
export interface Problem {
  code: Code;
  reason: string;
  message: string;
  violations: FieldProblem[];
}

export function problemOf(error: unknown): Problem {
  const connectError = ConnectError.from(error);
  const detail = connectError.findDetails(ErrorDetailSchema)[0];
  return {
    code: connectError.code,
    reason: detail?.reason ?? "",
    message: connectError.rawMessage,
    violations: (detail?.violations ?? []).map((v) => ({ field: v.field, description: v.description })),
  };
}

export function isSignedOut(error: unknown): boolean {
  return ConnectError.from(error).code === Code.Unauthenticated;
}

export function dateOf(timestamp: Timestamp | undefined): Date | undefined {
  return timestamp ? timestampDate(timestamp) : undefined;
}
