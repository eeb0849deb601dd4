import { create, isMessage, type DescMessage, type Message } from "@bufbuild/protobuf";
import { createContextValues, type ConnectError, type HandlerContext } from "@connectrpc/connect";
import type { IncomingMessage, ServerResponse } from "node:http";
import { principalKey, type Authenticator } from "../interceptors/auth.js";
import { toConnectError, type ErrorLogger } from "../interceptors/errors.js";
import { toHeaders } from "./http-body.js";
import type { UnaryEntry } from "./registry.js";

export interface InvokeDeps {
  authenticator: Authenticator;
  logError: ErrorLogger;
}

export interface CallInit {
  /** "connect" for the lean Connect path, "rest" for the REST shim. */
  protocolName: string;
  req: IncomingMessage;
  res: ServerResponse;
  url: string;
}

/** responseHeader is there only when the handler touched it. */
export type UnaryOutcome =
  | { ok: true; message: Message; responseHeader: Headers | undefined }
  | { ok: false; error: ConnectError; responseHeader: Headers | undefined };

const noTimeout = () => undefined;

/** Reads one header from Node's incoming headers without building a Headers object. */
export function headerReader(raw: IncomingMessage["headers"]): Pick<Headers, "get"> {
  return {
    get(name: string) {
      const value = raw[name.toLowerCase()];
      if (value === undefined) return null;
      return Array.isArray(value) ? value.join(", ") : value;
    },
  };
}

/**
 * Calls a unary handler the way the stock router would (same authentication,
 * same context values, same error mapping) without the streaming machinery:
 * the lean path of unary Connect requests and of the REST shim. The request and
 * response headers and the abort signal are built only if a handler asks for
 * them, since most never do and they cost more than the rest of a cheap call.
 */
export async function invokeUnary(deps: InvokeDeps, entry: UnaryEntry, request: Message, init: CallInit): Promise<UnaryOutcome> {
  const { req, res } = init;
  let responseHeader: Headers | undefined;
  const values = createContextValues();
  let requestHeader: Headers | undefined;
  let signal: AbortSignal | undefined;
  const context: HandlerContext = {
    method: entry.method,
    service: entry.service,
    get signal() {
      if (!signal) {
        const controller = new AbortController();
        signal = controller.signal;
        res.once("close", () => {
          if (!res.writableFinished) controller.abort();
        });
      }
      return signal;
    },
    timeoutMs: noTimeout,
    requestMethod: req.method ?? "POST",
    get requestHeader() {
      requestHeader ??= toHeaders(req.headers);
      return requestHeader;
    },
    get responseHeader() {
      responseHeader ??= new Headers();
      return responseHeader;
    },
    // Unary answers have no separate trailers on these paths: trailers travel as headers.
    get responseTrailer() {
      responseHeader ??= new Headers();
      return responseHeader;
    },
    protocolName: init.protocolName,
    values,
    url: init.url,
  };
  try {
    values.set(principalKey, await deps.authenticator.authenticate(entry.method, headerReader(req.headers), request));
    const output = await entry.impl(request, context);
    const message = isMessage(output, entry.method.output)
      ? output
      : create(entry.method.output as DescMessage, output as Record<string, unknown>);
    return { ok: true, message, responseHeader };
  } catch (error) {
    return { ok: false, error: toConnectError(error, entry.path.slice(1), deps.logError), responseHeader };
  }
}
