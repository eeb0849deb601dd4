import type { IdentitySettingsPatch, IdentitySettingsRecord } from "./identity-store.js";
import { invalidArgument, type Violation } from "../errors.js";

/**
 * An organisation's identity settings as they apply, defaults resolved.
 * docs/identity.md, "Identity settings": passkeys on, magic links on, password off;
 * relying-party ID and origins default to the host and origin of PUBLIC_URL;
 * sessions last 1 h and magic links 15 min.
 */
export interface IdentitySettings {
  passkeys: boolean;
  magicLinks: boolean;
  password: boolean;
  rpId: string;
  origins: string[];
  sessionTtlSeconds: number;
  magicLinkTtlSeconds: number;
  /** Failed password logins per identifier allowed within the window; the next is refused. */
  lockoutThreshold: number;
  lockoutWindowSeconds: number;
  /** Client-side (publishable-key) identity requests per client IP and minute. */
  ipLimitPerMinute: number;
  /** Magic links (and, separately, password-reset tokens) issued per identifier and hour. */
  magicLinkLimitPerHour: number;
}

/** The longest session a setting may ask for; retired signing keys stay published this long. */
export const maxSessionTtlSeconds = 30 * 24 * 3600;

export const defaultSettings = {
  passkeys: true,
  magicLinks: true,
  password: false,
  sessionTtlSeconds: 3600,
  magicLinkTtlSeconds: 900,
  lockoutThreshold: 5,
  lockoutWindowSeconds: 900,
  ipLimitPerMinute: 300,
  magicLinkLimitPerHour: 10,
} as const;

/** Resolves the stored row (or its absence) against the defaults. */
export function effectiveSettings(stored: IdentitySettingsRecord | null, publicUrl: string): IdentitySettings {
  const defaults = defaultRelyingPartyOf(publicUrl);
  return {
    ...defaultSettings,
    ...(stored ? withoutNulls(stored) : {}),
    rpId: stored?.rpId ?? defaults.rpId,
    origins: stored?.origins ?? [...defaults.origins],
  };
}

/** The last PUBLIC_URL parsed: it does not change while a server runs, and every sign-in asks. */
let parsed: { publicUrl: string; defaults: { rpId: string; origins: readonly string[] } } | undefined;

function defaultRelyingPartyOf(publicUrl: string): { rpId: string; origins: readonly string[] } {
  if (parsed?.publicUrl !== publicUrl) parsed = { publicUrl, defaults: defaultRelyingParty(new URL(publicUrl)) };
  return parsed.defaults;
}

/**
 * The host and origin of PUBLIC_URL. An IP address cannot be a relying-party ID
 * (WebAuthn: "the RP ID must be a registrable domain suffix of the origin's
 * effective domain"), so for the zero-configuration loopback default the
 * relying party is "localhost" and http://localhost:<port> is allowed too: the
 * same server, reached by the name browsers accept for passkeys.
 */
function defaultRelyingParty(url: URL): { rpId: string; origins: string[] } {
  if (url.hostname === "127.0.0.1" || url.hostname === "[::1]") {
    const local = new URL(url.origin);
    local.hostname = "localhost";
    return { rpId: "localhost", origins: [url.origin, local.origin] };
  }
  return { rpId: url.hostname, origins: [url.origin] };
}

function withoutNulls(stored: IdentitySettingsRecord) {
  const { rpId: _rpId, origins: _origins, updatedAt: _updatedAt, ...rest } = stored;
  return rest;
}

/** The settings keys of `gatehouse settings set` and their snake_case names. */
const integerKeys = {
  session_ttl_seconds: { field: "sessionTtlSeconds", min: 60, max: maxSessionTtlSeconds },
  magic_link_ttl_seconds: { field: "magicLinkTtlSeconds", min: 60, max: 7 * 24 * 3600 },
  lockout_threshold: { field: "lockoutThreshold", min: 1, max: 1000 },
  lockout_window_seconds: { field: "lockoutWindowSeconds", min: 60, max: 7 * 24 * 3600 },
  ip_limit_per_minute: { field: "ipLimitPerMinute", min: 1, max: 1_000_000 },
  magic_link_limit_per_hour: { field: "magicLinkLimitPerHour", min: 1, max: 100_000 },
} as const;

const booleanKeys = { passkeys: "passkeys", magic_links: "magicLinks", password: "password" } as const;

export const settingsKeys = [...Object.keys(booleanKeys), "rp_id", "origins", ...Object.keys(integerKeys)];

/** Describes every key for the CLI's usage text. */
export const settingsKeyHelp: Record<string, string> = {
  passkeys: "true|false: passkey (WebAuthn) sign-up and sign-in (default true)",
  magic_links: "true|false: magic links (default true)",
  password: "true|false: password sign-up, sign-in and reset (default false)",
  rp_id: "WebAuthn relying-party ID, a host name (empty: the host of PUBLIC_URL)",
  origins: "comma-separated allowed origins (empty: the origin of PUBLIC_URL)",
  session_ttl_seconds: `session lifetime, ${integerKeys.session_ttl_seconds.min} to ${maxSessionTtlSeconds} (default 3600)`,
  magic_link_ttl_seconds: "magic-link and reset-token lifetime, 60 to 604800 (default 900)",
  lockout_threshold: "failed password logins per identifier allowed within the window (default 5)",
  lockout_window_seconds: "lockout window, 60 to 604800 (default 900)",
  ip_limit_per_minute: "client-side identity requests per IP address and minute (default 300)",
  magic_link_limit_per_hour: "magic links (and reset tokens) per identifier and hour (default 10)",
};

const hostName = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

/**
 * Parses `key=value` assignments of `gatehouse settings set` into a patch,
 * listing every problem at once (unknown key, bad value, duplicate key).
 */
export function parseSettingsAssignments(assignments: readonly string[]): IdentitySettingsPatch {
  const violations: Violation[] = [];
  const patch: IdentitySettingsPatch = {};
  const seen = new Set<string>();
  if (assignments.length === 0)
    violations.push({ field: "settings", description: `give at least one key=value; keys: ${settingsKeys.join(", ")}` });
  for (const assignment of assignments) {
    const eq = assignment.indexOf("=");
    if (eq <= 0) {
      violations.push({ field: assignment, description: "must be key=value" });
      continue;
    }
    const key = assignment.slice(0, eq).trim();
    const value = assignment.slice(eq + 1).trim();
    if (seen.has(key)) {
      violations.push({ field: key, description: "is given more than once" });
      continue;
    }
    seen.add(key);
    if (key in booleanKeys) {
      if (value !== "true" && value !== "false") violations.push({ field: key, description: `must be true or false, got "${value}"` });
      else patch[booleanKeys[key as keyof typeof booleanKeys]] = value === "true";
    } else if (key in integerKeys) {
      const spec = integerKeys[key as keyof typeof integerKeys];
      const number = /^\d{1,10}$/.test(value) ? Number(value) : Number.NaN;
      if (!Number.isInteger(number) || number < spec.min || number > spec.max) {
        violations.push({ field: key, description: `must be a whole number from ${spec.min} to ${spec.max}, got "${value}"` });
      } else {
        patch[spec.field] = number;
      }
    } else if (key === "rp_id") {
      const rpId = value.toLowerCase();
      if (rpId === "") patch.rpId = null;
      else if (!hostName.test(rpId))
        violations.push({ field: key, description: `must be a host name such as example.com, got "${value}"` });
      else patch.rpId = rpId;
    } else if (key === "origins") {
      const origins = parseOrigins(value, violations);
      if (origins !== undefined) patch.origins = origins;
    } else {
      violations.push({ field: key, description: `is not a setting; keys: ${settingsKeys.join(", ")}` });
    }
  }
  if (violations.length > 0) throw invalidArgument(violations);
  return patch;
}

function parseOrigins(value: string, violations: Violation[]): string[] | null | undefined {
  if (value === "") return null;
  const origins: string[] = [];
  let ok = true;
  value.split(",").forEach((raw, i) => {
    const text = raw.trim();
    let origin: string | undefined;
    try {
      const url = new URL(text);
      if ((url.protocol === "http:" || url.protocol === "https:") && url.origin === text.replace(/\/$/, "")) origin = url.origin;
    } catch {
      origin = undefined;
    }
    if (origin === undefined) {
      ok = false;
      violations.push({ field: `origins[${i}]`, description: `must be an http(s) origin such as https://app.example.com, got "${text}"` });
    } else if (!origins.includes(origin)) {
      origins.push(origin);
    }
  });
  return ok ? origins : undefined;
}

/** The settings as `gatehouse settings get --json` prints them (snake_case, defaults resolved). */
export function settingsToJson(settings: IdentitySettings): Record<string, unknown> {
  return {
    passkeys: settings.passkeys,
    magic_links: settings.magicLinks,
    password: settings.password,
    rp_id: settings.rpId,
    origins: settings.origins,
    session_ttl_seconds: settings.sessionTtlSeconds,
    magic_link_ttl_seconds: settings.magicLinkTtlSeconds,
    lockout_threshold: settings.lockoutThreshold,
    lockout_window_seconds: settings.lockoutWindowSeconds,
    ip_limit_per_minute: settings.ipLimitPerMinute,
    magic_link_limit_per_hour: settings.magicLinkLimitPerHour,
  };
}

/** Hosts that are a secure context over plain http (W3C Secure Contexts, "potentially trustworthy origin"). */
function isLocalhost(host: string): boolean {
  return host === "localhost" || host.endsWith(".localhost");
}

/**
 * Refuses identity settings that cannot work together, naming the rule each
 * combination breaks, so that a bad combination fails when it is saved rather
 * than at every passkey ceremony afterwards. The CLI, the dashboard and any
 * other path that changes settings call this one function.
 *
 * `settings` is the whole resulting choice (the stored values with the change
 * applied); an absent or null `rpId` or `origins` follows PUBLIC_URL. When both
 * follow PUBLIC_URL nothing is checked: that default is the server's, not a
 * choice. Otherwise the relying party that results must hold together:
 *
 * - the RP ID is a domain, never an IP address (WebAuthn Level 3, §5.1.2: an
 *   RP ID is "a valid domain string");
 * - every allowed origin is https, except localhost and *.localhost, the only
 *   hosts browsers treat as a secure context over http (WebAuthn is exposed
 *   in secure contexts only);
 * - every allowed origin lies within the RP ID (WebAuthn Level 3, §5.1.3 and
 *   §13.4.9: "the RP ID must be equal to the origin's effective domain, or a
 *   registrable domain suffix of the origin's effective domain"). A one-label
 *   RP ID other than localhost (such as "com") is a public suffix, so it
 *   matches only an origin of exactly that host.
 *
 * Violations name the setting to change. When origins follow PUBLIC_URL on
 * the loopback default, the http://127.0.0.1:<port> alias served beside
 * http://localhost:<port> is left out: an IP origin can never use passkeys,
 * and browsers use the localhost one.
 */
export function checkIdentitySettings(
  settings: { rpId?: string | null | undefined; origins?: readonly string[] | null | undefined },
  publicUrl: string,
): void {
  const chosenRpId = settings.rpId ?? null;
  const chosenOrigins = settings.origins ?? null;
  if (chosenRpId === null && chosenOrigins === null) return;
  const defaults = defaultRelyingPartyOf(publicUrl);
  const rpId = chosenRpId ?? defaults.rpId;
  const rpIdNamed = chosenRpId !== null ? `rp_id "${rpId}"` : `the RP ID "${rpId}" (the host of PUBLIC_URL, as rp_id is empty)`;
  const violations: Violation[] = [];

  const lastLabel = rpId.slice(rpId.lastIndexOf(".") + 1);
  if (/^(\d+|0x[0-9a-f]*)$/.test(lastLabel) || rpId.startsWith("[")) {
    violations.push({
      field: "rp_id",
      description: `${rpIdNamed} is an IP address; an RP ID must be a domain such as example.com (WebAuthn Level 3, §5.1.2: "a valid domain string")`,
    });
    throw invalidArgument(violations, "inconsistent_identity_settings");
  }

  const publicUrlParsed = new URL(publicUrl);
  const loopbackAlias =
    publicUrlParsed.hostname === "127.0.0.1" || publicUrlParsed.hostname === "[::1]" ? publicUrlParsed.origin : undefined;
  const origins = chosenOrigins ?? defaults.origins.filter((origin) => origin !== loopbackAlias);
  const publicSuffix = !rpId.includes(".") && rpId !== "localhost";
  origins.forEach((origin, i) => {
    const url = new URL(origin);
    const host = url.hostname;
    const field = chosenOrigins !== null ? `origins[${i}]` : "origins";
    const named = chosenOrigins !== null ? `origin ${origin}` : `the origin ${origin} (from PUBLIC_URL, as origins is empty)`;
    if (url.protocol === "http:" && !isLocalhost(host)) {
      violations.push({
        field,
        description: `${named} must be https: WebAuthn works only in a secure context, and over http only localhost is one (e.g. https://${url.host})`,
      });
    }
    if (host !== rpId && !(host.endsWith(`.${rpId}`) && !publicSuffix)) {
      const why = publicSuffix && host.endsWith(`.${rpId}`) ? `; "${rpId}" is a public suffix, not a registrable domain` : "";
      violations.push({
        field,
        description:
          `${named} is not within ${rpIdNamed}${why}: WebAuthn Level 3 (§5.1.3, §13.4.9) requires that ` +
          `"the RP ID must be equal to the origin's effective domain, or a registrable domain suffix of the origin's effective domain"`,
      });
    }
  });
  if (violations.length > 0) throw invalidArgument(violations, "inconsistent_identity_settings");
}
