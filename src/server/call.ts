import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { createContextKey, type Code, type ContextKey, type ContextValues, type HandlerContext } from "@connectrpc/connect";
import type { IncomingHttpHeaders } from "node:http";
import type { Procedure } from "./procedures.js";
import { RequestHeaders } from "./request-headers.js";

/** The wire protocol of a call, as metrics, logs and spans label it (docs/gateway.md, "Spans and attributes"). */
export type Protocol = "connect" | "grpc" | "grpc_web" | "rest";

/** connect-es names for HandlerContext.protocolName. */
const protocolNames: Record<Protocol, string> = { connect: "connect", grpc: "grpc", grpc_web: "grpc-web", rest: "rest" };

/** What a door knows about the request behind a call. */
export interface CallSource {
  readonly headers: IncomingHttpHeaders;
  /** HTTP method ("POST"; "GET" for REST reads). */
  readonly httpMethod: string;
  /** The request target as received. */
  readonly url: string;
  /** The client's address (the TCP peer, or what a trusted proxy says). */
  readonly clientAddress: string | undefined;
  /** Calls `listener` if the client goes away before the answer is complete. */
  onAbort(listener: () => void): void;
}

/** Context key through which the last step of the chain finds its call. */
export const callKey: ContextKey<Call | undefined> = createContextKey<Call | undefined>(undefined, { description: "the call" });

/** Context key for the client's address (per-client limits). */
export const clientAddressKey: ContextKey<string | undefined> = createContextKey<string | undefined>(undefined, {
  description: "client address",
});

/** ContextValues as a class: createContextValues() makes three closures per call. */
class CallValues implements ContextValues {
  private readonly values: Record<symbol, unknown> = {};

  get<T>(key: ContextKey<T>): T {
    return key.id in this.values ? (this.values[key.id] as T) : key.defaultValue;
  }

  set<T>(key: ContextKey<T>, value: T): this {
    this.values[key.id] = value;
    return this;
  }

  delete(key: ContextKey<unknown>): this {
    delete this.values[key.id];
    return this;
  }
}

/**
 * One RPC call, whatever door it came through: the handler's context, and
 * what the pipeline records about the call (id, protocol, start, outcome).
 *
 * A class on purpose: an object literal with getter closures gets a hidden
 * class of its own on every call. The request and response headers and the
 * abort signal are made only when something asks for them.
 */
export class Call implements HandlerContext {
  readonly values: ContextValues = new CallValues();
  readonly startedAt = performance.now();
  readonly requestMethod: string;
  readonly url: string;
  /** Deadline in performance.now() milliseconds, from Connect-Timeout-Ms or grpc-timeout. */
  deadline: number | undefined;
  /** What logs name the call by: the RPC path, or the REST pattern it came through. */
  route: string;
  /** Set once the call's outcome was counted and logged. */
  observed = false;
  /** The outcome code, once known (undefined: ok). */
  code: Code | undefined;
  private controller: AbortController | undefined;
  private request: RequestHeaders | undefined;
  /** Response headers and trailers: there only when something touched them. */
  touchedHeader: Headers | undefined;
  touchedTrailer: Headers | undefined;

  constructor(
    readonly procedure: Procedure,
    readonly protocol: Protocol,
    readonly requestId: string,
    readonly source: CallSource,
  ) {
    this.requestMethod = source.httpMethod;
    this.url = source.url;
    this.route = procedure.path;
    this.values.set(callKey, this);
    if (source.clientAddress !== undefined) this.values.set(clientAddressKey, source.clientAddress);
  }

  get method(): DescMethod {
    return this.procedure.method;
  }

  get service(): DescService {
    return this.procedure.service;
  }

  get protocolName(): string {
    return protocolNames[this.protocol];
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      const controller = new AbortController();
      this.controller = controller;
      this.source.onAbort(() => controller.abort());
      if (this.deadline !== undefined) {
        const timer = setTimeout(() => controller.abort(), Math.max(0, this.deadline - performance.now()));
        timer.unref();
        controller.signal.addEventListener("abort", () => clearTimeout(timer), { once: true });
      }
    }
    return this.controller.signal;
  }

  /** Ends the signal's life: the call is over (connect-es aborts it on completion too). */
  finish(): void {
    this.controller?.abort();
  }

  timeoutMs(): number | undefined {
    return this.deadline === undefined ? undefined : Math.max(0, Math.round(this.deadline - performance.now()));
  }

  get requestHeader(): Headers {
    this.request ??= new RequestHeaders(this.source.headers);
    return this.request;
  }

  get responseHeader(): Headers {
    this.touchedHeader ??= new Headers();
    return this.touchedHeader;
  }

  get responseTrailer(): Headers {
    this.touchedTrailer ??= new Headers();
    return this.touchedTrailer;
  }
}
