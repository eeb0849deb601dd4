import type { ServiceImpl } from "@connectrpc/connect";
import type { ConfigService } from "../../gen/svc/v1/config_pb.js";
import type { AppDeps } from "../app-deps.js";

/** svc.v1.ConfigService. Gateway configuration arrives with its own issue; until then every RPC is unimplemented. */
export function createConfigService(_deps: AppDeps): Partial<ServiceImpl<typeof ConfigService>> {
  return {};
}
