import type { ServiceImpl } from "@connectrpc/connect";
import type { SecretsService } from "../../gen/svc/v1/secrets_pb.js";
import type { AppDeps } from "../app-deps.js";

/** svc.v1.SecretsService. Secrets arrive with their own issue; until then every RPC is unimplemented. */
export function createSecretsService(_deps: AppDeps): Partial<ServiceImpl<typeof SecretsService>> {
  return {};
}
