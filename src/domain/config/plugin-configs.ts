import { checkHeaderName, checkHeaderValue, checkOrigin, describeValue } from "./config-checks.js";
import { httpMethods, type ConfigValue, type PluginType } from "./config-document.js";
import type { PathSegment, PathViolations } from "./path-violations.js";

/**
 * The `config` of each plugin type: its fields in canonical order, their
 * types and bounds, and the rules that span fields. Header names are
 * case-insensitive (RFC 9110 section 5.1), so their canonical form is lower case.
 */
type StringField = { type: "string"; check: (value: string) => string | undefined; canonical?: (value: string) => string };
type Field =
  | { type: "integer"; min: number; max: number }
  | { type: "boolean" }
  | StringField
  | { type: "list"; item: StringField; min: number; max: number }
  | { type: "headers"; max: number };

interface FieldSpec {
  name: string;
  field: Field;
  required?: boolean;
  /** One line for the README and for messages. */
  about: string;
}

interface PluginSchema {
  fields: FieldSpec[];
  /** Rules across fields, on the canonical config. */
  check?(config: Record<string, ConfigValue>, report: (field: string, description: string) => void): void;
}

const lower = (value: string) => value.toLowerCase();
const headerName: StringField = { type: "string", check: checkHeaderName, canonical: lower };
const method: StringField = {
  type: "string",
  check: (value) =>
    (httpMethods as readonly string[]).includes(value)
      ? undefined
      : (httpMethods as readonly string[]).includes(value.toUpperCase())
        ? `methods are upper case: use "${value.toUpperCase()}"`
        : `${describeValue(value)} is not a method: use one of ${httpMethods.join(", ")}`,
};

/**
 * Headers a request-headers plugin may not set, add or remove (docs/gateway.md,
 * "request-headers"): those that frame the message or belong to one connection
 * (RFC 9110 section 7.6.1, RFC 9112 section 6), Host (it selects the virtual
 * host: a changed Host sends the request, and any secret it carries, to
 * another site behind a shared ingress), and the forwarding fields the
 * gateway owns (X-Forwarded-*). A name is compared ignoring case and with
 * `_` read as `-`, as CGI-style servers read it.
 */
const protectedHeaders = new Set([
  "host",
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "te",
  "trailer",
  "upgrade",
  "proxy-connection",
]);

/** Whether a request-headers plugin may not change this header. */
export function isForbiddenRewriteHeader(name: string): boolean {
  const canonical = name.toLowerCase().replaceAll("_", "-");
  return protectedHeaders.has(canonical) || canonical.startsWith("x-forwarded-");
}

const modifiableHeader: StringField = {
  type: "string",
  check: (value) =>
    checkHeaderName(value) ??
    (isForbiddenRewriteHeader(value)
      ? value.toLowerCase().replaceAll("_", "-") === "host"
        ? "the host header selects the upstream's virtual host and cannot be changed by a plugin: point the route's upstream at that host instead"
        : value.toLowerCase().replaceAll("_", "-").startsWith("x-forwarded-")
          ? `the ${value.toLowerCase()} header is set by the gateway (X-Forwarded-*) and cannot be changed by a plugin`
          : `the ${value.toLowerCase()} header frames the request or belongs to one connection and cannot be changed by a plugin`
      : undefined),
  canonical: lower,
};

export const pluginSchemas: Record<PluginType, PluginSchema> = {
  "rate-limit": {
    fields: [
      {
        name: "requests",
        field: { type: "integer", min: 1, max: 1_000_000_000 },
        required: true,
        about: "requests allowed per window, per client",
      },
      { name: "window_seconds", field: { type: "integer", min: 1, max: 86_400 }, required: true, about: "length of the window in seconds" },
    ],
  },
  cors: {
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
  },
  "session-auth": {
    fields: [
      { name: "required", field: { type: "boolean" }, about: "when false, requests without a session pass through (default true)" },
      { name: "forward_identity_header", field: headerName, about: "request header that carries the identity id to the upstream" },
    ],
  },
  "api-key-auth": {
    fields: [
      { name: "header", field: headerName, about: 'request header that carries the key (default "x-api-key")' },
      { name: "hide_credentials", field: { type: "boolean" }, about: "remove the key before forwarding to the upstream" },
    ],
  },
  "request-headers": {
    fields: [
      { name: "set", field: { type: "headers", max: 64 }, about: "headers to set (replacing any value), name: value" },
      { name: "add", field: { type: "headers", max: 64 }, about: "headers to add (keeping existing values), name: value" },
      { name: "remove", field: { type: "list", item: modifiableHeader, min: 1, max: 64 }, about: "headers to remove" },
    ],
    check(config, report) {
      if (!("set" in config) && !("add" in config) && !("remove" in config)) {
        report("", "a request-headers plugin needs at least one of set, add or remove");
      }
    },
  },
};

/** True when a plugin of this type may omit `config` (every field is optional). */
export function configIsOptional(type: PluginType): boolean {
  return pluginSchemas[type].fields.every((f) => !f.required) && pluginSchemas[type].check === undefined;
}

/** The fields of a plugin type's config, for messages: "requests (required: ...); window_seconds (...)". */
export function describePluginConfig(type: PluginType): string {
  return pluginSchemas[type].fields.map((f) => `${f.name} (${f.required ? "required: " : ""}${f.about})`).join("; ");
}

/** Validates a plugin's config; answers its canonical form, or undefined when it has violations. */
export function validatePluginConfig(
  type: PluginType,
  value: unknown,
  path: PathSegment[],
  violations: PathViolations,
): Record<string, ConfigValue> | undefined {
  const schema = pluginSchemas[type];
  const before = violations.items.length;
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    violations.add(path, `must be a mapping of the ${type} settings, got ${describeValue(value)}; it has ${describePluginConfig(type)}`);
    return undefined;
  }
  const input = value as Record<string, unknown>;
  const known = new Set(schema.fields.map((f) => f.name));
  for (const key of Object.keys(input)) {
    if (!known.has(key)) {
      violations.add([...path, key], `unknown key "${key}" for a ${type} plugin: its config has ${describePluginConfig(type)}`, "key");
    }
  }
  const config: Record<string, ConfigValue> = {};
  for (const spec of schema.fields) {
    const raw = input[spec.name];
    const fieldPath = [...path, spec.name];
    if (raw === undefined || raw === null) {
      if (spec.required) violations.add(fieldPath, `required: ${spec.about}`);
      continue;
    }
    const canonical = readField(spec.field, raw, fieldPath, violations);
    if (canonical !== undefined) config[spec.name] = canonical;
  }
  if (violations.items.length === before && schema.check) {
    schema.check(config, (field, description) => violations.add(field === "" ? path : [...path, field], description));
  }
  return violations.items.length === before ? config : undefined;
}

function readField(field: Field, raw: unknown, path: PathSegment[], violations: PathViolations): ConfigValue | undefined {
  switch (field.type) {
    case "integer":
      if (typeof raw !== "number" || !Number.isInteger(raw) || raw < field.min || raw > field.max) {
        violations.add(path, `must be a whole number from ${field.min} to ${field.max.toLocaleString("en-US")}, got ${describeValue(raw)}`);
        return undefined;
      }
      return raw;
    case "boolean":
      if (typeof raw !== "boolean") {
        violations.add(path, `must be true or false, got ${describeValue(raw)}`);
        return undefined;
      }
      return raw;
    case "string":
      return readString(field, raw, path, violations);
    case "list": {
      if (!Array.isArray(raw)) {
        violations.add(path, `must be a list, got ${describeValue(raw)}`);
        return undefined;
      }
      if (raw.length < field.min || raw.length > field.max) {
        violations.add(
          path,
          `must hold ${field.min} to ${field.max} entries, got ${raw.length}${raw.length === 0 ? " (omit the key instead)" : ""}`,
        );
        return undefined;
      }
      const out: string[] = [];
      const seen = new Map<string, number>();
      raw.forEach((item, i) => {
        const value = readString(field.item, item, [...path, i], violations);
        if (value === undefined) return;
        const first = seen.get(value);
        if (first !== undefined) violations.add([...path, i], `${describeValue(value)} is listed twice (also at [${first}])`);
        else seen.set(value, i);
        out.push(value);
      });
      return out;
    }
    case "headers": {
      if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
        violations.add(path, `must be a mapping of header name to value (e.g. {x-env: production}), got ${describeValue(raw)}`);
        return undefined;
      }
      const entries = Object.entries(raw as Record<string, unknown>);
      if (entries.length === 0 || entries.length > field.max) {
        violations.add(
          path,
          `must hold 1 to ${field.max} headers, got ${entries.length}${entries.length === 0 ? " (omit the key instead)" : ""}`,
        );
        return undefined;
      }
      const out: Record<string, string> = {};
      const seen = new Map<string, string>();
      for (const [name, value] of entries) {
        const namePath = [...path, name];
        const nameProblem = modifiableHeader.check(name);
        if (nameProblem) {
          violations.add(namePath, nameProblem, "key");
          continue;
        }
        const canonicalName = name.toLowerCase();
        const earlier = seen.get(canonicalName);
        if (earlier !== undefined) {
          violations.add(namePath, `header "${name}" is given twice (also as "${earlier}"; header names ignore case)`, "key");
          continue;
        }
        seen.set(canonicalName, name);
        if (typeof value !== "string") {
          // Never echo a header value: it may be a credential for the upstream.
          violations.add(
            namePath,
            typeof value === "number" || typeof value === "boolean"
              ? `must be a string: quote the value`
              : `must be a string, got ${describeValue(value)}`,
          );
          continue;
        }
        const valueProblem = checkHeaderValue(value);
        if (valueProblem) {
          violations.add(namePath, valueProblem);
          continue;
        }
        out[canonicalName] = value;
      }
      const sorted: Record<string, string> = {};
      for (const name of Object.keys(out).sort()) sorted[name] = out[name] as string;
      return sorted;
    }
  }
}

function readString(field: StringField, raw: unknown, path: PathSegment[], violations: PathViolations): string | undefined {
  if (typeof raw !== "string") {
    violations.add(path, `must be a string, got ${describeValue(raw)}`);
    return undefined;
  }
  const problem = field.check(raw);
  if (problem) {
    violations.add(path, problem);
    return undefined;
  }
  return field.canonical ? field.canonical(raw) : raw;
}
