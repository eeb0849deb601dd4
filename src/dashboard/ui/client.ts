import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { errorFromJson } from "@connectrpc/connect/protocol-connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { DashboardService } from "../../../gen/svc/v1/dashboard_pb.js";
import { ErrorDetailSchema } from "../../../gen/svc/v1/errors_pb.js";

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

const watchSession: Interceptor = (next) => async (req) => {
  try {
    return await next(req);
  } catch (error) {
    if (ConnectError.from(error).code === Code.Unauthenticated) sessionEnded?.();
    throw error;
  }
};

/** The typed DashboardService client; the session cookie goes along (same origin). */
export const api = createClient(
  DashboardService,
  createConnectTransport({
    baseUrl: location.origin,
    interceptors: [markDashboard, watchSession],
    fetch: (input, init) => fetch(input, { ...init, credentials: "same-origin" }),
  }),
);

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

/** POSTs JSON to one of the /dashboard/auth/* endpoints; failures become ConnectErrors with their details. */
export async function postAuth<T>(
  path:
    | "setup/inspect"
    | "setup"
    | "invitation/inspect"
    | "invitation/create-account"
    | "sign-in"
    | "sign-in/link"
    | "sign-out"
    | "passkey/begin"
    | "passkey/finish",
  body: Record<string, unknown>,
): Promise<T> {
  const response = await fetch(`/dashboard/auth/${path}`, {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/json", [dashboardHeader]: "1" },
    body: JSON.stringify(body),
  });
  const payload: unknown = await response.json().catch(() => null);
  if (response.ok) return payload as T;
  const fallback = new ConnectError(`request failed (${response.status})`, Code.Unknown);
  throw payload === null ? fallback : errorFromJson(payload as Parameters<typeof errorFromJson>[0], undefined, fallback);
}
