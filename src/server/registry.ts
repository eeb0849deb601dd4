import type { DescMethod, DescService } from "@bufbuild/protobuf";
import type { ConnectRouter, HandlerContext, Interceptor } from "@connectrpc/connect";
import { DomainError } from "../domain/errors.js";

/** One service and its (possibly partial) implementation. */
export interface ServiceEntry {
  service: DescService;
  // Implementations are typed per service where they are written (ServiceImpl<typeof X>).
  impl: object;
}

/** A unary RPC and the function that implements it. */
export interface UnaryEntry {
  service: DescService;
  method: DescMethod & { methodKind: "unary" };
  /** `/svc.v1.ConfigService/GetConfig` */
  path: string;
  impl: (request: unknown, context: HandlerContext) => Promise<unknown>;
}

/**
 * The one routes function: every consumer (the node adapter, in-process test
 * transports, the lean unary path and the REST shim) serves the same entries.
 */
export function createRoutes(entries: readonly ServiceEntry[], interceptors: Interceptor[]) {
  return (router: ConnectRouter) => {
    for (const { service, impl } of entries) {
      router.service(service, impl as never, { interceptors });
    }
  };
}

/** Index of the unary RPCs by path; RPCs without an implementation answer unimplemented. */
export function indexUnary(entries: readonly ServiceEntry[]): Map<string, UnaryEntry> {
  const index = new Map<string, UnaryEntry>();
  for (const { service, impl } of entries) {
    for (const method of service.methods) {
      if (method.methodKind !== "unary") continue;
      const fn = (impl as Record<string, unknown>)[method.localName];
      const path = `/${service.typeName}/${method.name}`;
      index.set(path, {
        service,
        method: method as UnaryEntry["method"],
        path,
        impl:
          typeof fn === "function"
            ? async (request, context) => (fn as (r: unknown, c: HandlerContext) => unknown).call(impl, request, context)
            : async () => {
                throw new DomainError("unimplemented", "not_implemented", `${service.typeName}/${method.name} is not implemented yet`);
              },
      });
    }
  }
  return index;
}
