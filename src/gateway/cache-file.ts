import { randomBytes } from "node:crypto";
import { mkdir, open, readdir, readFile, rename, rm, stat } from "node:fs/promises";
import { dirname, join } from "node:path";

/**
 * The gateway's last-known-good state, for a cold start while no control
 * plane answers (GATEWAY_CACHE, default ./data/gateway-<organization_id>.json).
 * It holds what a gateway needs to enforce the configuration (the document,
 * the signing keys, revoked sessions, consumer keys as SHA-256 hashes) and the
 * names and versions of the secrets the configuration references, never their
 * values: after a cold start, routes that need a secret answer 503 until the
 * control plane is back and the secret is retrieved.
 */
export interface GatewayCache {
  format: 1;
  /** Hex SHA-256 of the gateway key that wrote it: a cache directory may hold files of several gateways. */
  gateway_key_sha256: string;
  organization_id: string;
  issuer: string;
  audience: string;
  revision: number;
  yaml: string;
  signing_keys: { kty: string; kid?: string; alg?: string; crv?: string; x?: string; y?: string; use?: string }[];
  revoked_sessions: { session_id: string; expires_at: string }[];
  consumers: { consumer_id: string; name: string; key_sha256: string }[];
  secrets: { environment: string; name: string; version: number }[];
  saved_at: string;
}

/** The default cache file of an organisation in a directory: gateway-<organization_id>.json. */
export function cacheFileIn(directory: string, organizationId: string): string {
  return join(directory, `gateway-${organizationId}.json`);
}

/**
 * Writes the cache atomically: a temporary file in the same directory, created
 * with mode 0600, written and flushed, then renamed over the old one (rename
 * is atomic within a file system, POSIX rename(2)), so a reader or a crash
 * never sees half a file.
 */
export async function writeCacheFile(path: string, cache: GatewayCache): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`;
  const handle = await open(temporary, "wx", 0o600);
  try {
    await handle.writeFile(`${JSON.stringify(cache)}\n`, "utf8");
    await handle.sync();
  } catch (error) {
    await handle.close();
    await rm(temporary, { force: true });
    throw error;
  }
  await handle.close();
  try {
    await rename(temporary, path);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}

/** Reads a cache file; undefined when it is absent. Throws when it exists but is not a cache of this format. */
export async function readCacheFile(path: string): Promise<GatewayCache | undefined> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  const value: unknown = JSON.parse(text);
  if (!isCache(value)) throw new Error(`${path} is not a gateway cache file (format 1)`);
  return value;
}

/** The newest cache in a directory written with this gateway key, if any. */
export async function findCacheFile(
  directory: string,
  gatewayKeySha256: string,
): Promise<{ path: string; cache: GatewayCache } | undefined> {
  let names: string[];
  try {
    names = await readdir(directory);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  let best: { path: string; cache: GatewayCache; mtime: number } | undefined;
  for (const name of names) {
    if (!/^gateway-.+\.json$/.test(name)) continue;
    const path = join(directory, name);
    try {
      const cache = await readCacheFile(path);
      if (!cache || cache.gateway_key_sha256 !== gatewayKeySha256) continue;
      const mtime = (await stat(path)).mtimeMs;
      if (!best || mtime > best.mtime) best = { path, cache, mtime };
    } catch {
      // Not ours, or unreadable: another gateway's business.
    }
  }
  return best && { path: best.path, cache: best.cache };
}

function isCache(value: unknown): value is GatewayCache {
  if (!value || typeof value !== "object") return false;
  const c = value as Record<string, unknown>;
  return (
    c.format === 1 &&
    typeof c.gateway_key_sha256 === "string" &&
    typeof c.organization_id === "string" &&
    typeof c.issuer === "string" &&
    typeof c.audience === "string" &&
    typeof c.revision === "number" &&
    typeof c.yaml === "string" &&
    Array.isArray(c.signing_keys) &&
    Array.isArray(c.revoked_sessions) &&
    Array.isArray(c.consumers) &&
    Array.isArray(c.secrets)
  );
}
