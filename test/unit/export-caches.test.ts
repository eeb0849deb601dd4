import { createExportCache } from "../../src/domain/config/export-cache.js";
import { createCurrentValuesCache, type StoredValue } from "../../src/domain/secrets/current-values-cache.js";

/**
 * The rules of the two caches that spare reads on hot paths (configuration
 * export, secrets retrieve), with their seams: what the database holds, whether
 * announcements are flowing, and the time.
 */
function configWorld() {
  const world = { revision: 1, reads: 0, checks: 0, live: true, now: 0 };
  const cache = createExportCache({
    currentRevision: async () => {
      world.checks++;
      return world.revision;
    },
    announced: () => world.live,
    now: () => world.now,
    recheckMs: 1_000,
    maxCharacters: 1_000_000,
  });
  const load = async () => {
    world.reads++;
    return { revision: world.revision, yaml: `revision ${world.revision}` };
  };
  return { world, cache, get: () => cache.get("org", load) };
}

describe("the export cache", () => {
  test("while announcements flow, a hit reads nothing", async () => {
    const { world, get } = configWorld();
    await get();
    for (let i = 0; i < 5; i++) expect(await get()).toEqual({ revision: 1, yaml: "revision 1" });
    expect(world).toMatchObject({ reads: 1, checks: 0 });
  });

  test("an announced newer revision drops the entry; an older or equal one keeps it", async () => {
    const { world, cache, get } = configWorld();
    await get();
    cache.announce("org", 1);
    await get();
    expect(world.reads).toBe(1);
    world.revision = 2;
    cache.announce("org", 2);
    expect((await get()).revision).toBe(2);
    expect(world.reads).toBe(2);
  });

  test("a load that started before an announcement is answered but not kept", async () => {
    const { world, cache } = configWorld();
    const pending = cache.get("org", async () => {
      const loaded = { revision: world.revision, yaml: "old" };
      cache.announce("org", 2);
      return loaded;
    });
    expect((await pending).yaml).toBe("old");
    world.revision = 2;
    expect((await cache.get("org", async () => ({ revision: 2, yaml: "new" }))).yaml).toBe("new");
  });

  test("without announcements, every hit is checked against the database's revision", async () => {
    const { world, get } = configWorld();
    await get();
    world.live = false;
    await get();
    await get();
    expect(world).toMatchObject({ reads: 1, checks: 2 });
    // A changed revision is read again, and nothing read while announcements are off is kept.
    world.revision = 2;
    expect((await get()).revision).toBe(2);
    expect((await get()).revision).toBe(2);
    expect(world).toMatchObject({ reads: 3, checks: 3 });
  });

  test("should announcements stop unnoticed, a change is seen within the recheck interval", async () => {
    const { world, get } = configWorld();
    await get();
    world.revision = 2; // committed elsewhere; its announcement never arrives
    world.now = 999;
    expect((await get()).revision).toBe(1);
    world.now = 1_000;
    expect((await get()).revision).toBe(2);
    expect(world.checks).toBe(1);
  });
});

function secretsWorld() {
  const row = (version: number): StoredValue => ({
    id: "s1",
    organizationId: "org",
    environment: "prod",
    name: "TOKEN",
    version,
    tags: [],
    updatedAt: new Date("2026-11-22T10:00:00Z"),
    ciphertext: Buffer.alloc(40, version),
  });
  const world = { version: 1, reads: 0, live: true, now: 0, size: 40, count: 1, limits: [] as number[] };
  const cache = createCurrentValuesCache({
    load: async (_organizationId, _environment, limit) => {
      world.reads++;
      world.limits.push(limit);
      return Array.from({ length: Math.min(world.count, limit) }, (_, i) => ({
        ...row(world.version),
        name: `TOKEN_${i}`,
        ciphertext: Buffer.alloc(world.size, world.version),
      }));
    },
    maxValues: 8,
    announced: () => world.live,
    now: () => world.now,
    ttlMs: 2_000,
    maxBytes: 64 * 1024,
  });
  return { world, cache, get: () => cache.get("org", "prod") };
}

describe("the stored-values cache of retrieves", () => {
  test("serves an environment from memory until a change of it is announced", async () => {
    const { world, cache, get } = secretsWorld();
    await get();
    await get();
    expect(world.reads).toBe(1);
    cache.forget("org", "staging");
    await get();
    expect(world.reads).toBe(1);
    world.version = 2;
    cache.forget("org", "prod");
    expect((await get())?.[0]?.version).toBe(2);
    expect(world.reads).toBe(2);
  });

  test("concurrent retrieves share one read; one that starts after a change does not join a read from before it", async () => {
    const { world, cache, get } = secretsWorld();
    const [x, y] = await Promise.all([get(), get()]);
    expect(x).toBe(y);
    expect(world.reads).toBe(1);
    cache.forget("org", "prod");
    const before = get();
    world.version = 2;
    cache.forget("org", "prod");
    const after = get();
    expect((await before)?.[0]?.version).toBe(1);
    expect((await after)?.[0]?.version).toBe(2);
    expect(world.reads).toBe(3);
  });

  test("nothing is kept while announcements are not flowing, and entries expire", async () => {
    const { world, get } = secretsWorld();
    world.live = false;
    await get();
    await get();
    expect(world.reads).toBe(2);
    world.live = true;
    await get();
    world.now = 1_999;
    await get();
    expect(world.reads).toBe(3);
    world.now = 2_000;
    await get();
    expect(world.reads).toBe(4);
  });

  test("an environment too large to keep is left to the caller", async () => {
    const { world, get } = secretsWorld();
    world.size = 20 * 1024;
    expect((await get())?.[0]?.version).toBe(1);
    expect(await get()).toBeUndefined();
    expect(world.reads).toBe(1);
  });

  test("an environment with too many secrets is neither kept nor read whole", async () => {
    const { world, get } = secretsWorld();
    world.count = 1_000;
    expect(await get()).toBeUndefined();
    expect(await get()).toBeUndefined();
    expect(world).toMatchObject({ reads: 1, limits: [9] });
  });
});
