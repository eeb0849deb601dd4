import { randomBytes } from "node:crypto";
import { METHODS, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import { constants as http2Constants, type ClientHttp2Stream, type Http2ServerRequest, type Http2ServerResponse } from "node:http2";
import type { Duplex, Readable, Writable } from "node:stream";
import type { Dispatcher } from "undici";
import { readRequestPath } from "../domain/config/request-path.js";
import { isTrustedProxy, type TrustedProxies } from "../server/client-address.js";
import type { AccessLog } from "./access-log.js";
import type { CompiledGatewayState, CompiledRoute } from "./compile-gateway-state.js";
import {
  answers,
  bodyTooLargeAnswer,
  methodNotAllowedAnswer,
  noHealthyTargetAnswer,
  rawAnswer,
  retryAfterSeconds,
  type GatewayAnswer,
} from "./gateway-answer.js";
import type { GatewayMetrics, RouteMetrics, UpstreamErrorKind } from "./gateway-metrics.js";
import { limitBody } from "./proxy/body-limit.js";
import {
  cancel,
  grpcMessage,
  grpcRequestHeaders,
  grpcTimeoutMs,
  isGrpc,
  responseHeadersOf,
  trailersOnly,
  type Http2Sessions,
} from "./proxy/grpc.js";
import { isEncrypted, peerAddressOf } from "./proxy/listeners.js";
import { endWithHead, writeHeadOf } from "./proxy/write-head.js";
import type { GatewayTracer, RequestSpan } from "./gateway-tracer.js";
import type { ClusterRateStore } from "./rate-limit/redis-store.js";
import { UpstreamTry, type TryOwner } from "./proxy/upstream-try.js";
import { cookieValue, type HashOn, type Target } from "./upstreams/upstream-pool.js";
import { clientHeaders, connectionOptions, droppedResponseHeaders, upstreamHeaders } from "./proxy/upstream-headers.js";
import { openWebSocketTunnel } from "./proxy/websocket-tunnel.js";
import { allowHeaderOf, methodIndex } from "./route-table.js";

/** A request the gateway serves: HTTP/1.1 (node:http) or HTTP/2 (node:http2's compatibility API, which mirrors it). */
export type GatewayRequest = IncomingMessage | Http2ServerRequest;
export type GatewayResponse = ServerResponse | Http2ServerResponse;

export interface GatewayHandlerDeps {
  /** The compiled state new requests are served with; undefined until one is loaded. */
  current(): CompiledGatewayState | undefined;
  /** Called when a request served with `compiled` has finished. */
  settled(compiled: CompiledGatewayState): void;
  /** True once the gateway is closing: answers ask clients to close their connections. */
  closing(): boolean;
  metrics: GatewayMetrics;
  accessLog: AccessLog;
  /** Epoch ms: rate-limit windows and token expiry. */
  clock(): number;
  upstreamTimeoutMs: number;
  /** Open WebSocket tunnels (client sockets), ended when the gateway closes. */
  tunnels: Set<Duplex>;
  /** WebSocket tunnels open at once at most: beyond, an upgrade is refused with 503. */
  maxTunnels: number;
  /** How long a client may stop reading an answer before the gateway gives up on it (and the upstream request). */
  sendTimeoutMs: number;
  /** How long a tunnel may carry nothing either way before it is closed. */
  tunnelIdleTimeoutMs: number;
  /** Proxies whose forwarding headers are passed on (TRUSTED_PROXIES); from anyone else they are replaced. */
  trustedProxies: TrustedProxies;
  /** The TLS port the gateway listens on (a redirect to https names it unless 443); undefined: none. */
  tlsPort(): number | undefined;
  /** HTTP/2 sessions to gRPC targets (proxy/grpc.ts). */
  http2Sessions: Http2Sessions;
  /** Cluster-wide rate limits in Redis (GATEWAY_REDIS_URL); undefined: each gateway counts for itself. */
  clusterRates: ClusterRateStore | undefined;
  /** W3C Trace Context and, with the OpenTelemetry variables, spans (gateway-tracer.ts). */
  tracer: GatewayTracer;
}

const requestIdPrefix = randomBytes(4).toString("hex");
let requestCounter = 0;
const safeRequestId = /^[A-Za-z0-9._:-]{1,64}$/;

/** Bodies of refused requests up to this size are read and dropped to keep the connection; larger ones close it. */
const drainableBodyBytes = 64 * 1024;

/** An absolute-form request target (RFC 9112 section 3.2.2): scheme, authority, and the rest from the path on. */
const absoluteForm = /^https?:\/\/([^/?#@\s]+)([/?][^#]*)?$/i;

/** A request target as HTTP/2's :path may carry it: visible ASCII only, no space (RFC 9113 section 8.3.1). */
/**
 * Host[:port] (RFC 9110 section 7.2): an IP literal in brackets or a reg-name of RFC 3986's characters
 * (unreserved, pct-encoded, sub-delims), then an optional port. No userinfo, path, space or control character:
 * whatever routes the request, is logged and goes upstream as X-Forwarded-Host is a host name.
 */
const validAuthority = /^(?:\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9._~!$&'()*+,;=%-]{1,255})(?::[0-9]{1,5})?$/;

const originForm = /^\/[\x21-\x7e]*$/;

/** Whether the request carries more than one Host field (Node keeps only the first in `headers`). */
function repeatsHost(rawHeaders: readonly string[]): boolean {
  let seen = false;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 4 && name.toLowerCase() === "host") {
      if (seen) return true;
      seen = true;
    }
  }
  return false;
}

/** `host[:port]` to the host alone, lower case, without a trailing dot. */
function hostOf(value: string | undefined): string {
  if (value === undefined || value === "") return "";
  let host = value;
  if (host.charCodeAt(0) === 91 /* [ */) {
    const end = host.indexOf("]");
    host = end === -1 ? host : host.slice(0, end + 1);
  } else {
    const colon = host.lastIndexOf(":");
    if (colon !== -1) host = host.slice(0, colon);
  }
  if (host.endsWith(".")) host = host.slice(0, -1);
  return host.toLowerCase();
}

/** The TCP peer address; an IPv4-mapped IPv6 address as the IPv4 address it is. */
/** The TCP peer address (listeners.ts: an h2c session reads through a wrapper). */
/** Whether a host's domain (its exact name, else the wildcard one label up, as for certificates) has `redirect_http`. */
function redirectsToHttps(redirects: ReadonlyMap<string, boolean>, host: string): boolean {
  const exact = redirects.get(host);
  if (exact !== undefined) return exact;
  const dot = host.indexOf(".");
  return dot !== -1 && redirects.get(`*${host.slice(dot)}`) === true;
}

function peerOf(req: GatewayRequest): string {
  return peerAddressOf(req as { socket: { remoteAddress?: string | undefined } });
}

/**
 * Whether a body follows the request's head: on HTTP/1.1 its framing
 * headers say so (RFC 9112 section 6.3); on HTTP/2 a body follows unless the
 * HEADERS frame ended the stream (RFC 9113 section 8.1), content-length or not.
 */
function bodyFollows(req: GatewayRequest): boolean {
  if ("stream" in req) return !req.stream.endAfterHeaders;
  return hasBody(req.headers);
}

function hasBody(headers: IncomingHttpHeaders): boolean {
  const length = headers["content-length"];
  return length !== undefined ? length !== "0" : headers["transfer-encoding"] !== undefined;
}

/** The methods the HTTP/1.1 parser reads (node:http METHODS): on HTTP/2 any other is 400 `method_unknown`. */
const knownMethods: ReadonlySet<string> = new Set(METHODS);

/** Methods a retry cannot repeat the effect of (RFC 9110 section 9.2.2). */
function idempotent(method: string | undefined): boolean {
  return method === "GET" || method === "HEAD" || method === "OPTIONS" || method === "PUT" || method === "DELETE";
}

/** Answers of a target that a retry may replace: it failed as a gateway would (502, 503, 504). */
const retryStatuses: ReadonlySet<number> = new Set([502, 503, 504]);

/**
 * One request through the gateway, from arrival to the end of its answer,
 * served wholly by the compiled state current when it arrived. It is also
 * the undici dispatch handler of the upstream request (no closures per
 * request on the common path).
 */
export class Exchange implements TryOwner {
  route: CompiledRoute | undefined = undefined;
  metrics: RouteMetrics | undefined = undefined;
  compiled: CompiledGatewayState | undefined = undefined;
  /** The matching form of the path. */
  path = "";
  /** The path as read without ignoring parameters or decoding %2F (request-path.ts): allow rules must match it too. */
  literalPath = "";
  /** What the upstream is asked for: the canonical path (request-path.ts) and the query as sent. */
  forwardTarget = "";
  /** The authority the request is routed by: its Host, or an absolute-form target's. */
  authority: string | undefined = undefined;
  peer = "";
  now = 0;
  consumerId: string | undefined = undefined;
  identityId: string | undefined = undefined;
  /** Headers added to every answer of the route (CORS, RateLimit-*): [name, value, ...]. */
  extra: string[] | undefined = undefined;
  /** Whether the route's CORS policy owns the Access-Control-* response headers. */
  corsOwned = false;
  /** Whether this is a browser's preflight for a route with a CORS policy (its first step answers it). */
  preflight = false;
  upstreamStatus = 0;
  controller: Dispatcher.DispatchController | undefined = undefined;
  /** The targets tried so far, in order (retries go elsewhere when they can). */
  tried: Target[] | undefined = undefined;
  /** The try whose answer the client gets. */
  current: UpstreamTry | undefined = undefined;
  /** The target of the current try (the access log's `target`). */
  target: Target | undefined = undefined;
  /** The request body as sent upstream (the client's stream, or it behind the route's size limit); null without one. */
  body: Readable | null = null;
  /** Set when the body grew past the route's max_body_bytes. */
  bodyTooLarge = false;
  /** Set once the body has been read whole (the targets' time to answer starts then: UpstreamTry). */
  bodyRead = false;
  /** Called when it does, for a gRPC call (forwardGrpc: the target's stream is cancelled, the call ends RESOURCE_EXHAUSTED). */
  bodyExceeded: (() => void) | undefined = undefined;
  /** The upstream request's headers, the same on every try. */
  upstreamRequestHeaders: Record<string, string | string[]> | undefined = undefined;
  /** The client's headers as they go upstream, computed on first use. */
  clientHeaders: Record<string, string | string[]> | undefined = undefined;
  /** The request's server span (gateway-tracer.ts). */
  span: RequestSpan;
  /** Whether the request came over TLS. */
  encrypted = false;
  /** Whether the request is gRPC (proxy/grpc.ts): forwarded over HTTP/2, refused with Trailers-Only answers. */
  readonly grpc: boolean;
  /** The status the access log and metrics record when the answer's HTTP status says less (a gRPC refusal is a 200). */
  loggedStatus = 0;
  /** The kind of the step running now: the one that answers, when one does. */
  stepKind: string | undefined = undefined;
  clientGone = false;
  settled = false;
  /** Set when the upstream failed after its answer had started: the client's connection is cut and the request counts as 502. */
  upstreamFailed = false;
  /** Set while the upstream is slower than the client at taking data. */
  waitingForDrain = false;

  constructor(
    readonly deps: GatewayHandlerDeps,
    readonly req: GatewayRequest,
    /** The response, for a plain request; undefined for an upgrade. */
    readonly res: GatewayResponse | undefined,
    /** The client socket of an upgrade request. */
    readonly socket: Duplex | undefined,
    readonly head: Buffer | undefined,
    readonly requestId: string,
    readonly started: number,
  ) {
    this.span = deps.tracer.request(req.headers, req.method ?? "GET");
    this.grpc = res !== undefined && isGrpc(req.headers["content-type"]);
  }

  // --- gateway-made answers -------------------------------------------------

  answer(answer: GatewayAnswer, headers?: readonly string[]): undefined {
    if (this.clientGone) return;
    this.span.answeredBy(this.stepKind ?? "gateway");
    const out = ["x-request-id", this.requestId];
    if (this.extra !== undefined) out.push(...this.extra);
    if (headers !== undefined) out.push(...headers);
    const res = this.res;
    if (res === undefined) {
      this.socket?.end(rawAnswer(answer, out));
      this.settle(answer.status);
      return;
    }
    const req = this.req;
    if ("stream" in req && !req.complete) {
      // HTTP/2: the answer is complete before the request is, so the stream is reset with NO_ERROR once it
      // is sent (RFC 9113 section 8.1), and the rest of the body is never read; the connection stays.
      const stream = req.stream;
      stream.once("finish", () => {
        if (!req.complete && !stream.closed) stream.close(http2Constants.NGHTTP2_NO_ERROR);
      });
    }
    if (this.grpc) {
      // A Trailers-Only answer: HTTP 200, the gRPC status and message in its only HEADERS.
      this.loggedStatus = answer.status;
      if (!("stream" in req) && !req.complete) req.resume();
      out.push(...trailersOnly(answer), "content-length", "0");
      endWithHead(res, 200, out);
      return;
    }
    if (!("stream" in req) && !req.complete && bodyFollows(req)) {
      const length = Number(req.headers["content-length"]);
      if (Number.isFinite(length) && length <= drainableBodyBytes) req.resume();
      else out.push("connection", "close");
    } else if (this.deps.closing()) {
      out.push("connection", "close");
    }
    out.push("content-type", "application/json", "content-length", String(answer.body.length));
    writeHeadOf(res, answer.status, out);
    res.end(answer.body);
  }

  /** A plain-HTTP request for a domain with `redirect_http`: 308 to the same target over https (RFC 9110 section 15.4.9). */
  redirectToHttps(host: string): undefined {
    const port = this.deps.tlsPort();
    const location = `https://${host}${port === undefined || port === 443 ? "" : `:${port}`}${this.forwardTarget}`;
    this.span.answeredBy("redirect_http");
    const res = this.res;
    if (res === undefined) {
      this.socket?.end(rawAnswer(answers.redirectToHttps, ["location", location]));
      this.settle(308);
      return;
    }
    writeHeadOf(res, 308, [
      "location",
      location,
      "x-request-id",
      this.requestId,
      "content-type",
      "application/json",
      "content-length",
      String(answers.redirectToHttps.body.length),
    ]);
    res.end(answers.redirectToHttps.body);
  }

  /** Answers a request the gateway refuses before routing it. */
  refuse(answer: GatewayAnswer): false {
    this.answer(answer);
    return false;
  }

  // --- the pipeline ---------------------------------------------------------

  /**
   * The request target and Host, read once (RFC 9112 section 3.2): an
   * origin-form path, or an absolute-form URL whose authority the Host field
   * (if any) repeats exactly. False when the gateway has answered the request.
   */
  readTarget(): boolean {
    const req = this.req;
    const headers = req.headers;
    if (repeatsHost(req.rawHeaders)) return this.refuse(answers.duplicateHost);
    let target = req.url ?? "";
    let authority = headers.host;
    if (req.httpVersionMajor === 2) {
      // RFC 9113 section 8.3.1: :path is origin-form (or "*"); :authority and Host, when both are sent, agree.
      const pseudo = headers[":authority"];
      if (typeof pseudo === "string") {
        if (authority !== undefined && authority.toLowerCase() !== pseudo.toLowerCase()) return this.refuse(answers.hostMismatch);
        authority = pseudo;
      }
      if (target.charCodeAt(0) !== 47 || !originForm.test(target)) return this.refuse(answers.badTarget);
    } else if (target.charCodeAt(0) !== 47) {
      const absolute = absoluteForm.exec(target);
      if (absolute === null) return this.refuse(answers.badAbsoluteTarget);
      const named = absolute[1]!;
      if (authority !== undefined && authority.toLowerCase() !== named.toLowerCase()) return this.refuse(answers.hostMismatch);
      authority = named;
      target = absolute[2] === undefined || absolute[2].charCodeAt(0) === 63 /* ? */ ? `/${absolute[2] ?? ""}` : absolute[2];
    } else if (authority === undefined && req.httpVersion === "1.1") {
      return this.refuse(answers.missingHost);
    }
    if (authority !== undefined && authority !== "" && !validAuthority.test(authority)) return this.refuse(answers.badHost);
    const queryAt = target.indexOf("?");
    const path = readRequestPath(queryAt === -1 ? target : target.slice(0, queryAt));
    if (path === undefined) return this.refuse(answers.badTarget);
    this.path = path.match;
    this.literalPath = path.literal;
    this.forwardTarget = queryAt === -1 ? path.forward : path.forward + target.slice(queryAt);
    this.authority = authority;
    return true;
  }

  /** Routing, then the plugins in their fixed order (docs/gateway.md, "The data plane: how the gateway enforces it"), then the upstream. */
  run(compiled: CompiledGatewayState): undefined {
    this.compiled = compiled;
    const req = this.req;
    // HTTP/2 takes any token as :method; the HTTP/1.1 parser only Node's methods. Neither forwards another.
    if (req.httpVersionMajor === 2 && !knownMethods.has(req.method ?? "")) return void this.refuse(answers.unknownMethod);
    if (!this.readTarget()) return;
    const path = this.path;
    const headers = req.headers;
    const host = hostOf(this.authority);
    this.encrypted = isEncrypted(req);
    if (!this.encrypted && compiled.routing.redirects.size > 0 && redirectsToHttps(compiled.routing.redirects, host))
      return this.redirectToHttps(host);
    const method = methodIndex(req.method ?? "GET");
    let found = compiled.routing.table.lookup(host, path, method);
    if (this.res !== undefined && method === 6 && headers.origin !== undefined) {
      const requested = headers["access-control-request-method"];
      if (requested !== undefined) {
        if (typeof found === "number") {
          // A browser's preflight for a route that does not serve OPTIONS itself: the route of the method it asks about answers it.
          const target = compiled.routing.table.lookup(host, path, methodIndex(requested));
          if (typeof target !== "number" && target.cors !== undefined) found = target;
        }
        this.preflight = typeof found !== "number" && found.cors !== undefined;
      }
    }
    if (req.method === "TRACE") {
      // Never forwarded (RFC 9110 section 9.3.8: it would echo the request, credentials included).
      const allowed = typeof found === "number" ? found : found.methodMask & 0x7f;
      return this.answer(answers.traceNotAllowed, ["allow", allowHeaderOf(allowed)]);
    }
    if (typeof found === "number") {
      return found === 0
        ? this.answer(answers.notFound)
        : this.answer(methodNotAllowedAnswer(allowHeaderOf(found)), ["allow", allowHeaderOf(found)]);
    }
    const route = found;
    this.route = route;
    this.span.route(route.name);
    this.metrics = route.metrics ??= this.deps.metrics.route(route.name);
    if (route.closed !== undefined) return this.answer(route.closed);
    this.peer = peerOf(req);
    if (this.peer === "") {
      // Only a connection already gone has no address (an HTTP/2 stream reset, or its session closed, before its
      // request was read): nothing is forwarded for it, and no rule or limit ever judges a client without an address.
      this.clientGone = true;
      this.settle(499);
      return;
    }
    this.continueFrom(0);
  }

  /** Runs the route's steps from `index` on (plugins/plugin.ts); when all let the request through, forwards it. */
  continueFrom(index: number): undefined {
    const steps = this.route!.steps;
    for (let i = index; i < steps.length; i++) {
      const step = steps[i]!;
      this.stepKind = step.kind;
      const result = step.run(this);
      if (result === true) continue;
      if (result === false) return;
      result.then(
        (go) => {
          if (go && !this.clientGone) this.continueFrom(i + 1);
        },
        // Nothing in a step is expected to throw; if one does, the request ends rather than the process.
        () => (this.res ?? this.socket)?.destroy(),
      );
      return;
    }
    this.stepKind = undefined;
    this.forward();
  }

  // --- forwarding -----------------------------------------------------------

  /** Whether the peer is a proxy the operator trusts (TRUSTED_PROXIES): its forwarding headers pass. */
  trustedPeer(): boolean {
    const trusted = this.deps.trustedProxies;
    return trusted.length > 0 && isTrustedProxy(this.peer, trusted);
  }

  /** The client's headers as they will go upstream (proxy/upstream-headers.ts), read once: rules judge these. */
  clientView(): Record<string, string | string[]> {
    this.clientHeaders ??= clientHeaders(this.req.headers, this.route!, this.trustedPeer());
    return this.clientHeaders;
  }

  /** The headers of the upstream request (proxy/upstream-headers.ts). */
  upstreamHeaders(): Record<string, string | string[]> {
    const req = this.req;
    return upstreamHeaders(this.clientView(), req.headers, this.route!, {
      peer: this.peer,
      trustedPeer: this.trustedPeer(),
      proto: this.encrypted ? "https" : "http",
      authority: this.authority,
      requestId: this.requestId,
      via: req.httpVersionMajor === 2 ? "2 gatehouse" : req.httpVersion === "1.0" ? "1.0 gatehouse" : "1.1 gatehouse",
      identityId: this.identityId,
    });
  }

  /**
   * Sends the request to the route's upstream: a target its balancer picks,
   * tried again on another healthy target when that is safe (retryable()).
   * A body over the route's `max_body_bytes` is 413: at once when its length
   * says so, else as soon as it grows past it (the target's request is then
   * aborted, so it never sees a complete body).
   */
  forward(): undefined {
    if (this.clientGone) return;
    const route = this.route!;
    const req = this.req;
    if (this.res === undefined) {
      this.tunnel();
      return;
    }
    if (bodyFollows(req)) {
      const limit = route.maxBodyBytes;
      const declared = req.headers["content-length"];
      if (limit !== undefined && declared !== undefined && Number(declared) > limit) return this.answer(bodyTooLargeAnswer(limit));
      this.body =
        limit !== undefined && declared === undefined
          ? limitBody(req, limit, () => {
              this.bodyTooLarge = true;
              this.bodyExceeded?.();
            })
          : req;
      if (!this.grpc) {
        this.body.once("end", () => {
          this.bodyRead = true;
          this.current?.requestSent();
        });
      }
    }
    this.upstreamRequestHeaders = this.upstreamHeaders();
    if (this.grpc) return this.forwardGrpc();
    this.tryNext();
  }

  /**
   * A gRPC call, over HTTP/2 to one target its balancer picks: the request
   * body and the answer stream through, trailers kept; `grpc-timeout` is
   * honoured (DEADLINE_EXCEEDED when it passes). No retry: a call's messages
   * cannot be sent twice. A body that grows past the route's `max_body_bytes`
   * cancels the target's stream and ends the call with RESOURCE_EXHAUSTED.
   * Only the target's own failures (unreachable, reset, no head in time, a
   * 5xx) count against its passive health.
   */
  forwardGrpc(): undefined {
    const route = this.route!;
    const pool = route.upstream;
    const req = this.req;
    const res = this.res!;
    const now = this.deps.clock();
    const target = pool.picker.pick(now, pool.hashOn === undefined ? undefined : this.hashKey(pool.hashOn), undefined);
    if (target === undefined) {
      const seconds = retryAfterSeconds(pool.targets, now);
      return this.answer(noHealthyTargetAnswer(pool.name, seconds), ["retry-after", String(seconds)]);
    }
    this.target = target;
    this.tried = [target];
    target.health.picked(now);
    const span = this.span.tryStart(target.url, 1);
    let settled = false;
    /** Ends the try once: `ok` undefined when the call ended for a reason that is not the target's. */
    const finish = (ok: boolean | undefined, status: number, failure?: string) => {
      if (settled) return;
      settled = true;
      if (ok === undefined) target.health.released();
      else target.health.finished(ok, this.deps.clock());
      span.end(status, failure);
    };
    const deadline = grpcTimeoutMs(req.headers["grpc-timeout"]);
    let stream: ClientHttp2Stream | undefined;
    let ended = false;
    // Until the head arrives: the route's timeout (or the call's deadline, whichever is sooner); then only the deadline.
    const headTimer = setTimeout(() => expire("timeout"), deadline === undefined ? route.timeoutMs : Math.min(deadline, route.timeoutMs));
    const deadlineTimer = deadline === undefined ? undefined : setTimeout(() => expire("deadline"), deadline);
    const stop = () => {
      clearTimeout(headTimer);
      clearTimeout(deadlineTimer);
    };
    /** Ends the client's call with a gRPC status: Trailers-Only before any head, else in the trailers. */
    const endCall = (answer: GatewayAnswer, status: string, message: string) => {
      ended = true;
      if (this.clientGone) return;
      if (!res.headersSent) {
        this.answer(answer);
        return;
      }
      (res as GatewayResponse).addTrailers({ "grpc-status": status, "grpc-message": message });
      res.end();
    };
    const expire = (why: "timeout" | "deadline") => {
      stop();
      if (stream !== undefined) cancel(stream);
      // The route's timeout before any head is the target's doing; a deadline the client set is not.
      finish(why === "timeout" && !res.headersSent ? false : undefined, 0, "timeout");
      this.metrics?.upstreamError("timeout");
      endCall(answers.upstreamTimeout, "4", why === "deadline" ? "deadline exceeded" : "timed out");
    };
    const limit = route.maxBodyBytes ?? 0;
    // A body over the limit fails the limiter, maybe before the target's stream is open: bodyExceeded answers it.
    this.body?.on("error", () => {});
    this.bodyExceeded = () => {
      stop();
      if (stream !== undefined) cancel(stream);
      finish(undefined, 0, "body_too_large");
      // Answered once the read that found the excess is over: a stream answered and reset from inside it loses its HEADERS.
      setImmediate(() => endCall(bodyTooLargeAnswer(limit), "8", grpcMessage(`the request body is over ${limit} bytes`)));
    };
    res.once("close", () => {
      stop();
      if (stream !== undefined) cancel(stream);
      finish(undefined, 499);
    });
    this.deps.http2Sessions
      .open(
        target.origin,
        grpcRequestHeaders(
          withTraceContext(this.upstreamRequestHeaders!, span.headers),
          target,
          target.basePath + this.forwardTarget,
          req.method ?? "POST",
        ),
      )
      .then(
        (opened) => {
          if (ended || this.clientGone || this.bodyTooLarge) {
            cancel(opened);
            return;
          }
          stream = opened;
          this.relayGrpc(opened, { headArrived: () => clearTimeout(headTimer), stop }, finish);
        },
        () => {
          stop();
          if (ended) return;
          finish(false, 0, "refused");
          if (this.clientGone) return;
          this.metrics?.upstreamError("refused");
          this.answer(answers.upstreamUnreachable);
        },
      );
  }

  /** Relays a gRPC call's stream both ways once the target's stream is open (forwardGrpc). */
  relayGrpc(
    stream: ClientHttp2Stream,
    timers: { headArrived(): void; stop(): void },
    finish: (ok: boolean | undefined, status: number, failure?: string) => void,
  ): void {
    const { headArrived, stop } = timers;
    const req = this.req;
    const res = this.res!;
    stream.on("error", () => {
      stop();
      if (this.bodyTooLarge || this.clientGone) return;
      finish(false, 0, "reset");
      this.metrics?.upstreamError("reset");
      if (!res.headersSent) this.answer(answers.upstreamUnreachable);
      else {
        this.upstreamFailed = true;
        res.destroy();
      }
    });
    // A body over the limit fails the limiter: the target's stream is cancelled (bodyExceeded), never ended.
    (this.body ?? req).pipe(stream);
    let headOnly = false;
    stream.on("response", (headers, flags) => {
      headArrived();
      const status = Number(headers[":status"] ?? 0);
      this.upstreamStatus = status;
      if (this.clientGone || this.bodyTooLarge) return;
      finish(status < 500, status);
      const out = responseHeadersOf(headers);
      out.push("x-request-id", this.requestId);
      if (this.extra !== undefined) out.push(...this.extra);
      // A Trailers-Only answer (its HEADERS ends the stream) goes on as one too.
      headOnly = (flags & http2Constants.NGHTTP2_FLAG_END_STREAM) !== 0;
      if (headOnly) {
        stop();
        endWithHead(res, status, out);
      } else {
        writeHeadOf(res, status, out);
      }
    });
    stream.on("trailers", (trailers) => {
      if (this.bodyTooLarge) return;
      const out: Record<string, string | string[]> = {};
      for (const name in trailers) {
        const value = trailers[name];
        if (value !== undefined && name.charCodeAt(0) !== 58) out[name] = typeof value === "number" ? String(value) : value;
      }
      res.addTrailers(out);
    });
    stream.on("data", (chunk: Buffer) => {
      if (this.bodyTooLarge) return;
      this.data(undefined, { pause: () => stream.pause(), resume: () => stream.resume() }, chunk);
    });
    stream.on("end", () => {
      stop();
      if (headOnly || this.bodyTooLarge || this.clientGone) return;
      if (!res.headersSent) writeHeadOf(res, this.upstreamStatus || 200, ["x-request-id", this.requestId]);
      res.end();
    });
  }

  /** One more try, on a target not tried yet when one is usable; false when there is none at all. */
  tryNext(): boolean {
    const pool = this.route!.upstream;
    const now = this.deps.clock();
    const key = pool.hashOn === undefined ? undefined : this.hashKey(pool.hashOn);
    const target = pool.picker.pick(now, key, this.tried) ?? (this.tried !== undefined ? pool.picker.pick(now, key, undefined) : undefined);
    if (target === undefined) {
      if (this.tried === undefined) {
        const seconds = retryAfterSeconds(pool.targets, now);
        this.answer(noHealthyTargetAnswer(pool.name, seconds), ["retry-after", String(seconds)]);
      }
      return false;
    }
    const attempt = new UpstreamTry(
      this,
      target,
      (this.tried?.length ?? 0) + 1,
      this.span.tryStart(target.url, (this.tried?.length ?? 0) + 1),
      this.route!.timeoutMs,
      this.body === null || this.bodyRead,
    );
    if (this.tried === undefined) this.tried = [target];
    else this.tried.push(target);
    if (attempt.attempt > 1) this.metrics!.retries++;
    target.health.picked(now);
    this.current = attempt;
    this.target = target;
    const req = this.req;
    try {
      target.dispatcher.dispatch(
        {
          path: target.basePath + this.forwardTarget,
          method: req.method ?? "GET",
          headers: withTraceContext(this.upstreamRequestHeaders!, attempt.span.headers),
          body: this.body,
          headersTimeout: this.route!.timeoutMs,
        },
        attempt,
      );
    } catch (error) {
      // A request undici refuses to send (it reports most problems through onResponseError instead).
      this.failed(attempt, "reset", false, error as Error);
    }
    return true;
  }

  /** The key a consistent-hash balancer places this request by: a header, a cookie, or the client's address. */
  hashKey(hashOn: HashOn): string {
    if (hashOn.from === "header") {
      const value = this.req.headers[hashOn.name];
      if (value !== undefined) return Array.isArray(value) ? value.join(",") : value;
    } else if (hashOn.from === "cookie") {
      const value = cookieValue(this.req.headers.cookie, hashOn.name);
      if (value !== undefined) return value;
    }
    return this.peer;
  }

  /**
   * Whether a failed try may be made again (docs/gateway.md, "Retries"): the
   * upstream allows another try, nothing of an answer reached the client,
   * the body was never read (or there is none), and the request is
   * idempotent or never reached the target.
   */
  retryable(attempt: UpstreamTry, connected: boolean): boolean {
    if (attempt.attempt > this.route!.upstream.retries || this.clientGone || this.res!.headersSent || this.bodyTooLarge) return false;
    if (this.body !== null && (this.req.readableDidRead || this.body.readableDidRead)) return false;
    return !connected || idempotent(this.req.method);
  }

  // --- TryOwner: what a try reports -----------------------------------------

  tryStarted(attempt: UpstreamTry, controller: Dispatcher.DispatchController): void {
    if (attempt !== this.current) return;
    this.controller = controller;
    if (this.clientGone) controller.abort(new Error("the client closed the request"));
  }

  answerStarted(attempt: UpstreamTry, statusCode: number, headers: IncomingHttpHeaders): boolean {
    attempt.span.end(statusCode);
    if (this.clientGone) return true;
    const failed = statusCode >= 500;
    attempt.target.health.finished(!failed, this.deps.clock());
    if (failed && retryStatuses.has(statusCode) && this.retryable(attempt, true)) return !this.tryNext();
    this.upstreamStatus = statusCode;
    const named = connectionOptions(headers.connection);
    const corsOwned = this.corsOwned;
    const out: (string | string[])[] = [];
    let hasRequestId = false;
    for (const name in headers) {
      if (droppedResponseHeaders.has(name) || named?.includes(name) || name === "via") continue;
      if (corsOwned && name.startsWith("access-control-")) continue;
      if (name === "x-request-id") hasRequestId = true;
      const value = headers[name];
      if (value !== undefined) out.push(name, value);
    }
    if (!hasRequestId) out.push("x-request-id", this.requestId);
    // RFC 9110 section 7.6.3: each intermediary appends itself to Via.
    const via = headers.via;
    out.push("via", typeof via === "string" && via !== "" ? `${via}, 1.1 gatehouse` : "1.1 gatehouse");
    if (this.extra !== undefined) out.push(...this.extra);
    if (this.deps.closing()) out.push("connection", "close");
    try {
      writeHeadOf(this.res!, statusCode, out);
    } catch {
      // A header value the upstream sent that HTTP/1.1 cannot carry on: the answer is unusable.
      attempt.abandoned = true;
      this.controller?.abort(new Error("the upstream's answer cannot be relayed"));
      this.metrics?.upstreamError("reset");
      this.answer(answers.upstreamUnreachable);
    }
    return true;
  }

  data(
    _attempt: UpstreamTry | undefined,
    controller: Pick<Dispatcher.DispatchController, "pause" | "resume"> & { abort?(reason: Error): void },
    chunk: Buffer,
  ): void {
    const res = this.res! as Writable & GatewayResponse;
    if (!res.write(chunk) && !this.waitingForDrain) {
      // The client reads slower than the upstream sends: hold the upstream until the client catches up,
      // for as long as GATEWAY_SEND_TIMEOUT_MS; a client that stopped reading does not keep both sockets forever.
      this.waitingForDrain = true;
      controller.pause();
      const stalled = setTimeout(() => {
        controller.abort?.(new Error("the client stopped reading the answer"));
        res.destroy();
      }, this.deps.sendTimeoutMs);
      res.once("drain", () => {
        clearTimeout(stalled);
        this.waitingForDrain = false;
        controller.resume();
      });
      res.once("close", () => clearTimeout(stalled));
    }
  }

  /** The request's body failed to parse after it was handed on: 400, and the upstream request is abandoned. */
  malformedBody(): boolean {
    const attempt = this.current;
    if (attempt !== undefined) {
      attempt.abandoned = true;
      this.controller?.abort(new Error("the client's request body is malformed"));
    }
    if (this.res === undefined || this.res.headersSent || this.clientGone) return false;
    this.answer(answers.malformedRequest, ["connection", "close"]);
    return true;
  }

  ended(_attempt: UpstreamTry, trailers: IncomingHttpHeaders): void {
    const res = this.res!;
    // Trailers travel on a chunked answer (RFC 9112 section 7.1.2); Node drops them where it cannot chunk (HTTP/1.0).
    for (const name in trailers) {
      if (trailers[name] !== undefined) {
        res.addTrailers(trailers as Record<string, string | string[]>);
        break;
      }
    }
    res.end();
  }

  failed(attempt: UpstreamTry, kind: UpstreamErrorKind, connected: boolean, _error: Error): void {
    if (!attempt.answered) {
      attempt.target.health.finished(false, this.deps.clock());
      attempt.span.end(0, kind);
    }
    if (this.clientGone) return;
    const res = this.res!;
    if (this.bodyTooLarge) {
      if (res.headersSent) res.destroy();
      else this.answer(bodyTooLargeAnswer(this.route!.maxBodyBytes ?? 0));
      return;
    }
    if (this.retryable(attempt, connected) && this.tryNext()) return;
    this.metrics?.upstreamError(kind);
    if (res.headersSent) {
      // Part of the answer is on its way: the client can only learn of the failure by the connection closing.
      this.upstreamFailed = true;
      res.destroy();
      return;
    }
    this.answer(kind === "timeout" ? answers.upstreamTimeout : answers.upstreamUnreachable);
  }

  /** A WebSocket upgrade that every plugin let through: tunnelled only once the upstream switches protocols. */
  tunnel(): void {
    const pool = this.route!.upstream;
    const now = this.deps.clock();
    const upstream = pool.picker.pick(now, pool.hashOn === undefined ? undefined : this.hashKey(pool.hashOn), undefined);
    if (upstream === undefined) {
      const seconds = retryAfterSeconds(pool.targets, now);
      this.answer(noHealthyTargetAnswer(pool.name, seconds), ["retry-after", String(seconds)]);
      return;
    }
    this.target = upstream;
    const trySpan = this.span.tryStart(upstream.url, 1);
    const client = this.socket!;
    const extra = ["x-request-id", this.requestId, "via", "1.1 gatehouse"];
    if (this.extra !== undefined) extra.push(...this.extra);
    openWebSocketTunnel(
      {
        client,
        head: this.head,
        target: upstream,
        path: upstream.basePath + this.forwardTarget,
        headers: withTraceContext({ ...this.upstreamHeaders(), host: hostHeaderOf(upstream) }, trySpan.headers),
        timeoutMs: this.deps.upstreamTimeoutMs,
        idleTimeoutMs: this.deps.tunnelIdleTimeoutMs,
        answerHeaders: extra,
      },
      {
        opened: () => {
          trySpan.end(101);
          this.upstreamStatus = 101;
          this.deps.tunnels.add(client);
          client.once("close", () => this.deps.tunnels.delete(client));
          this.settle(101);
        },
        answered: (status) => {
          trySpan.end(status);
          this.upstreamStatus = status;
          this.settle(status);
        },
        failed: (kind) => {
          trySpan.end(0, kind);
          this.metrics?.upstreamError(kind);
          this.answer(kind === "timeout" ? answers.upstreamTimeout : answers.upstreamUnreachable);
        },
        closed: () => {
          if (!this.settled) {
            this.clientGone = true;
            this.settle(499);
          }
        },
      },
    );
  }

  // --- bookkeeping ----------------------------------------------------------

  /** Counts and logs the request once, and lets its compiled state go. */
  settle(status: number): void {
    if (this.settled) return;
    this.settled = true;
    const seconds = (performance.now() - this.started) / 1000;
    (this.metrics ?? this.deps.metrics.unmatched).observe(status, seconds);
    this.span.end(status);
    this.deps.accessLog({
      reqId: this.requestId,
      route: this.route?.name ?? "_unmatched",
      method: this.req.method ?? "",
      status,
      upstreamStatus: this.upstreamStatus === 0 ? null : this.upstreamStatus,
      ms: Math.round(seconds * 1e4) / 10,
      client: this.peer === "" ? peerOf(this.req) : this.peer,
      target: this.target?.url ?? null,
      tries: this.tried?.length ?? 0,
    });
    const compiled = this.compiled;
    if (compiled !== undefined) {
      compiled.inFlight--;
      this.deps.settled(compiled);
    }
  }
}

const exchangeOf = Symbol("gateway exchange");

/** "close" of a response: it has ended, or the client went away first (logged as 499). */
function onResponseClose(this: GatewayResponse & { [exchangeOf]?: Exchange }): void {
  const exchange = this[exchangeOf];
  if (exchange === undefined) return;
  if (exchange.upstreamFailed) {
    exchange.settle(502);
    return;
  }
  if (!this.writableFinished) {
    exchange.clientGone = true;
    // Cancels the upstream request (and the upload into it) when the client aborts.
    exchange.controller?.abort(new Error("the client closed the request"));
    exchange.settle(499);
    return;
  }
  exchange.settle(exchange.loggedStatus || this.statusCode);
}

function requestIdOf(req: GatewayRequest): string {
  const incoming = req.headers["x-request-id"];
  return typeof incoming === "string" && safeRequestId.test(incoming) ? incoming : `${requestIdPrefix}-${(++requestCounter).toString(36)}`;
}

/** The gateway's request and upgrade listeners. */
export function createGatewayHandler(deps: GatewayHandlerDeps) {
  return {
    /** A request whose body the parser refused after it was handed on (edge-server.ts). */
    malformedBody(res: ServerResponse): boolean {
      const exchange = (res as ServerResponse & { [exchangeOf]?: Exchange })[exchangeOf];
      return exchange?.malformedBody() ?? false;
    },

    request(req: GatewayRequest, res: GatewayResponse): undefined {
      const exchange = new Exchange(deps, req, res, undefined, undefined, requestIdOf(req), performance.now());
      if ("stream" in req && req.stream.destroyed) {
        // An HTTP/2 stream the client reset (or whose session ended) before its request came to be served.
        exchange.clientGone = true;
        exchange.settle(499);
        return;
      }
      (res as GatewayResponse & { [exchangeOf]?: Exchange })[exchangeOf] = exchange;
      res.on("close", onResponseClose);
      const compiled = deps.current();
      if (compiled === undefined) return exchange.answer(answers.notConfigured);
      compiled.inFlight++;
      exchange.run(compiled);
    },

    /** An `Upgrade: websocket` request (any other upgrade is served as plain HTTP/1.1 by the edge server). */
    upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): undefined {
      const exchange = new Exchange(deps, req, undefined, socket, head, requestIdOf(req), performance.now());
      socket.on("error", () => socket.destroy());
      const compiled = deps.current();
      if (compiled === undefined) return exchange.answer(answers.notConfigured);
      // RFC 6455 section 4.1: the opening handshake is a GET; any other method would be judged as itself and tunnelled as a GET.
      if (req.method !== "GET") return exchange.answer(answers.upgradeNotGet, ["allow", "GET"]);
      if (hasBody(req.headers)) return exchange.answer(answers.upgradeWithBody);
      if (deps.tunnels.size >= deps.maxTunnels) return exchange.answer(answers.tooManyTunnels, ["retry-after", "5"]);
      compiled.inFlight++;
      exchange.compiled = compiled;
      socket.once("close", () => {
        if (!exchange.settled) {
          exchange.clientGone = true;
          exchange.settle(499);
        }
      });
      exchange.run(compiled);
    },
  };
}

/** The Host field of a request to an upstream: its host, and its port unless the scheme's default. */
function hostHeaderOf(upstream: { hostname: string; port: number; secure: boolean }): string {
  const host = upstream.hostname.includes(":") ? `[${upstream.hostname}]` : upstream.hostname;
  return upstream.port === (upstream.secure ? 443 : 80) ? host : `${host}:${upstream.port}`;
}

/** The upstream request's headers with a try's traceparent and tracestate in place of the client's (none: as they are). */
function withTraceContext(headers: Record<string, string | string[]>, trace: readonly string[]): Record<string, string | string[]> {
  if (trace.length === 0) return headers;
  const out = { ...headers };
  delete out.tracestate;
  for (let i = 0; i < trace.length; i += 2) out[trace[i]!] = trace[i + 1]!;
  return out;
}
