import type { IncomingHttpHeaders } from "node:http";
import { errors, type Dispatcher } from "undici";
import type { UpstreamErrorKind } from "../gateway-metrics.js";
import type { TrySpan } from "../gateway-tracer.js";
import type { Target } from "../upstreams/upstream-pool.js";

/** What one try reports to the request it belongs to. */
export interface TryOwner {
  /** The try's controller: aborting it cancels the upstream request (and the upload into it). */
  tryStarted(attempt: UpstreamTry, controller: Dispatcher.DispatchController): void;
  /** The target's answer began; false when the owner chose to try again instead (the try is then aborted). */
  answerStarted(attempt: UpstreamTry, status: number, headers: IncomingHttpHeaders): boolean;
  data(attempt: UpstreamTry, controller: Dispatcher.DispatchController, chunk: Buffer): void;
  ended(attempt: UpstreamTry, trailers: IncomingHttpHeaders): void;
  /** The try failed: no answer, or an answer cut off. `connected` says whether a connection to the target was made. */
  failed(attempt: UpstreamTry, kind: UpstreamErrorKind, connected: boolean, error: Error): void;
}

/** Error codes undici reports when no connection to the target was made: a retry cannot repeat anything. */
const beforeConnection = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EADDRNOTAVAIL",
  "UND_ERR_CONNECT_TIMEOUT",
]);

export function upstreamErrorKind(error: Error): UpstreamErrorKind {
  const code = (error as { code?: string }).code;
  switch (code) {
    case "UND_ERR_HEADERS_TIMEOUT":
    case "UND_ERR_CONNECT_TIMEOUT":
    case "UND_ERR_BODY_TIMEOUT":
    case "ETIMEDOUT":
      return "timeout";
    case "ECONNREFUSED":
    case "ENOTFOUND":
    case "EAI_AGAIN":
    case "EHOSTUNREACH":
    case "ENETUNREACH":
    case "EADDRNOTAVAIL":
      return "refused";
    default:
      return "reset";
  }
}

/**
 * One try of a request to one target: the undici dispatch handler of that
 * try, which passes what happens on to the request (the Exchange). A retry is
 * a new try, so the events of an abandoned one never reach the client.
 */
export class UpstreamTry implements Dispatcher.DispatchHandler {
  controller: Dispatcher.DispatchController | undefined = undefined;
  /** Set once the owner gave up on this try (a retry replaced it, or the client left). */
  abandoned = false;
  answered = false;
  status = 0;
  /** The wait for the answer's head, from the moment the whole request went to the target. */
  responseTimer: NodeJS.Timeout | undefined = undefined;
  /** Whether undici has started the request on a connection (onRequestStart). */
  started = false;

  constructor(
    readonly owner: TryOwner,
    readonly target: Target,
    /** 1 for the first try. */
    readonly attempt: number,
    /** Its client span (gateway-tracer.ts). */
    readonly span: TrySpan,
    /**
     * How long the answer's head may take (`timeouts.response_ms` or the route's `timeout_ms`). undici's
     * headersTimeout stays as a backstop, but it runs on timers that tick about every half second, so a
     * 300 ms timeout would fire after about a second: this native timer keeps the documented bound
     * (docs/gateway.md, "Upstreams, health and retries", Timeouts).
     */
    readonly responseTimeoutMs: number,
    /**
     * Whether the request's body has been read whole (or it has none). The wait for the head starts
     * once it has, as undici's headersTimeout counts "while not sending the request": a slow upload
     * is the client's time, bounded by GATEWAY_REQUEST_TIMEOUT_MS, not the target's.
     */
    private bodySent: boolean,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    this.started = true;
    this.owner.tryStarted(this, controller);
    if (this.bodySent) this.startResponseTimer();
  }

  /** The request's body was read whole: the target's time to answer starts (if the try has started). */
  requestSent(): void {
    this.bodySent = true;
    if (this.started) this.startResponseTimer();
  }

  startResponseTimer(): void {
    const controller = this.controller;
    if (controller === undefined || this.responseTimer !== undefined || this.answered || this.abandoned) return;
    if (controller.aborted || this.responseTimeoutMs <= 0) return;
    this.responseTimer = setTimeout(() => {
      this.responseTimer = undefined;
      if (!this.answered && !this.abandoned && !controller.aborted) controller.abort(new errors.HeadersTimeoutError());
    }, this.responseTimeoutMs);
  }

  stopResponseTimer(): void {
    if (this.responseTimer === undefined) return;
    clearTimeout(this.responseTimer);
    this.responseTimer = undefined;
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    // 1xx answers (100 Continue, 103 Early Hints) are the upstream hop's business.
    if (statusCode < 200 || this.abandoned) return;
    this.stopResponseTimer();
    this.answered = true;
    this.status = statusCode;
    if (!this.owner.answerStarted(this, statusCode, headers)) {
      this.abandoned = true;
      controller.abort(new Error("tried again on another target"));
    }
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (!this.abandoned) this.owner.data(this, controller, chunk);
  }

  onResponseEnd(_controller: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void {
    if (!this.abandoned) this.owner.ended(this, trailers);
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.stopResponseTimer();
    if (this.abandoned) return;
    const code = (error as { code?: string }).code;
    this.owner.failed(this, upstreamErrorKind(error), !(code !== undefined && beforeConnection.has(code)), error);
  }
}
