import type { ServiceImpl } from "@connectrpc/connect";
import type { IdentityService } from "../../gen/svc/v1/identity_pb.js";
import type { AppDeps } from "../app-deps.js";

/** svc.v1.IdentityService. Identity arrives with its own issue; until then every RPC is unimplemented. */
export function createIdentityService(_deps: AppDeps): Partial<ServiceImpl<typeof IdentityService>> {
  return {};
}
