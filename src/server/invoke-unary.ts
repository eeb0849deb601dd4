import { create, isMessage, type DescMessage, type DescMethod, type DescService, type Message } from "@bufbuild/protobuf";
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
 * The handler context of the lean paths. The request and response headers and
 * the abort signal are built only if a handler asks for them, since most never
 * do and they cost more than the rest of a cheap call.
 *
 * A class on purpose: an object literal with per-call getter closures gets a
 * hidden class of its own on every call, and those maps (old space) keep each
 * request's closures alive through young-generation collections. Under load
 * that promoted about 3 KB per request and multiplied the cost of every
 * scavenge; prototype getters share one map.
 */
class LeanContext implements HandlerContext {
  readonly values = createContextValues();
  readonly timeoutMs = noTimeout;
  readonly requestMethod: string;
  private requestHeaders: Headers | undefined;
  private abortSignal: AbortSignal | undefined;
  /** Response headers (and trailers, which travel as headers here): there only when touched. */
  touchedHeaders: Headers | undefined;

  constructor(
    readonly method: DescMethod,
    readonly service: DescService,
    readonly protocolName: string,
    readonly url: string,
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
  ) {
    this.requestMethod = req.method ?? "POST";
  }

  get signal(): AbortSignal {
    if (!this.abortSignal) {
      const controller = new AbortController();
      this.abortSignal = controller.signal;
      const res = this.res;
      res.once("close", () => {
        if (!res.writableFinished) controller.abort();
      });
    }
    return this.abortSignal;
  }

  get requestHeader(): Headers {
    this.requestHeaders ??= toHeaders(this.req.headers);
    return this.requestHeaders;
  }

  get responseHeader(): Headers {
    this.touchedHeaders ??= new Headers();
    return this.touchedHeaders;
  }

  // Unary answers have no separate trailers on these paths: trailers travel as headers.
  get responseTrailer(): Headers {
    return this.responseHeader;
  }
}

/**
 * Calls a unary handler the way the stock router would (same authentication,
 * same context values, same error mapping) without the streaming machinery:
 * the lean path of unary Connect requests and of the REST shim.
 */
export async function invokeUnary(deps: InvokeDeps, entry: UnaryEntry, request: Message, init: CallInit): Promise<UnaryOutcome> {
  const { req, res } = init;
  const context = new LeanContext(entry.method, entry.service, init.protocolName, init.url, req, res);
  try {
    context.values.set(principalKey, await deps.authenticator.authenticate(entry.method, headerReader(req.headers), request));
    const output = await entry.impl(request, context);
    const message = isMessage(output, entry.method.output)
      ? output
      : create(entry.method.output as DescMessage, output as Record<string, unknown>);
    return { ok: true, message, responseHeader: context.touchedHeaders };
  } catch (error) {
    return { ok: false, error: toConnectError(error, entry.path.slice(1), deps.logError), responseHeader: context.touchedHeaders };
  }
}
