import type { ConnectError } from "@connectrpc/connect";
import { errorStatusOf } from "../server/write-error.js";

/** The HTTP status of an error on a REST path (the Connect mapping plus 412, 413 and 415: docs/errors.md, "Statuses"). */
export function restStatusOf(error: ConnectError): number {
  return errorStatusOf(error, true);
}
