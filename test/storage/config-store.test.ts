import { randomUUID } from "node:crypto";
import type { CanonicalResource } from "../../src/domain/config/config-document.js";
import { createConfigStore, type RevisionRecord } from "../../src/storage/config-store.js";
import { at, describeStorage, rejectsAsDuplicate } from "./storage-target.js";

describeStorage("config store", (target) => {
  const store = () => createConfigStore(target.db.client, target.provider);

  function revision(number: number, document = `version: 1 # r${number}\n`): RevisionRecord {
    return {
      revision: number,
      actor: "api_key:test",
      source: "import",
      created: [`routes/r${number}`],
      updated: [],
      deleted: number > 1 ? [`routes/r${number - 1}`] : [],
      createdAt: at(number),
      document,
    };
  }

  const route = (name: string, upstream = "http://127.0.0.1:8081"): CanonicalResource => ({
    kind: "routes",
    name,
    spec: JSON.stringify({ name, path: `/${name}`, upstream }),
  });

  const sorted = (resources: CanonicalResource[]) =>
    resources
      .map(({ kind, name, spec }) => ({ kind, name, spec }))
      .sort((x, y) => `${x.kind}/${x.name}`.localeCompare(`${y.kind}/${y.name}`));

  describe("revisions", () => {
    test("an unknown organisation has no revision to lock or read", async () => {
      expect(await store().currentRevision(randomUUID())).toBeNull();
      expect(await target.db.transaction((tx) => createConfigStore(tx, target.provider).lockConfiguration(randomUUID()))).toBeNull();
    });

    test("a recorded revision becomes the organisation's current one, and no other organisation's", async () => {
      const a = await target.organization();
      const b = await target.organization();
      expect(await store().currentRevision(a)).toBe(0);
      await target.db.transaction(async (tx) => {
        const config = createConfigStore(tx, target.provider);
        expect(await config.lockConfiguration(a)).toBe(0);
        await config.recordRevision(a, revision(1));
      });
      expect(await store().currentRevision(a)).toBe(1);
      expect(await store().currentRevision(b)).toBe(0);
      expect(await store().latestRevision(a)).toEqual(revision(1));
      expect(await store().latestRevision(b)).toBeNull();
      expect(await store().findRevision(b, 1)).toBeNull();
      expect(await store().findRevision(a, 2)).toBeNull();
    });

    test("a revision number is recorded once per organisation", async () => {
      const a = await target.organization();
      const b = await target.organization();
      await store().recordRevision(a, revision(1));
      expect(await rejectsAsDuplicate(store().recordRevision(a, revision(1, "other")))).toBe(true);
      await store().recordRevision(b, revision(1));
      expect((await store().findRevision(a, 1))?.document).toBe(revision(1).document);
    });

    test("history is newest first before a revision, and oldest first after one", async () => {
      const a = await target.organization();
      const b = await target.organization();
      for (const number of [1, 2, 3, 4]) await store().recordRevision(a, revision(number));
      await store().recordRevision(b, revision(1));
      expect((await store().listRevisions(a, { limit: 10 })).map((r) => r.revision)).toEqual([4, 3, 2, 1]);
      expect((await store().listRevisions(a, { before: 4, limit: 2 })).map((r) => r.revision)).toEqual([3, 2]);
      const summary = (await store().listRevisions(a, { before: 2, limit: 5 }))[0];
      expect(summary).toEqual({ ...revision(1), document: undefined });
      expect(summary).not.toHaveProperty("document");
      expect(await store().revisionsAfter(a, 2, 10)).toEqual([revision(3), revision(4)]);
      expect((await store().revisionsAfter(a, 0, 1)).map((r) => r.revision)).toEqual([1]);
      expect((await store().latestRevision(a))?.revision).toBe(4);
      expect((await store().listRevisions(b, { limit: 10 })).map((r) => r.revision)).toEqual([1]);
    });
  });

  describe("resources", () => {
    test("resources are replaced per organisation: removing in one leaves the same names of another", async () => {
      const a = await target.organization();
      const b = await target.organization();
      await store().replaceResources(a, { remove: [], insert: [route("one"), route("two")] }, at(1));
      await store().replaceResources(b, { remove: [], insert: [route("one", "http://b.example")] }, at(1));
      await store().replaceResources(a, { remove: [{ kind: "routes", name: "one" }], insert: [route("three")] }, at(2));
      expect(sorted(await store().listResources(a))).toEqual(sorted([route("two"), route("three")]));
      expect(sorted(await store().listResources(b))).toEqual([route("one", "http://b.example")]);
    });

    test("a resource name is unique per kind in an organisation", async () => {
      const a = await target.organization();
      await store().replaceResources(a, { remove: [], insert: [route("dup")] }, at(1));
      // A raw statement's violation reaches the caller as Prisma's P2010 (raw query failed), which
      // errors.ts does not read as a unique violation; the import never inserts a name it has not removed.
      await expect(store().replaceResources(a, { remove: [], insert: [route("dup", "http://other.example")] }, at(2))).rejects.toThrow(
        /UNIQUE|unique/,
      );
      expect(await store().listResources(a)).toEqual([route("dup")]);
    });

    test("thousands of resources go in and out in chunks", async () => {
      const a = await target.organization();
      const many = Array.from({ length: 1203 }, (_, i) => route(`r-${String(i).padStart(4, "0")}`));
      await store().replaceResources(a, { remove: [], insert: many }, at(1));
      expect(await store().listResources(a)).toHaveLength(1203);
      await store().replaceResources(a, { remove: many.slice(0, 1100).map(({ kind, name }) => ({ kind, name })), insert: [] }, at(2));
      expect(sorted(await store().listResources(a))).toEqual(sorted(many.slice(1100)));
    });
  });
});
