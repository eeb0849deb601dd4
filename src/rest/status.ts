import { Code, type ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus } from "@connectrpc/connect/protocol-connect";
import { reasonOf } from "../interceptors/errors.js";

/**
 * HTTP statuses of the REST shim: the Connect mapping, plus the REST-only
 * statuses of CONTRACT.md "Errors", chosen by the error's stable reason.
 */
const restOnlyStatus: Record<string, { code: Code; status: number }> = {
  revision_mismatch: { code: Code.FailedPrecondition, status: 412 },
  body_too_large: { code: Code.ResourceExhausted, status: 413 },
  unsupported_media_type: { code: Code.InvalidArgument, status: 415 },
};

export function restStatusOf(error: ConnectError): number {
  const reason = reasonOf(error);
  const special = reason === undefined ? undefined : restOnlyStatus[reason];
  if (special && special.code === error.code) return special.status;
  return codeToHttpStatus(error.code);
}
