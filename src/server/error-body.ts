import { create, toBinary, toJson, type JsonObject } from "@bufbuild/protobuf";
import { base64Encode } from "@bufbuild/protobuf/wire";
import { Code, type ConnectError } from "@connectrpc/connect";

/**
 * The Connect protocol's error vocabulary, written down once for every door
 * (https://connectrpc.com/docs/protocol#error-codes): the code's wire name and
 * the HTTP status a unary answer carries. connect-es keeps its own copies of
 * these tables private, so the platform states them here.
 */
const codeNames: Record<Code, string> = {
  [Code.Canceled]: "canceled",
  [Code.Unknown]: "unknown",
  [Code.InvalidArgument]: "invalid_argument",
  [Code.DeadlineExceeded]: "deadline_exceeded",
  [Code.NotFound]: "not_found",
  [Code.AlreadyExists]: "already_exists",
  [Code.PermissionDenied]: "permission_denied",
  [Code.ResourceExhausted]: "resource_exhausted",
  [Code.FailedPrecondition]: "failed_precondition",
  [Code.Aborted]: "aborted",
  [Code.OutOfRange]: "out_of_range",
  [Code.Unimplemented]: "unimplemented",
  [Code.Internal]: "internal",
  [Code.Unavailable]: "unavailable",
  [Code.DataLoss]: "data_loss",
  [Code.Unauthenticated]: "unauthenticated",
};

const httpStatuses: Record<Code, number> = {
  [Code.Canceled]: 499,
  [Code.Unknown]: 500,
  [Code.InvalidArgument]: 400,
  [Code.DeadlineExceeded]: 504,
  [Code.NotFound]: 404,
  [Code.AlreadyExists]: 409,
  [Code.PermissionDenied]: 403,
  [Code.ResourceExhausted]: 429,
  [Code.FailedPrecondition]: 400,
  [Code.Aborted]: 409,
  [Code.OutOfRange]: 400,
  [Code.Unimplemented]: 501,
  [Code.Internal]: 500,
  [Code.Unavailable]: 503,
  [Code.DataLoss]: 500,
  [Code.Unauthenticated]: 401,
};

/** The wire name of a Connect code (`invalid_argument`); `ok` for success, as metrics label it. */
export function codeName(code: Code | undefined): string {
  return code === undefined ? "ok" : (codeNames[code] ?? "unknown");
}

/** The HTTP status of a unary Connect error answer. */
export function httpStatusOf(code: Code): number {
  return httpStatuses[code] ?? 500;
}

/**
 * The Connect JSON error body (https://connectrpc.com/docs/protocol#error-end-stream):
 * `{code, message, details: [{type, value, debug}]}`, `value` being the detail's
 * binary encoding in unpadded standard base64, `debug` its JSON form.
 */
export function errorJson(error: ConnectError): JsonObject {
  const body: JsonObject = { code: codeName(error.code) };
  if (error.rawMessage.length > 0) body.message = error.rawMessage;
  if (error.details.length > 0) {
    body.details = error.details.map((detail) => {
      if (!("desc" in detail)) {
        const raw: JsonObject = { type: detail.type, value: base64Encode(detail.value, "std_raw") };
        if (detail.debug !== undefined) raw.debug = detail.debug;
        return raw;
      }
      const message = create(detail.desc, detail.value);
      return {
        type: detail.desc.typeName,
        value: base64Encode(toBinary(detail.desc, message), "std_raw"),
        debug: toJson(detail.desc, message),
      };
    });
  }
  return body;
}
