import type { ServiceImpl } from "@connectrpc/connect";
import { type Health, HealthCheckResponse_ServingStatus as Status } from "../../gen/grpc/health/v1/health_pb.js";
import { DomainError } from "../domain/errors.js";

export interface HealthServiceDeps {
  /** Resolves when the database answers. */
  pingDatabase(): Promise<void>;
  /** How often Watch asks the database again (default 5 s). */
  watchIntervalMs?: number;
}

/** The service names Check knows: "" is the process, "gatehouse.storage" the database. */
export const storageHealthService = "gatehouse.storage";

/** grpc.health.v1.Health: what load balancers and grpc_health_probe ask. */
export function createHealthService(deps: HealthServiceDeps): Partial<ServiceImpl<typeof Health>> {
  const intervalMs = deps.watchIntervalMs ?? 5_000;
  async function statusOf(service: string): Promise<Status | undefined> {
    if (service === "") return Status.SERVING;
    if (service !== storageHealthService) return undefined;
    try {
      await deps.pingDatabase();
      return Status.SERVING;
    } catch {
      return Status.NOT_SERVING;
    }
  }
  return {
    async check(request) {
      const status = await statusOf(request.service);
      if (status === undefined) {
        throw new DomainError(
          "not_found",
          "service_unknown",
          `unknown service: ask "" (the process) or "${storageHealthService}" (the database)`,
        );
      }
      return { status };
    },

    /**
     * The status now, then every change, until the client leaves. An unknown
     * service is SERVICE_UNKNOWN rather than an error ("the server will send
     * a single message with SERVICE_UNKNOWN status ... and may later send
     * updates", grpc.health.v1 health.proto). The database is asked again
     * every few seconds.
     */
    async *watch(request, context) {
      let last: Status | undefined;
      for (;;) {
        const status = (await statusOf(request.service)) ?? Status.SERVICE_UNKNOWN;
        if (status !== last) {
          last = status;
          yield { status };
        }
        if (context.signal.aborted) return;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, intervalMs);
          timer.unref();
          context.signal.addEventListener(
            "abort",
            () => {
              clearTimeout(timer);
              resolve();
            },
            { once: true },
          );
        });
        if (context.signal.aborted) return;
      }
    },
  };
}
