import type { ConfigValue } from "../domain/config/config-document.js";

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

export function createCorsPolicy(config: Record<string, ConfigValue>): CorsPolicy {
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
