import type { GetOperatorSessionResponse } from "../../../gen/svc/v1/dashboard_pb.js";

/** What every page of the signed-in dashboard gets. */
export interface PageContext {
  /** The page's content region. */
  main: HTMLElement;
  session: GetOperatorSessionResponse;
  organizationId: string;
  isAdmin: boolean;
  /** Path parameters (e.g. the identity id of /dashboard/identities/<id>). */
  params: Record<string, string>;
  navigate(path: string): void;
  /** Called when a call says the session has ended. */
  signedOut(): void;
}
