import { randomBytes } from "node:crypto";

const prefix = randomBytes(4).toString("hex");
let counter = 0;
const safeRequestId = /^[A-Za-z0-9._:-]{1,64}$/;

/**
 * The id of a request: the client's `X-Request-Id` when it is short and made
 * of safe characters (so it can go into logs as is), else one of ours,
 * unique per process (a random prefix and a counter).
 */
export function nextRequestId(incoming: string | undefined): string {
  return incoming !== undefined && safeRequestId.test(incoming) ? incoming : `${prefix}-${(++counter).toString(36)}`;
}
