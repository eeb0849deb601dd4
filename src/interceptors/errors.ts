import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { ErrorDetailSchema, FieldViolationSchema } from "../../gen/svc/v1/errors_pb.js";
import { DomainError, type ErrorKind } from "../domain/errors.js";

/** The one place domain error kinds become Connect codes. */
const codeOfKind: Record<ErrorKind, Code> = {
  invalid_argument: Code.InvalidArgument,
  unauthenticated: Code.Unauthenticated,
  permission_denied: Code.PermissionDenied,
  not_found: Code.NotFound,
  already_exists: Code.AlreadyExists,
  failed_precondition: Code.FailedPrecondition,
  aborted: Code.Aborted,
  resource_exhausted: Code.ResourceExhausted,
  unimplemented: Code.Unimplemented,
  data_loss: Code.DataLoss,
  internal: Code.Internal,
};

/** Reason carried by a ConnectError built here (for the REST status table). */
export function reasonOf(error: ConnectError): string | undefined {
  for (const detail of error.findDetails(ErrorDetailSchema)) return detail.reason;
  return undefined;
}

export function retryAfterOf(error: ConnectError): number | undefined {
  for (const detail of error.findDetails(ErrorDetailSchema)) return detail.retryAfterSeconds || undefined;
  return undefined;
}

export type ErrorLogger = (error: unknown, context: { procedure: string }) => void;

/**
 * Turns anything thrown by a handler into a ConnectError that is safe to show:
 * domain errors keep their words and reason; anything else becomes a bare
 * `internal` error and its cause goes only to the log.
 */
export function toConnectError(error: unknown, procedure: string, log: ErrorLogger): ConnectError {
  if (error instanceof DomainError) {
    const connectError = new ConnectError(error.message, codeOfKind[error.kind]);
    connectError.details.push({
      desc: ErrorDetailSchema,
      value: create(ErrorDetailSchema, {
        reason: error.reason,
        retryAfterSeconds: error.retryAfterSeconds ?? 0,
        violations: error.violations.map((v) =>
          create(FieldViolationSchema, { field: v.field, description: v.description, line: v.line ?? 0, column: v.column ?? 0 }),
        ),
      }),
    });
    if (error.kind === "internal" || error.kind === "data_loss") log(error, { procedure });
    return connectError;
  }
  if (error instanceof ConnectError) {
    // Errors raised by the Connect runtime itself (malformed body, unknown
    // field, deadline) already carry safe words.
    if (error.code === Code.Internal || error.code === Code.Unknown) {
      log(error, { procedure });
      return new ConnectError("internal error", Code.Internal);
    }
    return error;
  }
  log(error, { procedure });
  return new ConnectError("internal error", Code.Internal);
}

/** The error interceptor of the stock Connect, gRPC and gRPC-Web paths. */
export function createErrorInterceptor(log: ErrorLogger): Interceptor {
  return (next) => async (req) => {
    try {
      const res = await next(req);
      if (!res.stream) return res;
      const procedure = `${req.service.typeName}/${req.method.name}`;
      const messages = res.message;
      return {
        ...res,
        message: (async function* () {
          try {
            yield* messages;
          } catch (error) {
            throw toConnectError(error, procedure, log);
          }
        })(),
      };
    } catch (error) {
      throw toConnectError(error, `${req.service.typeName}/${req.method.name}`, log);
    }
  };
}
