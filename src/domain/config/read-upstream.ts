import { checkCookieName, checkHeaderName, checkPath, checkWholeNumber, describeValue } from "./config-checks.js";
import type { Balancer, UpstreamResource, UpstreamTargetSpec } from "./config-document.js";
import type { PathSegment, PathViolations } from "./path-violations.js";

/**
 * An entry of `upstreams` (docs/gateway.md, "Upstreams"): a named pool of
 * targets that routes name as their `upstream`. Every field is checked and
 * every problem reported with its path; the canonical form keeps the fields
 * in the order below and leaves out what the document left out. A value given
 * explicitly is kept as given, also when it equals the default (`weight:
 * 100`, `retries: 1`), as plugin configs keep theirs: export writes back what
 * was written, and re-importing it changes nothing.
 */
export const upstreamKeys = ["name", "targets", "balancer", "hash_on", "health_check", "retries", "timeouts"] as const;

export const balancers: readonly Balancer[] = ["round-robin", "least-requests", "consistent-hash"];

export const upstreamLimits = {
  targets: 64,
  weight: { min: 0, max: 1000 },
  retries: { min: 0, max: 5 },
  timeoutMs: { min: 10, max: 600_000 },
  active: {
    intervalSeconds: { min: 1, max: 3600, default: 5 },
    timeoutMs: { min: 10, max: 60_000, default: 1000 },
    healthyAfter: { min: 1, max: 10 },
    unhealthyAfter: { min: 1, max: 10 },
  },
  passive: { unhealthyAfter: { min: 1, max: 100 }, recoverAfterSeconds: { min: 1, max: 3600 } },
} as const;

const targetKeys = ["url", "weight"];
const healthCheckKeys = ["active", "passive"];
const activeKeys = ["path", "interval_seconds", "timeout_ms", "healthy_after", "unhealthy_after"];
const passiveKeys = ["unhealthy_after", "recover_after_seconds"];
const timeoutKeys = ["connect_ms", "response_ms"];
const hashOnForms = "client, header:<name> or cookie:<name> (e.g. header:x-user-id)";

type Active = NonNullable<NonNullable<UpstreamResource["health_check"]>["active"]>;
type Passive = NonNullable<NonNullable<UpstreamResource["health_check"]>["passive"]>;

/**
 * Reads the fields of one upstream after its name; `checkUrl` is the check of
 * a route's upstream URL (checkUpstream, memoised for the document). Answers
 * the canonical upstream, or undefined when any field has a problem.
 */
export function readUpstream(
  name: string | undefined,
  input: Record<string, unknown>,
  path: PathSegment[],
  violations: PathViolations,
  checkUrl: (value: string) => string | undefined,
): UpstreamResource | undefined {
  const before = violations.items.length;
  const targets = readTargets(input.targets, [...path, "targets"], violations, checkUrl);
  const balancer = readBalancer(input.balancer, [...path, "balancer"], violations);
  // An invalid balancer is reported once: hash_on is then not judged against it.
  const balancerKnown = balancer !== undefined || input.balancer === undefined || input.balancer === null;
  const hashOn = readHashOn(input.hash_on, balancerKnown ? (balancer ?? "round-robin") : undefined, [...path, "hash_on"], violations);
  const healthCheck = readHealthCheck(input.health_check, [...path, "health_check"], violations);
  const retries = readWholeNumber(input.retries, [...path, "retries"], violations, upstreamLimits.retries);
  const timeouts = readTimeouts(input.timeouts, [...path, "timeouts"], violations);
  if (name === undefined || targets === undefined || violations.items.length !== before) return undefined;
  // Assigned in canonical order.
  const upstream: UpstreamResource = { name, targets };
  if (balancer !== undefined) upstream.balancer = balancer;
  if (hashOn !== undefined) upstream.hash_on = hashOn;
  if (healthCheck !== undefined) upstream.health_check = healthCheck;
  if (retries !== undefined) upstream.retries = retries;
  if (timeouts !== undefined) upstream.timeouts = timeouts;
  return upstream;
}

function isMapping(raw: unknown): raw is Record<string, unknown> {
  return raw !== null && typeof raw === "object" && !Array.isArray(raw);
}

function reportUnknownKeys(
  input: Record<string, unknown>,
  allowed: readonly string[],
  path: PathSegment[],
  violations: PathViolations,
  what: string,
) {
  for (const key of Object.keys(input)) {
    if (!allowed.includes(key)) violations.add([...path, key], `unknown key "${key}": ${what} has ${allowed.join(", ")}`, "key");
  }
}

/** An optional whole number within bounds (absent or null: undefined). */
export function readWholeNumber(
  raw: unknown,
  path: PathSegment[],
  violations: PathViolations,
  bounds: { min: number; max: number },
  unit = "",
): number | undefined {
  if (raw === undefined || raw === null) return undefined;
  const problem = checkWholeNumber(raw, bounds.min, bounds.max, unit);
  if (problem) {
    violations.add(path, problem);
    return undefined;
  }
  return raw as number;
}

function readTargets(
  raw: unknown,
  path: PathSegment[],
  violations: PathViolations,
  checkUrl: (value: string) => string | undefined,
): UpstreamTargetSpec[] | undefined {
  const example = '(e.g. "- {url: http://10.0.0.1:8081, weight: 100}")';
  if (raw === undefined || raw === null) {
    violations.add(path, `required: the targets requests are balanced over, 1 to ${upstreamLimits.targets} ${example}`);
    return undefined;
  }
  if (!Array.isArray(raw)) {
    violations.add(path, `must be a list of targets ${example}, got ${describeValue(raw)}`);
    return undefined;
  }
  if (raw.length === 0 || raw.length > upstreamLimits.targets) {
    violations.add(
      path,
      raw.length === 0
        ? `is empty: an upstream needs at least one target ${example}`
        : `holds ${raw.length} targets; at most ${upstreamLimits.targets} are allowed`,
    );
    return undefined;
  }
  const before = violations.items.length;
  const targets: UpstreamTargetSpec[] = [];
  /** Each URL in the form a URL parser gives it, so that "http://A:80" and "http://a" are one target. */
  const seen = new Map<string, number>();
  raw.forEach((item: unknown, index) => {
    const at = [...path, index];
    if (!isMapping(item)) {
      violations.add(
        at,
        typeof item === "string"
          ? `a target is a mapping with a url: write {url: ${JSON.stringify(item).slice(0, 80)}}`
          : `must be a mapping {url: <http or https URL>, weight: <0 to 1000>}, got ${describeValue(item)}`,
      );
      return;
    }
    reportUnknownKeys(item, targetKeys, at, violations, "a target");
    let url: string | undefined;
    if (item.url === undefined || item.url === null) {
      violations.add([...at, "url"], 'required: the http or https URL of the target (e.g. "http://10.0.0.1:8081")');
    } else if (typeof item.url !== "string") {
      violations.add([...at, "url"], `must be a string (an http or https URL), got ${describeValue(item.url)}`);
    } else {
      const problem = checkUrl(item.url);
      if (problem) violations.add([...at, "url"], problem);
      else {
        url = item.url;
        const normalised = new URL(url).href;
        const first = seen.get(normalised);
        if (first !== undefined) {
          violations.add([...at, "url"], `the same target as targets[${first}]: list each target once (give it a larger weight instead)`);
        } else seen.set(normalised, index);
      }
    }
    const weight = readWholeNumber(item.weight, [...at, "weight"], violations, upstreamLimits.weight, " (0 drains the target)");
    if (url === undefined) return;
    const target: UpstreamTargetSpec = { url };
    if (weight !== undefined) target.weight = weight;
    targets.push(target);
  });
  if (violations.items.length !== before) return undefined;
  if (targets.every((target) => target.weight === 0)) {
    violations.add(path, "every target has weight 0 (drained): give at least one target a weight above 0 (absent: 100)");
    return undefined;
  }
  return targets;
}

function readBalancer(raw: unknown, path: PathSegment[], violations: PathViolations): Balancer | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== "string" || !(balancers as readonly string[]).includes(raw)) {
    violations.add(path, `must be one of ${balancers.join(", ")} (absent: round-robin), got ${describeValue(raw)}`);
    return undefined;
  }
  return raw as Balancer;
}

/**
 * `client`, `header:<name>` (kept in lower case: header names ignore case,
 * RFC 9110 section 5.1) or `cookie:<name>` (kept as written: cookie names do
 * not, RFC 6265 section 4.1.1). `balancer` is the upstream's, its default
 * included; undefined when it is itself invalid (then only the form is judged).
 */
function readHashOn(raw: unknown, balancer: Balancer | undefined, path: PathSegment[], violations: PathViolations): string | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== "string") {
    violations.add(path, `must be a string, ${hashOnForms}; got ${describeValue(raw)}`);
    return undefined;
  }
  let canonical: string | undefined;
  if (raw === "client") canonical = raw;
  else if (raw.startsWith("header:")) {
    const problem = checkHeaderName(raw.slice("header:".length));
    if (problem) {
      violations.add(path, `names no header: ${problem}`);
      return undefined;
    }
    canonical = raw.toLowerCase();
  } else if (raw.startsWith("cookie:")) {
    const problem = checkCookieName(raw.slice("cookie:".length));
    if (problem) {
      violations.add(path, `names no cookie: ${problem}`);
      return undefined;
    }
    canonical = raw;
  } else {
    violations.add(path, `must be ${hashOnForms}, got ${describeValue(raw)}`);
    return undefined;
  }
  if (balancer !== undefined && balancer !== "consistent-hash") {
    violations.add(
      path,
      `applies only to balancer: consistent-hash (this upstream's balancer is ${balancer}): set balancer: consistent-hash or remove hash_on`,
    );
    return undefined;
  }
  return canonical;
}

function readHealthCheck(raw: unknown, path: PathSegment[], violations: PathViolations): UpstreamResource["health_check"] {
  if (raw === undefined) return undefined;
  if (!isMapping(raw)) {
    violations.add(path, `must be a mapping with active, passive or both (leave health_check out for none), got ${describeValue(raw)}`);
    return undefined;
  }
  reportUnknownKeys(raw, healthCheckKeys, path, violations, "health_check");
  if (raw.active === undefined && raw.passive === undefined) {
    if (Object.keys(raw).every((key) => healthCheckKeys.includes(key))) {
      violations.add(path, "is empty: give active, passive or both (e.g. {passive: {}}), or leave health_check out for no health checks");
    }
    return undefined;
  }
  const active = raw.active === undefined ? undefined : readActive(raw.active, [...path, "active"], violations);
  const passive = raw.passive === undefined ? undefined : readPassive(raw.passive, [...path, "passive"], violations);
  const healthCheck: NonNullable<UpstreamResource["health_check"]> = {};
  if (active !== undefined) healthCheck.active = active;
  if (passive !== undefined) healthCheck.passive = passive;
  return healthCheck;
}

function readActive(raw: unknown, path: PathSegment[], violations: PathViolations): Active | undefined {
  const limits = upstreamLimits.active;
  if (!isMapping(raw)) {
    violations.add(path, `must be a mapping with at least the path to probe (e.g. {path: /healthz}), got ${describeValue(raw)}`);
    return undefined;
  }
  reportUnknownKeys(raw, activeKeys, path, violations, "an active check");
  const before = violations.items.length;
  let probePath: string | undefined;
  if (raw.path === undefined || raw.path === null) {
    violations.add([...path, "path"], 'required: the path each target is probed at with GET (e.g. "/healthz")');
  } else if (typeof raw.path !== "string") {
    violations.add([...path, "path"], `must be a string (a path such as "/healthz"), got ${describeValue(raw.path)}`);
  } else {
    const problem = raw.path.includes("*")
      ? '"*" has no meaning in a probe\'s path: write the path itself (e.g. "/healthz")'
      : checkPath(raw.path, { wildcard: false });
    if (problem) violations.add([...path, "path"], problem);
    else probePath = raw.path;
  }
  const interval = readWholeNumber(raw.interval_seconds, [...path, "interval_seconds"], violations, limits.intervalSeconds, " seconds");
  const timeout = readWholeNumber(raw.timeout_ms, [...path, "timeout_ms"], violations, limits.timeoutMs, " ms");
  const healthyAfter = readWholeNumber(raw.healthy_after, [...path, "healthy_after"], violations, limits.healthyAfter);
  const unhealthyAfter = readWholeNumber(raw.unhealthy_after, [...path, "unhealthy_after"], violations, limits.unhealthyAfter);
  if (probePath === undefined || violations.items.length !== before) return undefined;
  // A probe must end before the next one is due: with defaults in place of absent fields.
  const intervalMs = (interval ?? limits.intervalSeconds.default) * 1000;
  const timeoutMs = timeout ?? limits.timeoutMs.default;
  if (timeoutMs >= intervalMs) {
    const given = timeout !== undefined;
    violations.add(
      [...path, given ? "timeout_ms" : "interval_seconds"],
      `a probe's timeout (${timeoutMs} ms${given ? "" : ", the default"}) must be shorter than the interval between probes (${intervalMs} ms${interval === undefined ? ", the default" : ""}): lower timeout_ms below ${intervalMs} or raise interval_seconds`,
    );
    return undefined;
  }
  const active: Active = { path: probePath };
  if (interval !== undefined) active.interval_seconds = interval;
  if (timeout !== undefined) active.timeout_ms = timeout;
  if (healthyAfter !== undefined) active.healthy_after = healthyAfter;
  if (unhealthyAfter !== undefined) active.unhealthy_after = unhealthyAfter;
  return active;
}

function readPassive(raw: unknown, path: PathSegment[], violations: PathViolations): Passive | undefined {
  const limits = upstreamLimits.passive;
  if (!isMapping(raw)) {
    violations.add(
      path,
      `must be a mapping: {} turns passive checks on with their defaults (unhealthy_after 5, recover_after_seconds 30); got ${describeValue(raw)}`,
    );
    return undefined;
  }
  reportUnknownKeys(raw, passiveKeys, path, violations, "a passive check");
  const before = violations.items.length;
  const unhealthyAfter = readWholeNumber(raw.unhealthy_after, [...path, "unhealthy_after"], violations, limits.unhealthyAfter);
  const recoverAfter = readWholeNumber(
    raw.recover_after_seconds,
    [...path, "recover_after_seconds"],
    violations,
    limits.recoverAfterSeconds,
    " seconds",
  );
  if (violations.items.length !== before) return undefined;
  const passive: Passive = {};
  if (unhealthyAfter !== undefined) passive.unhealthy_after = unhealthyAfter;
  if (recoverAfter !== undefined) passive.recover_after_seconds = recoverAfter;
  return passive;
}

function readTimeouts(raw: unknown, path: PathSegment[], violations: PathViolations): UpstreamResource["timeouts"] {
  if (raw === undefined) return undefined;
  if (!isMapping(raw)) {
    violations.add(path, `must be a mapping with connect_ms, response_ms or both (e.g. {connect_ms: 5000}), got ${describeValue(raw)}`);
    return undefined;
  }
  reportUnknownKeys(raw, timeoutKeys, path, violations, "timeouts");
  const connect = readWholeNumber(raw.connect_ms, [...path, "connect_ms"], violations, upstreamLimits.timeoutMs, " ms");
  const response = readWholeNumber(raw.response_ms, [...path, "response_ms"], violations, upstreamLimits.timeoutMs, " ms");
  if (connect === undefined && response === undefined) {
    if (Object.keys(raw).length === 0) {
      violations.add(path, "is empty: give connect_ms, response_ms or both, or leave timeouts out for the defaults (5000 ms, 30000 ms)");
    }
    return undefined;
  }
  const timeouts: NonNullable<UpstreamResource["timeouts"]> = {};
  if (connect !== undefined) timeouts.connect_ms = connect;
  if (response !== undefined) timeouts.response_ms = response;
  return timeouts;
}
