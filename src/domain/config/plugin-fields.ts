import { checkHeaderName, checkHeaderValue, describeValue } from "./config-checks.js";
import { httpMethods, type ConfigValue } from "./config-document.js";
import { headerKey, isForwardingHeader } from "./forwarding-headers.js";
import type { PathSegment, PathViolations } from "./path-violations.js";

/**
 * The `config` of each plugin type: its fields in canonical order, their
 * types and bounds, and the rules that span fields. Header names are
 * case-insensitive (RFC 9110 section 5.1), so their canonical form is lower case.
 */
export type StringField = { type: "string"; check: (value: string) => string | undefined; canonical?: (value: string) => string };
export type Field =
  | { type: "integer"; min: number; max: number }
  | { type: "boolean" }
  | StringField
  | { type: "list"; item: StringField; min: number; max: number }
  | { type: "headers"; max: number };

export interface FieldSpec {
  name: string;
  field: Field;
  required?: boolean;
  /** One line for the README and for messages. */
  about: string;
}

export interface PluginSchema {
  fields: FieldSpec[];
  /** Rules across fields, on the canonical config. */
  check?(config: Record<string, ConfigValue>, report: (field: string, description: string) => void): void;
}

const lower = (value: string) => value.toLowerCase();
export const headerName: StringField = { type: "string", check: checkHeaderName, canonical: lower };
export const method: StringField = {
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

/** Why a plugin may not own this header (set it, or read it as a credential to hide), or undefined. */
function ownershipProblem(value: string, alsoRefused: readonly string[]): string | undefined {
  const key = headerKey(value);
  return isForbiddenRewriteHeader(value) ||
    isForwardingHeader(value) ||
    key === "x-request-id" ||
    key === "via" ||
    alsoRefused.includes(key)
    ? `the ${value.toLowerCase()} header is the gateway's, frames the request, or says who the client is or where the request goes: name another header (e.g. "x-identity-id")`
    : undefined;
}

/** api-key-auth's header: any but those the gateway owns, frames the message with, or that say who the client is or where the request goes. */
export const credentialHeader: StringField = {
  type: "string",
  check: (value) => checkHeaderName(value) ?? ownershipProblem(value, []),
  canonical: (value) => value.toLowerCase(),
};

/** session-auth's forward_identity_header: as credentialHeader, and not a credential of the client's own (Authorization, Cookie). */
export const identityHeaderName: StringField = {
  type: "string",
  check: (value) => checkHeaderName(value) ?? ownershipProblem(value, ["authorization", "cookie"]),
  canonical: (value) => value.toLowerCase(),
};

export const modifiableHeader: StringField = {
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

/** True when a config of this schema may be omitted (every field is optional). */
export function schemaIsOptional(schema: PluginSchema): boolean {
  return schema.fields.every((f) => !f.required) && schema.check === undefined;
}

/** The fields of a config, for messages: "requests (required: ...); window_seconds (...)". */
export function describeSchema(schema: PluginSchema): string {
  return schema.fields.map((f) => `${f.name} (${f.required ? "required: " : ""}${f.about})`).join("; ");
}

/** Validates a plugin's config against its schema; answers its canonical form, or undefined when it has violations. */
export function validateWithSchema(
  type: string,
  schema: PluginSchema,
  value: unknown,
  path: PathSegment[],
  violations: PathViolations,
): Record<string, ConfigValue> | undefined {
  const before = violations.items.length;
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    violations.add(path, `must be a mapping of the ${type} settings, got ${describeValue(value)}; it has ${describeSchema(schema)}`);
    return undefined;
  }
  const input = value as Record<string, unknown>;
  const known = new Set(schema.fields.map((f) => f.name));
  for (const key of Object.keys(input)) {
    if (!known.has(key)) {
      violations.add([...path, key], `unknown key "${key}" for a ${type} plugin: its config has ${describeSchema(schema)}`, "key");
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
