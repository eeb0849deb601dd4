import { create, isMessage, type DescMessage, type Message } from "@bufbuild/protobuf";
import { createContextValues, type ConnectError, type HandlerContext } from "@connectrpc/connect";
import { principalKey, type Authenticator } from "../interceptors/auth.js";
import { toConnectError, type ErrorLogger } from "../interceptors/errors.js";
import type { UnaryEntry } from "./registry.js";

export interface InvokeDeps {
  authenticator: Authenticator;
  logError: ErrorLogger;
}

export interface CallInit {
  /** "connect" for the lean Connect path, "rest" for the REST shim. */
  protocolName: string;
  requestMethod: string;
  url: string;
  header: Headers;
  signal: AbortSignal;
}

export type UnaryOutcome =
  | { ok: true; message: Message; responseHeader: Headers }
  | { ok: false; error: ConnectError; responseHeader: Headers };

const noTimeout = () => undefined;

/**
 * Calls a unary handler the way the stock router would (same authentication,
 * same context values, same error mapping) without the streaming machinery:
 * the lean path of unary Connect requests and of the REST shim.
 */
export async function invokeUnary(deps: InvokeDeps, entry: UnaryEntry, request: Message, init: CallInit): Promise<UnaryOutcome> {
  const responseHeader = new Headers();
  const values = createContextValues();
  const context: HandlerContext = {
    method: entry.method,
    service: entry.service,
    signal: init.signal,
    timeoutMs: noTimeout,
    requestMethod: init.requestMethod,
    requestHeader: init.header,
    responseHeader,
    responseTrailer: new Headers(),
    protocolName: init.protocolName,
    values,
    url: init.url,
  };
  try {
    values.set(principalKey, await deps.authenticator.authenticate(entry.method, init.header, request));
    const output = await entry.impl(request, context);
    const message = isMessage(output, entry.method.output)
      ? output
      : create(entry.method.output as DescMessage, output as Record<string, unknown>);
    return { ok: true, message, responseHeader };
  } catch (error) {
    return { ok: false, error: toConnectError(error, entry.path.slice(1), deps.logError), responseHeader };
  }
}
