import type { ServiceImpl } from "@connectrpc/connect";
import { type Health, HealthCheckResponse_ServingStatus as Status } from "../../gen/grpc/health/v1/health_pb.js";
import { DomainError } from "../domain/errors.js";

export interface HealthServiceDeps {
  /** Resolves when the database answers. */
  pingDatabase(): Promise<void>;
}

/** The service names Check knows: "" is the process, "gatehouse.storage" the database. */
export const storageHealthService = "gatehouse.storage";

/** grpc.health.v1.Health: what load balancers and grpc_health_probe ask. */
export function createHealthService(deps: HealthServiceDeps): Partial<ServiceImpl<typeof Health>> {
  return {
    async check(request) {
      if (request.service === "") return { status: Status.SERVING };
      if (request.service === storageHealthService) {
        try {
          await deps.pingDatabase();
          return { status: Status.SERVING };
        } catch {
          return { status: Status.NOT_SERVING };
        }
      }
      throw new DomainError("not_found", "service_unknown", `unknown service "${request.service}": ask "" or "${storageHealthService}"`);
    },
  };
}
