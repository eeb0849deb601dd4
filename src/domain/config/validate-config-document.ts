import {
  checkCidr,
  checkDomainName,
  checkName,
  checkPath,
  checkUpstream,
  checkHeaderName,
  describeValue,
  namePattern,
} from "./config-checks.js";
import {
  emptyDocument,
  httpMethods,
  pluginTypes,
  resourceKinds,
  type CanonicalResource,
  type ConfigValue,
  type DomainResource,
  type PluginType,
  type Resource,
  type ResourceKind,
  type RouteResource,
  type RuleMatch,
} from "./config-document.js";
import { configIsOptional, describePluginConfig, validatePluginConfig } from "./plugin-configs.js";
import { PathViolations, type PathSegment, type PathViolation } from "./path-violations.js";
import { readUpstream, readWholeNumber, upstreamKeys } from "./read-upstream.js";
import { compileRuleRegex } from "./rule-regex.js";

/** A resource of a validated document, with where it stands in the document. */
export interface DocumentResource extends CanonicalResource {
  /** Index in its kind's list. */
  index: number;
  value: Resource;
}

export type ValidatedDocument = Record<ResourceKind, DocumentResource[]>;

const singular: Record<ResourceKind, string> = {
  domains: "domain",
  upstreams: "upstream",
  plugins: "plugin",
  rules: "rule",
  routes: "route",
};
const resourceKeys: Record<ResourceKind, readonly string[]> = {
  domains: ["name", "tls", "redirect_http"],
  upstreams: upstreamKeys,
  plugins: ["name", "type", "config"],
  rules: ["name", "match", "action"],
  routes: ["name", "domains", "path", "methods", "upstream", "timeout_ms", "max_body_bytes", "plugins", "rules"],
};
const listLimits = { domains: 100, plugins: 32, rules: 64 } as const;
/** Bounds of a route's own limits (docs/gateway.md, "The document"). */
const routeLimits = { timeoutMs: { min: 10, max: 600_000 }, maxBodyBytes: { min: 0, max: 10 * 1024 ** 3 } } as const;
const documentKeys = `version, ${resourceKinds.slice(0, -1).join(", ")} and ${resourceKinds[resourceKinds.length - 1]}`;

/**
 * Validates the value of a version 1 document (docs/gateway.md, "The
 * document"): every violation is reported, each with its path. References between
 * resources are checked later, against the state the import would produce.
 */
export function validateConfigDocument(value: unknown): { document: ValidatedDocument; violations: PathViolation[] } {
  const violations = new PathViolations();
  const document: ValidatedDocument = emptyDocument() as ValidatedDocument;
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    violations.add([], `the document must be a mapping that starts with "version: 1", got ${describeValue(value)}`);
    return { document, violations: violations.items };
  }
  const root = value as Record<string, unknown>;
  const checks = memoizedChecks();
  for (const key of Object.keys(root)) {
    if (key !== "version" && !(resourceKinds as readonly string[]).includes(key)) {
      violations.add([key], `unknown key "${key}": a version 1 document has ${documentKeys}`, "key");
    }
  }
  if (root.version === undefined) violations.add(["version"], 'required: the format version, "version: 1"');
  else if (root.version !== 1) violations.add(["version"], `must be 1 (the only format version), got ${describeValue(root.version)}`);

  for (const kind of resourceKinds) {
    const list = root[kind];
    if (list === undefined || list === null) continue;
    if (!Array.isArray(list)) {
      violations.add([kind], `must be a list of ${kind} (each entry starting with "- name: ..."), got ${describeValue(list)}`);
      continue;
    }
    const firstIndex = new Map<string, number>();
    list.forEach((item, index) => {
      const path: PathSegment[] = [kind, index];
      const before = violations.items.length;
      const resource = readResource(kind, item, path, violations, checks);
      // A duplicate is reported even when the resource has other problems.
      const name = resource?.name ?? validNameOf(kind, item);
      if (name === undefined) return;
      const earlier = firstIndex.get(name);
      if (earlier !== undefined) {
        violations.add([...path, "name"], `duplicate name "${name}": ${kind}[${earlier}] already has it; names are unique per kind`);
        return;
      }
      firstIndex.set(name, index);
      if (resource !== undefined && violations.items.length === before) {
        document[kind].push({ kind, name, spec: JSON.stringify(resource), index, value: resource });
      }
    });
  }
  return { document, violations: violations.items };
}

function validNameOf(kind: ResourceKind, item: unknown): string | undefined {
  const name = item !== null && typeof item === "object" ? (item as { name?: unknown }).name : undefined;
  if (typeof name !== "string") return undefined;
  return (kind === "domains" ? checkDomainName(name) : checkName(name)) === undefined ? name : undefined;
}

/**
 * Checks whose answers are kept for the rest of one document: large documents
 * repeat a few upstreams thousands of times, and parsing each as a URL again
 * is most of what reading a route costs.
 */
function memoizedChecks() {
  const upstreams = new Map<string, string | undefined>();
  const regexes = new Map<string, string | undefined>();
  /** The problem of an http or https URL of a route or a target. */
  const upstream = (value: string): string | undefined => {
    if (upstreams.has(value)) return upstreams.get(value);
    const problem = checkUpstream(value);
    if (upstreams.size < 1_000) upstreams.set(value, problem);
    return problem;
  };
  return {
    /** The problem of a rule regex, as compileRuleRegex (the gateway's matcher) sees it. */
    regex(source: string, ignoreCase: boolean): string | undefined {
      const key = `${ignoreCase ? "i" : "-"}${source}`;
      if (regexes.has(key)) return regexes.get(key);
      const compiled = compileRuleRegex(source, { ignoreCase });
      const problem = compiled.ok ? undefined : compiled.problem;
      if (regexes.size < 1_000) regexes.set(key, problem);
      return problem;
    },
    upstream,
    /**
     * A route's upstream: the name of an entry of upstreams (resolved later,
     * against the resulting state), else an http or https URL. A name holds no
     * ":", a URL always does, so neither can be taken for the other.
     */
    routeUpstream(value: string): string | undefined {
      if (namePattern.test(value)) return undefined;
      const problem = upstream(value);
      if (problem === undefined || value.includes(":")) return problem;
      if (namePattern.test(value.toLowerCase())) return `upstream names are lower case: use "${value.toLowerCase()}"`;
      return `${describeValue(value)} is not an upstream URL (it starts with http:// or https://, e.g. "http://127.0.0.1:8081") nor the name of an entry of upstreams (1 to 63 lower-case letters, digits and hyphens, e.g. "plants")`;
    },
  };
}

type DocumentChecks = ReturnType<typeof memoizedChecks>;

function readResource(
  kind: ResourceKind,
  item: unknown,
  path: PathSegment[],
  violations: PathViolations,
  checks: DocumentChecks,
): Resource | undefined {
  if (item === null || typeof item !== "object" || Array.isArray(item)) {
    violations.add(path, `each ${singular[kind]} is a mapping with a name (e.g. "- name: ..."), got ${describeValue(item)}`);
    return undefined;
  }
  const input = item as Record<string, unknown>;
  const allowed = resourceKeys[kind];
  for (const key of Object.keys(input)) {
    if (!allowed.includes(key)) {
      violations.add([...path, key], `unknown key "${key}": ${article(singular[kind])} ${singular[kind]} has ${allowed.join(", ")}`, "key");
    }
  }
  const name = readName(kind, input.name, path, violations);
  switch (kind) {
    case "domains":
      return readDomain(name, input, path, violations);
    case "upstreams":
      return readUpstream(name, input, path, violations, checks.upstream);
    case "plugins":
      return readPlugin(name, input, path, violations);
    case "rules":
      return readRule(name, input, path, violations, checks);
    case "routes":
      return readRoute(name, input, path, violations, checks);
  }
}

/** One secret reference and nothing else: what a certificate or a key of a domain's `tls` is. */
const wholeReference = /^\$\{secret:[a-z0-9][a-z0-9_-]{0,63}\/[A-Za-z_][A-Za-z0-9_.-]{0,127}\}$/;

/** A domain: its name, and its TLS certificate and key as secret references, and whether plain HTTP is redirected. */
function readDomain(
  name: string | undefined,
  input: Record<string, unknown>,
  path: PathSegment[],
  violations: PathViolations,
): DomainResource | undefined {
  const before = violations.items.length;
  const domain: DomainResource = { name: name ?? "" };
  if (input.tls !== undefined) {
    const tlsPath = [...path, "tls"];
    const tls = input.tls;
    if (tls === null || typeof tls !== "object" || Array.isArray(tls)) {
      violations.add(
        tlsPath,
        `must be a mapping of certificate and private_key, each a secret reference (e.g. {certificate: "\${secret:production/API_CERT}", private_key: "\${secret:production/API_KEY}"}), got ${describeValue(tls)}`,
      );
    } else {
      const fields = tls as Record<string, unknown>;
      for (const key of Object.keys(fields)) {
        if (key !== "certificate" && key !== "private_key")
          violations.add([...tlsPath, key], `unknown key "${key}": tls has certificate and private_key`, "key");
      }
      const read = (key: "certificate" | "private_key", what: string): string | undefined => {
        const value = fields[key];
        if (value === undefined || value === null) {
          violations.add(
            [...tlsPath, key],
            `required: a secret reference to the ${what} (e.g. "\${secret:production/API_${key === "certificate" ? "CERT" : "KEY"}}")`,
          );
          return undefined;
        }
        if (typeof value !== "string" || !wholeReference.test(value)) {
          // Never echo the value: it may be a pasted key.
          violations.add(
            [...tlsPath, key],
            `must be one secret reference, \${secret:<environment>/<name>}, to the ${what} stored with the Secrets API: a ${key === "private_key" ? "key" : "certificate"} is never written into the document`,
          );
          return undefined;
        }
        return value;
      };
      const certificate = read("certificate", "PEM certificate chain (leaf first)");
      const privateKey = read("private_key", "PEM private key (RSA or ECDSA)");
      if (certificate !== undefined && privateKey !== undefined) domain.tls = { certificate, private_key: privateKey };
    }
  }
  if (input.redirect_http !== undefined) {
    if (typeof input.redirect_http !== "boolean")
      violations.add([...path, "redirect_http"], `must be true or false, got ${describeValue(input.redirect_http)}`);
    else if (input.redirect_http && input.tls === undefined)
      violations.add([...path, "redirect_http"], "redirects plain HTTP to https: give the domain a tls certificate first");
    else if (input.redirect_http) domain.redirect_http = true;
  }
  return name === undefined || violations.items.length > before ? undefined : domain;
}

function article(word: string): string {
  return /^[aeiou]/.test(word) ? "an" : "a";
}

function readName(kind: ResourceKind, raw: unknown, parent: PathSegment[], violations: PathViolations): string | undefined {
  const path = () => [...parent, "name"];
  if (raw === undefined || raw === null) {
    violations.add(path(), kind === "domains" ? "required: the hostname (e.g. api.example.com)" : `required: the ${singular[kind]}'s name`);
    return undefined;
  }
  if (typeof raw !== "string") {
    violations.add(path(), `must be a string, got ${describeValue(raw)}`);
    return undefined;
  }
  const problem = kind === "domains" ? checkDomainName(raw) : checkName(raw);
  if (problem) {
    violations.add(path(), problem);
    return undefined;
  }
  return raw;
}

/** A required string field `key` of the mapping at `parent`. */
function readString(
  raw: unknown,
  parent: PathSegment[],
  key: string,
  violations: PathViolations,
  what: string,
  check: (v: string) => string | undefined,
) {
  if (raw === undefined || raw === null) {
    violations.add([...parent, key], `required: ${what}`);
    return undefined;
  }
  if (typeof raw !== "string") {
    violations.add([...parent, key], `must be a string (${what}), got ${describeValue(raw)}`);
    return undefined;
  }
  const problem = check(raw);
  if (problem) {
    violations.add([...parent, key], problem);
    return undefined;
  }
  return raw;
}

function readPlugin(
  name: string | undefined,
  input: Record<string, unknown>,
  path: PathSegment[],
  violations: PathViolations,
): Resource | undefined {
  const before = violations.items.length;
  const type = readString(input.type, path, "type", violations, `the plugin type, one of ${pluginTypes.join(", ")}`, (value) =>
    (pluginTypes as readonly string[]).includes(value)
      ? undefined
      : `unknown plugin type ${describeValue(value)}: use one of ${pluginTypes.join(", ")}`,
  ) as PluginType | undefined;
  let config: Record<string, ConfigValue> | undefined;
  if (type !== undefined) {
    if ((input.config === undefined || input.config === null) && configIsOptional(type)) config = {};
    else if (input.config === undefined || input.config === null) {
      violations.add([...path, "config"], `required for a ${type} plugin: ${describePluginConfig(type)}`);
    } else config = validatePluginConfig(type, input.config, [...path, "config"], violations);
  }
  if (name === undefined || type === undefined || config === undefined || violations.items.length !== before) return undefined;
  return { name, type, config };
}

function readRule(
  name: string | undefined,
  input: Record<string, unknown>,
  path: PathSegment[],
  violations: PathViolations,
  checks: DocumentChecks,
): Resource | undefined {
  const before = violations.items.length;
  const match = readMatch(input.match, [...path, "match"], violations, checks);
  const action = readString(input.action, path, "action", violations, "deny or allow", (value) =>
    value === "deny" || value === "allow" ? undefined : `must be deny or allow, got ${describeValue(value)}`,
  ) as "deny" | "allow" | undefined;
  if (name === undefined || match === undefined || action === undefined || violations.items.length !== before) return undefined;
  return { name, match, action };
}

const matchForms = "one of {header: <name>, regex: <pattern>, ignore_case: true|false}, {path_prefix: /path} or {ip_cidr: 10.0.0.0/8}";

function readMatch(raw: unknown, path: PathSegment[], violations: PathViolations, checks: DocumentChecks): RuleMatch | undefined {
  if (raw === undefined || raw === null) {
    violations.add(path, `required: what the rule matches, ${matchForms}`);
    return undefined;
  }
  if (typeof raw !== "object" || Array.isArray(raw)) {
    violations.add(path, `must be a mapping, ${matchForms}; got ${describeValue(raw)}`);
    return undefined;
  }
  const input = raw as Record<string, unknown>;
  const allowed = ["header", "regex", "ignore_case", "path_prefix", "ip_cidr"];
  for (const key of Object.keys(input)) {
    if (!allowed.includes(key)) violations.add([...path, key], `unknown key "${key}": a match is ${matchForms}`, "key");
  }
  const forms = [
    "header" in input || "regex" in input || "ignore_case" in input ? "header" : undefined,
    "path_prefix" in input ? "path_prefix" : undefined,
    "ip_cidr" in input ? "ip_cidr" : undefined,
  ].filter((f) => f !== undefined);
  if (forms.length === 0) {
    if (Object.keys(input).every((key) => allowed.includes(key))) violations.add(path, `is empty: give ${matchForms}`);
    return undefined;
  }
  if (forms.length > 1) {
    violations.add(path, `combines ${forms.join(" and ")}: a rule matches exactly ${matchForms}; write one rule per condition`);
    return undefined;
  }
  const before = violations.items.length;
  if (forms[0] === "header") {
    const header = readString(input.header, path, "header", violations, 'the request header to test (e.g. "user-agent")', checkHeaderName);
    const ignoreCase = input.ignore_case;
    const regex = readString(
      input.regex,
      path,
      "regex",
      violations,
      'a regular expression without delimiters, in RE2 syntax (e.g. "bot")',
      (value) => checks.regex(value, ignoreCase === true),
    );
    if (ignoreCase !== undefined && ignoreCase !== null && typeof ignoreCase !== "boolean") {
      violations.add([...path, "ignore_case"], `must be true or false, got ${describeValue(ignoreCase)}`);
    }
    if (header === undefined || regex === undefined || violations.items.length !== before) return undefined;
    const match: RuleMatch = { header: header.toLowerCase(), regex };
    if (typeof ignoreCase === "boolean") match.ignore_case = ignoreCase;
    return match;
  }
  if (forms[0] === "path_prefix") {
    const prefix = readString(input.path_prefix, path, "path_prefix", violations, 'a path prefix (e.g. "/admin")', (v) =>
      checkPath(v, { wildcard: false }),
    );
    return prefix === undefined ? undefined : { path_prefix: prefix };
  }
  const cidr = readString(input.ip_cidr, path, "ip_cidr", violations, 'a CIDR block (e.g. "10.0.0.0/8")', checkCidr);
  return cidr === undefined ? undefined : { ip_cidr: cidr };
}

function readRoute(
  name: string | undefined,
  input: Record<string, unknown>,
  path: PathSegment[],
  violations: PathViolations,
  checks: DocumentChecks,
): Resource | undefined {
  const before = violations.items.length;
  const domains = readNameList(input.domains, path, "domains", violations, {
    what: "hostnames of domains",
    max: listLimits.domains,
    check: checkDomainName,
    empty: "omit domains to serve the route on every domain; an empty list would serve it on none",
  });
  const routePath = readString(
    input.path,
    path,
    "path",
    violations,
    'the request path (e.g. "/plants", or "/plants/*" for a prefix)',
    (v) => checkPath(v, { wildcard: true }),
  );
  const methods = readNameList(input.methods, path, "methods", violations, {
    what: "HTTP methods",
    max: httpMethods.length,
    check: (value) =>
      (httpMethods as readonly string[]).includes(value)
        ? undefined
        : (httpMethods as readonly string[]).includes(value.toUpperCase())
          ? `methods are upper case: use "${value.toUpperCase()}"`
          : `${describeValue(value)} is not a method: use one of ${httpMethods.join(", ")}`,
    empty: "omit methods to accept every method; an empty list would accept none",
  });
  const upstream = readString(
    input.upstream,
    path,
    "upstream",
    violations,
    'the http or https URL requests are sent to (e.g. "http://127.0.0.1:8081"), or the name of an entry of upstreams',
    checks.routeUpstream,
  );
  // Most routes have neither: no path is built for a field that is absent.
  const timeoutMs =
    input.timeout_ms === undefined
      ? undefined
      : readWholeNumber(input.timeout_ms, [...path, "timeout_ms"], violations, routeLimits.timeoutMs, " ms");
  const maxBodyBytes =
    input.max_body_bytes === undefined
      ? undefined
      : readWholeNumber(input.max_body_bytes, [...path, "max_body_bytes"], violations, routeLimits.maxBodyBytes, " bytes (10 GiB)");
  const plugins = readNameList(input.plugins, path, "plugins", violations, {
    what: "plugin names",
    max: listLimits.plugins,
    check: checkName,
  });
  const rules = readNameList(input.rules, path, "rules", violations, { what: "rule names", max: listLimits.rules, check: checkName });
  if (name === undefined || routePath === undefined || upstream === undefined || violations.items.length !== before) return undefined;
  // Canonical order and form: optional lists absent rather than empty (assigned in order, no intermediate objects).
  const route = { name } as RouteResource;
  if (domains) route.domains = domains;
  route.path = routePath;
  if (methods) route.methods = methods;
  route.upstream = upstream;
  if (timeoutMs !== undefined) route.timeout_ms = timeoutMs;
  if (maxBodyBytes !== undefined) route.max_body_bytes = maxBodyBytes;
  if (plugins && plugins.length > 0) route.plugins = plugins;
  if (rules && rules.length > 0) route.rules = rules;
  return route;
}

function readNameList(
  raw: unknown,
  parent: PathSegment[],
  key: string,
  violations: PathViolations,
  options: { what: string; max: number; check: (value: string) => string | undefined; empty?: string },
): string[] | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (!Array.isArray(raw)) {
    violations.add([...parent, key], `must be a list of ${options.what} (e.g. [a, b]), got ${describeValue(raw)}`);
    return undefined;
  }
  if (raw.length === 0 && options.empty) {
    violations.add([...parent, key], options.empty);
    return undefined;
  }
  if (raw.length > options.max) {
    violations.add([...parent, key], `holds ${raw.length} ${options.what}; at most ${options.max} are allowed`);
    return undefined;
  }
  // Lists are short (at most options.max): a scan finds duplicates without a Map per list.
  let valid = true;
  for (let i = 0; i < raw.length; i++) {
    const item: unknown = raw[i];
    if (typeof item !== "string") {
      violations.add([...parent, key, i], `must be a string, got ${describeValue(item)}`);
      valid = false;
      continue;
    }
    const problem = options.check(item);
    if (problem) {
      violations.add([...parent, key, i], problem);
      valid = false;
      continue;
    }
    const first = raw.indexOf(item);
    if (first !== i) {
      violations.add([...parent, key, i], `"${item}" is listed twice (also at [${first}])`);
      valid = false;
    }
  }
  // The reader's fresh array is the canonical list when every item is fine; the caller only uses it then.
  return valid ? (raw as string[]) : [];
}
