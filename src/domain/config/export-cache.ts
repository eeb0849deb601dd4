/** An exported configuration: the revision and its document. */
export interface ExportedConfig {
  revision: number;
  yaml: string;
}

export interface ExportCacheOptions {
  /** The organisation's current revision in the database (null: no such organisation): one small query. */
  currentRevision(organizationId: string): Promise<number | null>;
  /**
   * True while every committed revision is being announced to this cache
   * (through announce() and forgetAll()). While it is false, each hit is
   * checked with currentRevision() instead.
   */
  announced(): boolean;
  /** Milliseconds since some fixed point (the clock seam). */
  now(): number;
  /**
   * How long a hit is trusted on announcements alone; after that, one request
   * checks currentRevision() while the others keep being answered. It bounds
   * staleness should announcements stop without the feed noticing (a connection
   * that died silently).
   */
  recheckMs: number;
  /** Bound on the cached documents' total length, in characters. */
  maxCharacters: number;
}

interface Entry extends ExportedConfig {
  /** When the entry was last known current (now()). */
  checkedAt: number;
}

/**
 * Exports by organisation, so that reading a configuration that has not
 * changed costs no database read. Every committed revision is announced on the
 * change feed (PostgreSQL NOTIFY from any instance; in-process on SQLite),
 * which drops older entries: a hit is at most as stale as the notification
 * delay. Bounded; least recently used entries go first.
 */
export function createExportCache(options: ExportCacheOptions) {
  const entries = new Map<string, Entry>();
  let characters = 0;
  /** Bumped by every announcement: a load that started before one must not be stored. */
  let generation = 0;

  function remove(organizationId: string): void {
    const entry = entries.get(organizationId);
    if (!entry) return;
    entries.delete(organizationId);
    characters -= entry.yaml.length;
  }

  function store(organizationId: string, value: ExportedConfig, checkedAt: number): void {
    remove(organizationId);
    if (value.yaml.length > options.maxCharacters / 4) return;
    entries.set(organizationId, { revision: value.revision, yaml: value.yaml, checkedAt });
    characters += value.yaml.length;
    for (const [oldest] of entries) {
      if (characters <= options.maxCharacters) break;
      remove(oldest);
    }
  }

  function touch(organizationId: string, entry: Entry): Entry {
    entries.delete(organizationId);
    entries.set(organizationId, entry);
    return entry;
  }

  /** The cached entry when it is known current, checking the database when announcements cannot vouch for it. */
  async function current(organizationId: string, entry: Entry): Promise<Entry | undefined> {
    const now = options.now();
    if (options.announced() && now - entry.checkedAt < options.recheckMs) return touch(organizationId, entry);
    // Whoever finds the entry due checks it; meanwhile the others keep being answered from it.
    entry.checkedAt = now;
    const revision = (await options.currentRevision(organizationId)) ?? 0;
    if (entries.get(organizationId) !== entry) return undefined;
    if (revision === entry.revision) return touch(organizationId, entry);
    remove(organizationId);
    return undefined;
  }

  return {
    async get(organizationId: string, load: () => Promise<ExportedConfig>): Promise<ExportedConfig> {
      const cached = entries.get(organizationId);
      if (cached) {
        const hit = await current(organizationId, cached);
        if (hit) return { revision: hit.revision, yaml: hit.yaml };
      }
      const startedAt = generation;
      const checkedAt = options.now();
      const loaded = await load();
      // Stored only when nothing was announced meanwhile (the load may predate it) and announcements are flowing.
      if (generation === startedAt && options.announced()) store(organizationId, loaded, checkedAt);
      return { revision: loaded.revision, yaml: loaded.yaml };
    },
    /** A revision of the organisation was committed: an older entry is dropped. */
    announce(organizationId: string, revision: number): void {
      generation++;
      const entry = entries.get(organizationId);
      if (entry && entry.revision < revision) remove(organizationId);
    },
    /** Announcements may have been missed (or this instance committed): forget the organisation's entry, or every entry. */
    forget(organizationId?: string): void {
      generation++;
      if (organizationId === undefined) {
        entries.clear();
        characters = 0;
      } else {
        remove(organizationId);
      }
    },
  };
}
