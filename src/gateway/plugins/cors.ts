import type { ConfigValue } from "../../domain/config/config-document.js";
import { httpMethods } from "../../domain/config/config-document.js";
import { checkOrigin } from "../../domain/config/config-checks.js";
import { headerName, method, type PluginSchema } from "../../domain/config/plugin-fields.js";
import type { Exchange } from "../gateway-handler.js";
import { writeHeadOf } from "../proxy/write-head.js";
import { stages, type GatewayPlugin } from "./plugin.js";

const schema: PluginSchema = {
  fields: [
    {
      name: "allowed_origins",
      field: { type: "list", item: { type: "string", check: checkOrigin }, min: 1, max: 100 },
      required: true,
      about: 'origins allowed to call, e.g. "https://app.example.com", or "*"',
    },
    {
      name: "allowed_methods",
      field: { type: "list", item: method, min: 1, max: httpMethods.length },
      about: "methods allowed in requests",
    },
    { name: "allowed_headers", field: { type: "list", item: headerName, min: 1, max: 100 }, about: "request headers allowed" },
    { name: "exposed_headers", field: { type: "list", item: headerName, min: 1, max: 100 }, about: "response headers the page may read" },
    { name: "allow_credentials", field: { type: "boolean" }, about: "whether cookies and credentials are allowed" },
    { name: "max_age_seconds", field: { type: "integer", min: 0, max: 86_400 }, about: "how long a preflight answer may be cached" },
  ],
  check(config, report) {
    const origins = config.allowed_origins;
    if (config.allow_credentials === true && Array.isArray(origins) && origins.includes("*")) {
      // Fetch standard, CORS protocol: "*" is not honoured for requests with credentials.
      report(
        "allow_credentials",
        'cannot be true when allowed_origins holds "*": browsers refuse credentials for a wildcard origin; list the origins instead',
      );
    }
  },
};

/**
 * A `cors` plugin, precomputed (Fetch standard, "CORS protocol"). The
 * gateway owns CORS on a route that has the plugin: it answers preflights
 * itself, adds the headers to every other answer of the route, and drops any
 * Access-Control-* headers the upstream sent so a browser never sees two.
 */
export interface CorsPolicy {
  /** Whether the origin may call (always for "*"). */
  allows(origin: string): boolean;
  /** Headers of a preflight answer for an allowed origin: [name, value, ...]. */
  preflightHeaders(origin: string, requestedHeaders: string | undefined): string[];
  /** Appends the headers of an actual answer for an allowed origin to `out`. */
  appendResponseHeaders(origin: string, out: string[]): void;
}

const defaultMethods = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";
/** A list of field names as Access-Control-Request-Headers carries it. */
const headerList = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+(?:[ \t]*,[ \t]*[!#$%&'*+\-.^_`|~0-9A-Za-z]+)*$/;

function createCorsPolicy(config: Record<string, ConfigValue>): CorsPolicy {
  const origins = (config.allowed_origins as string[] | undefined) ?? [];
  const anyOrigin = origins.includes("*");
  const allowed = new Set(origins);
  const credentials = config.allow_credentials === true;
  const methods = Array.isArray(config.allowed_methods) ? (config.allowed_methods as string[]).join(", ") : defaultMethods;
  const headers = Array.isArray(config.allowed_headers) ? (config.allowed_headers as string[]).join(", ") : undefined;
  const exposed = Array.isArray(config.exposed_headers) ? (config.exposed_headers as string[]).join(", ") : undefined;
  const maxAge = typeof config.max_age_seconds === "number" ? String(config.max_age_seconds) : undefined;
  // "*" is only sent when no credentials are allowed (validation refuses both); else the origin is echoed and Vary says so.
  const echo = !anyOrigin || credentials;

  const base = (origin: string): string[] => {
    const out = ["access-control-allow-origin", echo ? origin : "*"];
    if (echo) out.push("vary", "Origin");
    if (credentials) out.push("access-control-allow-credentials", "true");
    return out;
  };

  return {
    allows: (origin) => anyOrigin || allowed.has(origin),
    preflightHeaders(origin, requestedHeaders) {
      const out = base(origin);
      if (echo) out[3] = "Origin, Access-Control-Request-Method, Access-Control-Request-Headers";
      else out.push("vary", "Access-Control-Request-Method, Access-Control-Request-Headers");
      out.push("access-control-allow-methods", methods);
      // Without a configured list, the headers the browser asks for are allowed (when they are a well-formed list).
      const allowHeaders = headers ?? (requestedHeaders !== undefined && headerList.test(requestedHeaders) ? requestedHeaders : undefined);
      if (allowHeaders !== undefined) out.push("access-control-allow-headers", allowHeaders);
      if (maxAge !== undefined) out.push("access-control-max-age", maxAge);
      return out;
    },
    appendResponseHeaders(origin, out) {
      out.push("access-control-allow-origin", echo ? origin : "*");
      if (echo) out.push("vary", "Origin");
      if (credentials) out.push("access-control-allow-credentials", "true");
      if (exposed !== undefined) out.push("access-control-expose-headers", exposed);
    },
  };
}

/**
 * The route's CORS step, first of the pipeline: a preflight (found by the
 * routing, which knows which route a browser asks about) is answered here,
 * before rules and credentials, since browsers send neither on a preflight;
 * any other request of an allowed origin gets the headers on its answer.
 */
function corsStep(policy: CorsPolicy) {
  return {
    kind: "cors",
    run(exchange: Exchange): boolean {
      const res = exchange.res;
      if (res === undefined) return true; // a WebSocket upgrade: no CORS on a tunnel
      exchange.corsOwned = true;
      const headers = exchange.req.headers;
      const origin = headers.origin;
      if (exchange.preflight) {
        const out = ["x-request-id", exchange.requestId, "content-length", "0"];
        if (origin !== undefined && policy.allows(origin))
          out.push(...policy.preflightHeaders(origin, headers["access-control-request-headers"]));
        writeHeadOf(res, 204, out);
        res.end();
        return false;
      }
      if (origin !== undefined && policy.allows(origin)) {
        exchange.extra ??= [];
        policy.appendResponseHeaders(origin, exchange.extra);
      }
      return true;
    },
  };
}

export const cors: GatewayPlugin<CorsPolicy> = {
  type: "cors",
  schema,
  compile: (config) => createCorsPolicy(config),
  attach(instances, route) {
    // One policy answers for the route: the first listed.
    const policy = instances[0];
    if (policy === undefined) return;
    route.setCors(policy);
    route.addStep(stages.cors, corsStep(policy));
  },
};
