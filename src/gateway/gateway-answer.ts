import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { STATUS_CODES } from "node:http";
import { ErrorDetailSchema } from "../../gen/svc/v1/errors_pb.js";
import { errorJson, httpStatusOf } from "../server/error-body.js";

/**
 * An answer the gateway makes itself (docs/errors.md, "The gateway's own answers": 404, 405, 401,
 * 403, 429, 502, 503, 504): the platform's Connect JSON error body with a
 * stable reason, rendered once when the configuration is compiled (or once
 * per process) rather than per request. Messages say what to do and never
 * repeat anything the request carried.
 */
export interface GatewayAnswer {
  readonly status: number;
  /** The JSON body, as bytes. */
  readonly body: Buffer;
  /** The Connect code's wire name, for logs. */
  readonly reason: string;
}

export function gatewayAnswer(
  code: Code,
  reason: string,
  message: string,
  options: { status?: number; retryAfterSeconds?: number } = {},
): GatewayAnswer {
  const error = new ConnectError(message, code);
  error.details.push({
    desc: ErrorDetailSchema,
    value: create(ErrorDetailSchema, { reason, retryAfterSeconds: options.retryAfterSeconds ?? 0 }),
  });
  return { status: options.status ?? httpStatusOf(code), body: Buffer.from(JSON.stringify(errorJson(error))), reason };
}

/** The answers that do not depend on the configuration. */
export const answers = {
  notConfigured: gatewayAnswer(
    Code.Unavailable,
    "gateway_not_configured",
    "the gateway has not loaded a configuration yet: retry shortly (its /readyz answers 200 once it has one)",
  ),
  notFound: gatewayAnswer(Code.NotFound, "route_not_found", "no route of this gateway serves this host and path: check the URL"),
  badTarget: gatewayAnswer(
    Code.InvalidArgument,
    "malformed_path",
    "the request path is malformed: send an absolute path with valid percent-encoding, no backslash (\\ or %5C) and no . or .. segments (also encoded or with ; parameters)",
  ),
  malformedRequest: gatewayAnswer(
    Code.InvalidArgument,
    "malformed_request",
    "the request is not valid HTTP/1.1 (RFC 9112): check the request line, the header fields and the body's framing",
  ),
  requestTimeout: gatewayAnswer(
    Code.DeadlineExceeded,
    "request_timeout",
    "the request did not arrive in time: send the whole request head (and body) without pausing",
    { status: 408 },
  ),
  headersTooLarge: gatewayAnswer(
    Code.ResourceExhausted,
    "request_head_too_large",
    "the request line and header fields are larger than this gateway accepts: send fewer or smaller headers",
    { status: 431 },
  ),
  versionNotSupported: gatewayAnswer(
    Code.Unimplemented,
    "http_version_not_supported",
    "this port speaks HTTP/1.1 (and HTTP/1.0): send the request as HTTP/1.1",
    { status: 505 },
  ),
  expectationFailed: gatewayAnswer(
    Code.InvalidArgument,
    "expectation_failed",
    "the gateway meets only Expect: 100-continue: send the request without that Expect field",
    { status: 417 },
  ),
  connectNotAllowed: gatewayAnswer(Code.Unimplemented, "method_not_allowed", "the gateway is not a forward proxy: CONNECT is not served", {
    status: 405,
  }),
  unknownMethod: gatewayAnswer(
    Code.InvalidArgument,
    "method_unknown",
    "the request method is not one this gateway knows (HTTP/1.1 would not parse it either): use a registered method such as GET or POST",
  ),
  traceNotAllowed: gatewayAnswer(
    Code.Unimplemented,
    "method_not_allowed",
    "TRACE is never forwarded (it would echo credentials back): use another method",
    { status: 405 },
  ),
  missingHost: gatewayAnswer(
    Code.InvalidArgument,
    "host_missing",
    "an HTTP/1.1 request carries one Host header field (RFC 9112 section 3.2): add it",
  ),
  duplicateHost: gatewayAnswer(
    Code.InvalidArgument,
    "host_repeated",
    "the request carries more than one Host header field (RFC 9112 section 3.2): send exactly one",
  ),
  badHost: gatewayAnswer(
    Code.InvalidArgument,
    "host_invalid",
    "the Host header field (or :authority) is not host[:port] (RFC 9110 section 7.2, RFC 3986 section 3.2): no user information, path, space or other character outside a host name",
  ),
  hostMismatch: gatewayAnswer(
    Code.InvalidArgument,
    "host_mismatch",
    "the Host header field differs from the authority of the absolute-form request target: send the same authority in both",
  ),
  badAbsoluteTarget: gatewayAnswer(
    Code.InvalidArgument,
    "malformed_target",
    "the request target is neither an absolute path (/a/b) nor an http or https URL with a host and no user information",
  ),
  upgradeNotGet: gatewayAnswer(
    Code.Unimplemented,
    "method_not_allowed",
    "a WebSocket opening handshake is a GET (RFC 6455 section 4.1): send the upgrade with GET",
    { status: 405 },
  ),
  upgradeWithBody: gatewayAnswer(
    Code.InvalidArgument,
    "upgrade_with_body",
    "a WebSocket opening handshake is a GET without a body (RFC 6455 section 4.1): send it without Content-Length or Transfer-Encoding",
  ),
  redirectToHttps: gatewayAnswer(
    Code.FailedPrecondition,
    "https_required",
    "this domain is served over https only: send the request to the Location given",
    { status: 308 },
  ),
  tooManyTunnels: gatewayAnswer(
    Code.Unavailable,
    "too_many_tunnels",
    "this gateway holds as many WebSocket tunnels as it allows: retry later, or on another instance",
    { status: 503, retryAfterSeconds: 5 },
  ),
  upstreamUnreachable: gatewayAnswer(
    Code.Unavailable,
    "upstream_unreachable",
    "the route's upstream refused or reset the connection: retry later, or tell the upstream's operators",
    { status: 502 },
  ),
  upstreamTimeout: gatewayAnswer(
    Code.DeadlineExceeded,
    "upstream_timeout",
    "the route's upstream did not answer in time: retry later, or tell the upstream's operators",
  ),
  sessionMissing: gatewayAnswer(
    Code.Unauthenticated,
    "session_missing",
    "this route needs a session: send Authorization: Bearer <session token>",
  ),
  sessionInvalid: gatewayAnswer(
    Code.Unauthenticated,
    "session_invalid",
    "the session token is invalid, expired or revoked: sign in again for a new one",
  ),
  noAllowRule: gatewayAnswer(
    Code.PermissionDenied,
    "no_allow_rule_matched",
    "the request matches none of the route's allow rules: it is refused",
  ),
  unresolvedSecret: gatewayAnswer(
    Code.Unavailable,
    "secret_unresolved",
    "the route's configuration references a secret the gateway has not resolved yet: retry later",
  ),
  ruleUnavailable: gatewayAnswer(
    Code.Unavailable,
    "rule_unavailable",
    "one of the route's rules cannot be evaluated by this gateway: the route is closed until its configuration is fixed",
  ),
  shuttingDown: gatewayAnswer(Code.Unavailable, "gateway_shutting_down", "the gateway is shutting down: retry on another instance"),
};

const methodNotAllowed = new Map<string, GatewayAnswer>();
/** The 405 for a path whose routes serve only `allow` (one answer per distinct list). */
export function methodNotAllowedAnswer(allow: string): GatewayAnswer {
  let answer = methodNotAllowed.get(allow);
  if (answer === undefined) {
    answer = gatewayAnswer(
      Code.Unimplemented,
      "method_not_allowed",
      `the routes of this path do not serve the request's method: use one of ${allow} (see the Allow header)`,
      { status: 405 },
    );
    methodNotAllowed.set(allow, answer);
  }
  return answer;
}

export function rateLimitedAnswer(route: string, retryAfterSeconds: number): GatewayAnswer {
  return gatewayAnswer(Code.ResourceExhausted, "rate_limited", `too many requests to route ${route}: retry after ${retryAfterSeconds} s`, {
    retryAfterSeconds,
  });
}

/**
 * The bytes of an answer written straight onto a socket (an upgrade request
 * the gateway refuses, a parser error, CONNECT): an HTTP/1.1 response with
 * Date (RFC 9110 section 6.6.1) that closes the connection.
 * `headers` are [name, value, ...] the gateway built (never raw request text).
 */
export function rawAnswer(answer: GatewayAnswer, headers: readonly string[]): Buffer {
  let head = `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status] ?? ""}\r\ndate: ${new Date().toUTCString()}\r\ncontent-type: application/json\r\ncontent-length: ${answer.body.length}\r\nconnection: close\r\n`;
  for (let i = 0; i < headers.length; i += 2) head += `${headers[i]}: ${headers[i + 1]}\r\n`;
  return Buffer.concat([Buffer.from(`${head}\r\n`, "latin1"), answer.body]);
}

const tooLarge = new Map<number, GatewayAnswer>();
/** The 413 of a body over a route's max_body_bytes. */
export function bodyTooLargeAnswer(limit: number): GatewayAnswer {
  let answer = tooLarge.get(limit);
  if (answer === undefined) {
    answer = gatewayAnswer(
      Code.ResourceExhausted,
      "body_too_large",
      `the request body is larger than this route accepts (${limit} bytes): send a smaller one`,
      { status: 413 },
    );
    tooLarge.set(limit, answer);
  }
  return answer;
}

/** The 503 of an upstream none of whose targets is in rotation; no target was contacted. */
export function noHealthyTargetAnswer(upstream: string, retryAfter: number): GatewayAnswer {
  return gatewayAnswer(
    Code.Unavailable,
    "no_healthy_target",
    `no target of upstream ${JSON.stringify(upstream)} is healthy: retry after ${retryAfter} s`,
    { retryAfterSeconds: retryAfter },
  );
}

/** Seconds until a target may be back in rotation (a breaker half-opens, or a probe runs again); at least 1. */
export function retryAfterSeconds(targets: readonly { readonly health: { retryAfterMs(now: number): number } }[], now: number): number {
  let soonest = Number.POSITIVE_INFINITY;
  for (const target of targets) soonest = Math.min(soonest, target.health.retryAfterMs(now));
  return Number.isFinite(soonest) ? Math.max(1, Math.ceil(soonest / 1000)) : 5;
}
