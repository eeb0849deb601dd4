import type { ConfigDocument } from "../../domain/config/config-document.js";
import { cacheFileIn, findCacheFile, readCacheFile, writeCacheFile, type GatewayCache } from "../cache-file.js";
import type { Knowledge } from "./knowledge.js";

export interface CachePersisterOptions {
  /** GATEWAY_CACHE: a file, or a directory in which it is gateway-<organization_id>.json; undefined: no cache. */
  cacheFile: string | { directory: string } | undefined;
  /** The hex SHA-256 of the gateway key: a cache found in a directory must be this key's. */
  keyHash: string;
  clock(): number;
  /** Validates a cached document as the stream's are (undefined: it does not validate here). */
  validate(yaml: string, revision: number): ConfigDocument | undefined;
  warn(object: object, message: string): void;
}

/**
 * The last-known-good cache file (docs/gateway.md, "The follower"): written
 * after every change, never with a secret value (names and versions only),
 * and read at a cold start so the gateway serves while no control plane answers.
 */
export function createCachePersister(options: CachePersisterOptions) {
  let writing: Promise<void> | undefined;
  let latest: Knowledge | undefined;
  let writeAgain = false;
  let closed = false;

  const pathFor = (organizationId: string): string | undefined => {
    const target = options.cacheFile;
    if (target === undefined) return undefined;
    return typeof target === "string" ? target : cacheFileIn(target.directory, organizationId);
  };

  const toCache = (k: Knowledge): GatewayCache => ({
    format: 1,
    gateway_key_sha256: options.keyHash,
    organization_id: k.organizationId,
    issuer: k.issuer,
    audience: k.audience,
    revision: k.revision,
    yaml: k.yaml,
    signing_keys: k.jwks.map((key) => ({ ...key })),
    revoked_sessions: [...k.revoked].map(([sessionId, expiresAt]) => ({
      session_id: sessionId,
      expires_at: new Date(expiresAt).toISOString(),
    })),
    consumers: [...k.consumers].map(([id, c]) => ({ consumer_id: id, name: c.name, key_sha256: c.hash })),
    // Names and versions only: values live in memory and nowhere else.
    secrets: [...k.secrets.values()].map((s) => ({ environment: s.environment, name: s.name, version: s.version })),
    saved_at: new Date(options.clock()).toISOString(),
  });

  return {
    /** Writes the cache file soon; writes that pile up while one is under way become one more. */
    persist(k: Knowledge): void {
      latest = k;
      if (!pathFor(k.organizationId)) return;
      if (writing) {
        writeAgain = true;
        return;
      }
      writing = (async () => {
        do {
          writeAgain = false;
          const current = latest as Knowledge;
          try {
            await writeCacheFile(pathFor(current.organizationId) as string, toCache(current));
          } catch (error) {
            options.warn({ err: error instanceof Error ? error.message : String(error) }, "could not write the gateway cache file");
          }
        } while (writeAgain && !closed);
      })().finally(() => {
        writing = undefined;
      });
    },

    /** What the cache file holds, if there is a usable one. */
    async load(): Promise<Knowledge | undefined> {
      const target = options.cacheFile;
      if (target === undefined) return undefined;
      let cache: GatewayCache | undefined;
      try {
        if (typeof target === "string") cache = await readCacheFile(target);
        else cache = (await findCacheFile(target.directory, options.keyHash))?.cache;
      } catch (error) {
        options.warn({ err: error instanceof Error ? error.message : String(error) }, "ignoring an unreadable gateway cache file");
        return undefined;
      }
      if (!cache) return undefined;
      const document = options.validate(cache.yaml, cache.revision);
      if (!document) return undefined;
      return {
        organizationId: cache.organization_id,
        issuer: cache.issuer,
        audience: cache.audience,
        revision: cache.revision,
        yaml: cache.yaml,
        document,
        jwks: cache.signing_keys,
        revoked: new Map(cache.revoked_sessions.map((s) => [s.session_id, Date.parse(s.expires_at)])),
        consumers: new Map(cache.consumers.map((c) => [c.consumer_id, { name: c.name, hash: c.key_sha256 }])),
        secrets: new Map(cache.secrets.map((s) => [`${s.environment}/${s.name}`, s])),
      };
    },

    /** Waits for a write under way; no write starts afterwards. */
    async close(): Promise<void> {
      closed = true;
      await writing;
    },
  };
}
