/** An exported configuration: the revision and its document. */
export interface ExportedConfig {
  revision: number;
  yaml: string;
}

export interface ExportCacheOptions {
  /**
   * How a cached export is known to be current. With `currentRevision`, every
   * hit is checked against the revision in the database (one small query), so
   * it holds across any number of instances. Without it, the cache trusts
   * invalidate(): right only where every change is announced to this process
   * when it commits (SQLite, whose database lives in one process).
   */
  currentRevision?: (organizationId: string) => Promise<number | null>;
  /** Bound on the cached documents' total length, in characters. */
  maxCharacters: number;
}

/**
 * Exports by organisation, so that reading a configuration that has not
 * changed costs no document read. Bounded; least recently used entries go first.
 */
export function createExportCache(options: ExportCacheOptions) {
  const entries = new Map<string, ExportedConfig>();
  let characters = 0;
  /** Bumped by every invalidation: a load that started before one must not be stored. */
  let generation = 0;

  function remove(organizationId: string): void {
    const entry = entries.get(organizationId);
    if (!entry) return;
    entries.delete(organizationId);
    characters -= entry.yaml.length;
  }

  function store(organizationId: string, value: ExportedConfig): void {
    remove(organizationId);
    if (value.yaml.length > options.maxCharacters / 4) return;
    entries.set(organizationId, value);
    characters += value.yaml.length;
    for (const [oldest] of entries) {
      if (characters <= options.maxCharacters) break;
      remove(oldest);
    }
  }

  return {
    async get(organizationId: string, load: () => Promise<ExportedConfig>): Promise<ExportedConfig> {
      const startedAt = generation;
      const cached = entries.get(organizationId);
      if (options.currentRevision) {
        const revision = (await options.currentRevision(organizationId)) ?? 0;
        if (cached && cached.revision === revision) {
          entries.delete(organizationId);
          entries.set(organizationId, cached);
          return cached;
        }
      } else if (cached) {
        entries.delete(organizationId);
        entries.set(organizationId, cached);
        return cached;
      }
      const loaded = await load();
      if (generation === startedAt) store(organizationId, loaded);
      return loaded;
    },
    /** Forgets an organisation's export (all of them without an argument). */
    invalidate(organizationId?: string): void {
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
