import type { SecretRecord } from "./secrets-store.js";
import { rfc3339 } from "./retrieval-envelope.js";
import { byteOrder } from "./secret-rules.js";
import { associatedDataOf } from "./value-at-rest.js";

/** A secret's current metadata and stored (encrypted) value, as one read returned them. */
export type StoredValue = SecretRecord & { ciphertext: Buffer };

/** A stored value with what every retrieve of it derives: its associated data and its time as written in answers. */
export interface RetrievableValue extends StoredValue {
  associatedData: string;
  updatedAtText: string;
}

function retrievable(value: StoredValue): RetrievableValue {
  return { ...value, associatedData: associatedDataOf(value), updatedAtText: rfc3339(value.updatedAt) };
}

/** Values ready to retrieve, sorted by name (byte order): the order of answers. */
export function retrievableSorted(values: readonly StoredValue[]): RetrievableValue[] {
  return values.map(retrievable).sort((a, b) => byteOrder(a.name, b.name));
}

export interface CurrentValuesCacheOptions {
  /** Secrets of the environment with the ciphertext of their current version (one statement), at most `limit`. */
  load(organizationId: string, environment: string, limit: number): Promise<StoredValue[]>;
  /** Environments with more secrets than this are not kept (nor read whole, to find out). */
  maxValues: number;
  /**
   * True while every committed change of a secret is announced to this cache
   * (through forget()). While it is false nothing is cached.
   */
  announced(): boolean;
  /** Milliseconds since some fixed point (the clock seam). */
  now(): number;
  /**
   * How long an environment is served without reading it again. It bounds
   * staleness should announcements stop without the feed noticing (a
   * connection that died silently); normally announcements drop entries first.
   */
  ttlMs: number;
  /** Bound on the cached ciphertexts' total size, in bytes. */
  maxBytes: number;
}

interface Entry {
  /** undefined: the environment is too large to keep; callers read what they need themselves. */
  values: RetrievableValue[] | undefined;
  bytes: number;
  loadedAt: number;
}

/** Per stored value, beyond its ciphertext: metadata, strings, the row object. */
const overheadBytes = 512;
/** Environments kept at most (large ones count too, as markers). */
const maxEntries = 10_000;

/**
 * The current values of recently retrieved environments, as stored: metadata
 * and ciphertext, never plaintext (each retrieve still opens the values with
 * the data key), like a storage cache in front of an encrypted store. Every
 * write and delete announces its environment on the change feed (PostgreSQL
 * NOTIFY from any instance; in-process on SQLite) and this instance forgets
 * it as soon as it commits: a retrieve is at most as stale as the notification
 * delay, and on the instance that wrote, never. Bounded; least recently used
 * environments go first.
 */
export function createCurrentValuesCache(options: CurrentValuesCacheOptions) {
  const entries = new Map<string, Entry>();
  /** Loads in flight, shared by the retrieves that wait for the same environment. */
  const loading = new Map<string, Promise<RetrievableValue[] | undefined>>();
  let bytes = 0;
  /** Bumped by every announcement: a load that started before one must not be stored. */
  let generation = 0;

  const keyOf = (organizationId: string, environment: string) => `${organizationId} ${environment}`;

  function remove(key: string): void {
    const entry = entries.get(key);
    if (!entry) return;
    entries.delete(key);
    bytes -= entry.bytes;
  }

  function store(key: string, values: RetrievableValue[] | undefined, loadedAt: number): void {
    remove(key);
    let size = 0;
    for (const value of values ?? []) size += value.ciphertext.length + overheadBytes;
    const entry =
      values === undefined || size > options.maxBytes / 4 ? { values: undefined, bytes: 0, loadedAt } : { values, bytes: size, loadedAt };
    entries.set(key, entry);
    bytes += entry.bytes;
    for (const [oldest] of entries) {
      if (bytes <= options.maxBytes && entries.size <= maxEntries) break;
      remove(oldest);
    }
  }

  function load(key: string, organizationId: string, environment: string): Promise<RetrievableValue[] | undefined> {
    const startedAt = generation;
    const loadedAt = options.now();
    const pending = options
      .load(organizationId, environment, options.maxValues + 1)
      .then((stored) => {
        const values = stored.length > options.maxValues ? undefined : retrievableSorted(stored);
        // Stored only when nothing was announced meanwhile (the read may predate it) and announcements are flowing.
        if (generation === startedAt && options.announced()) store(key, values, loadedAt);
        return values;
      })
      .finally(() => {
        if (loading.get(key) === pending) loading.delete(key);
      });
    loading.set(key, pending);
    return pending;
  }

  return {
    /**
     * Every secret of the environment with its stored value, sorted by name
     * (callers must not modify the answer); undefined when the environment is
     * too large to keep, and the caller reads only what it needs.
     */
    get(organizationId: string, environment: string): Promise<RetrievableValue[] | undefined> {
      const key = keyOf(organizationId, environment);
      const entry = entries.get(key);
      if (entry && options.announced() && options.now() - entry.loadedAt < options.ttlMs) {
        entries.delete(key);
        entries.set(key, entry);
        return Promise.resolve(entry.values);
      }
      return loading.get(key) ?? load(key, organizationId, environment);
    },
    /** A change of the environment was committed (or may have been missed, without arguments: everything). */
    forget(organizationId?: string, environment?: string): void {
      generation++;
      if (organizationId === undefined || environment === undefined) {
        entries.clear();
        loading.clear();
        bytes = 0;
        return;
      }
      const key = keyOf(organizationId, environment);
      remove(key);
      // A retrieve that starts after the change must not join a read that started before it.
      loading.delete(key);
    },
  };
}

export type CurrentValuesCache = ReturnType<typeof createCurrentValuesCache>;
