import { randomUUID } from "node:crypto";
import { createSecretsStore, type SecretAuditRecord } from "../../src/storage/secrets-store.js";
import { at, describeStorage, rejectsAsDuplicate } from "./storage-target.js";

describeStorage("secrets store", (target) => {
  const store = () => createSecretsStore(target.db.client);

  /** A secret at version 1 with its value stored. */
  async function secret(organizationId: string, environment: string, name: string, value = `sealed ${name}`) {
    const id = randomUUID();
    await store().createSecret({ id, organizationId, environment, name, version: 1, tags: ["b", "a"], updatedAt: at(0) });
    await store().insertVersion({
      secretId: id,
      version: 1,
      ciphertext: Buffer.from(value),
      tags: ["b", "a"],
      actor: "test",
      createdAt: at(0),
    });
    return id;
  }

  function event(organizationId: string, second: number, id: string = randomUUID()): SecretAuditRecord {
    return { id, organizationId, action: "write", actor: "test", environment: "prod", names: ["A"], createdAt: at(second) };
  }

  describe("keyrings", () => {
    test("an organisation has one keyring: a second insert is refused and the first is kept", async () => {
      const a = await target.organization();
      const b = await target.organization();
      const keyring = {
        organizationId: a,
        publicKeyPem: "PEM",
        keyId: "k1",
        privateKeyEnc: Buffer.from([1, 2]),
        dataKeyEnc: Buffer.from([3, 4]),
        masterKeyId: "mk1",
        keyCreatedAt: at(0),
      };
      expect(await store().insertKeyring(keyring)).toBe(true);
      expect(await store().insertKeyring({ ...keyring, keyId: "k2" })).toBe(false);
      expect(await store().findKeyring(a)).toEqual(keyring);
      expect(await store().findKeyring(b)).toBeNull();
    });

    const rotation = (organizationId: string, replacedKeyId: string, keyId: string, second: number) => ({
      organizationId,
      replacedKeyId,
      publicKeyPem: `PEM ${keyId}`,
      keyId,
      privateKeyEnc: Buffer.from(keyId),
      dataKeyEnc: Buffer.from(`data ${keyId}`),
      masterKeyId: `mk ${keyId}`,
      rotatedAt: at(second),
    });

    test("a rotation replaces the current key pair and keeps the old one, as stored, among the previous keys", async () => {
      const a = await target.organization();
      const b = await target.organization();
      const keyring = (organizationId: string) => ({
        organizationId,
        publicKeyPem: "PEM k1",
        keyId: "k1",
        privateKeyEnc: Buffer.from("k1"),
        dataKeyEnc: Buffer.from("data"),
        masterKeyId: null,
        keyCreatedAt: at(0),
      });
      await store().insertKeyring(keyring(a));
      await store().insertKeyring(keyring(b));
      expect(await target.db.transaction((tx) => createSecretsStore(tx).rotateSealingKey(rotation(a, "k1", "k2", 10)))).toBe(true);
      expect(await target.db.transaction((tx) => createSecretsStore(tx).rotateSealingKey(rotation(a, "k2", "k3", 20)))).toBe(true);
      expect(await store().findKeyring(a)).toEqual({
        organizationId: a,
        publicKeyPem: "PEM k3",
        keyId: "k3",
        privateKeyEnc: Buffer.from("k3"),
        dataKeyEnc: Buffer.from("data k3"),
        masterKeyId: "mk k3",
        keyCreatedAt: at(20),
      });
      expect(await store().listPreviousSealingKeys(a)).toEqual([
        // Each with the master key id stored beside its bytes.
        {
          organizationId: a,
          keyId: "k2",
          publicKeyPem: "PEM k2",
          privateKeyEnc: Buffer.from("k2"),
          masterKeyId: "mk k2",
          createdAt: at(10),
          retiredAt: at(20),
        },
        {
          organizationId: a,
          keyId: "k1",
          publicKeyPem: "PEM k1",
          privateKeyEnc: Buffer.from("k1"),
          masterKeyId: null,
          createdAt: at(0),
          retiredAt: at(10),
        },
      ]);
      // Scoped by organisation: b's keyring is untouched and has no previous keys.
      expect((await store().findKeyring(b))?.keyId).toBe("k1");
      expect(await store().listPreviousSealingKeys(b)).toEqual([]);
      await store().deletePreviousSealingKeys(a, at(15));
      expect((await store().listPreviousSealingKeys(a)).map((key) => key.keyId)).toEqual(["k2"]);
    });

    test("a rotation that names a key that is no longer current writes nothing", async () => {
      const a = await target.organization();
      await store().insertKeyring({
        organizationId: a,
        publicKeyPem: "PEM k1",
        keyId: "k1",
        privateKeyEnc: Buffer.from("k1"),
        dataKeyEnc: Buffer.from("data"),
        masterKeyId: null,
        keyCreatedAt: at(0),
      });
      expect(await target.db.transaction((tx) => createSecretsStore(tx).rotateSealingKey(rotation(a, "k0", "k2", 10)))).toBe(false);
      expect((await store().findKeyring(a))?.keyId).toBe("k1");
      expect(await store().listPreviousSealingKeys(a)).toEqual([]);
      expect(await target.db.transaction((tx) => createSecretsStore(tx).rotateSealingKey(rotation(randomUUID(), "k1", "k2", 10)))).toBe(
        false,
      );
    });

    test("sealing_key_rotation_days is 0 until set, per organisation; null for an organisation that does not exist", async () => {
      const a = await target.organization();
      const b = await target.organization();
      expect(await store().findSealingKeyRotationDays(a)).toBe(0);
      expect(await store().setSealingKeyRotationDays(a, 30)).toBe(true);
      expect(await store().findSealingKeyRotationDays(a)).toBe(30);
      expect(await store().findSealingKeyRotationDays(b)).toBe(0);
      expect(await store().setSealingKeyRotationDays(randomUUID(), 30)).toBe(false);
      expect(await store().findSealingKeyRotationDays(randomUUID())).toBeNull();
    });
  });

  describe("secrets", () => {
    test("a name is unique per organisation and environment, and free in another of either", async () => {
      const a = await target.organization();
      const b = await target.organization();
      await secret(a, "prod", "DB_URL");
      expect(
        await rejectsAsDuplicate(
          store().createSecret({
            id: randomUUID(),
            organizationId: a,
            environment: "prod",
            name: "DB_URL",
            version: 1,
            tags: [],
            updatedAt: at(1),
          }),
        ),
      ).toBe(true);
      await secret(a, "staging", "DB_URL");
      await secret(b, "prod", "DB_URL");
      expect((await store().findSecret(a, "prod", "DB_URL"))?.version).toBe(1);
    });

    test("a secret is found only through its own organisation and environment", async () => {
      const a = await target.organization();
      const b = await target.organization();
      const id = await secret(a, "prod", "TOKEN");
      expect(await store().findSecret(a, "prod", "TOKEN")).toEqual({
        id,
        organizationId: a,
        environment: "prod",
        name: "TOKEN",
        version: 1,
        tags: ["b", "a"],
        updatedAt: at(0),
      });
      expect(await store().findSecret(b, "prod", "TOKEN")).toBeNull();
      expect(await store().findSecret(a, "staging", "TOKEN")).toBeNull();
    });

    test("advancing moves to the next version, concurrently without losing one; another organisation cannot", async () => {
      const a = await target.organization();
      const b = await target.organization();
      await secret(a, "prod", "COUNTER");
      expect(
        await store().advanceSecret({ organizationId: b, environment: "prod", name: "COUNTER" }, { tags: [], updatedAt: at(1) }),
      ).toBeNull();
      const versions = await Promise.all(
        Array.from({ length: 5 }, (_, i) =>
          store().advanceSecret({ organizationId: a, environment: "prod", name: "COUNTER" }, { tags: [`t${i}`], updatedAt: at(i + 1) }),
        ),
      );
      expect(versions.map((v) => v?.version).sort()).toEqual([2, 3, 4, 5, 6]);
      expect((await store().findSecret(a, "prod", "COUNTER"))?.version).toBe(6);
      expect(
        await store().advanceSecret({ organizationId: a, environment: "prod", name: "MISSING" }, { tags: [], updatedAt: at(9) }),
      ).toBeNull();
    });

    test("current values come with their metadata, of one organisation and environment, optionally by name", async () => {
      const a = await target.organization();
      const b = await target.organization();
      await secret(a, "prod", "ONE", "one");
      const two = await secret(a, "prod", "TWO", "two (v1)");
      await store().advanceSecret({ organizationId: a, environment: "prod", name: "TWO" }, { tags: ["x"], updatedAt: at(5) });
      await store().insertVersion({
        secretId: two,
        version: 2,
        ciphertext: Buffer.from("two (v2)"),
        tags: ["x"],
        actor: "test",
        createdAt: at(5),
      });
      await secret(a, "staging", "ONE", "staging one");
      await secret(b, "prod", "ONE", "b's one");
      const all = await store().listCurrentValues(a, "prod", []);
      expect(all.map((s) => [s.name, s.version, s.ciphertext.toString()]).sort()).toEqual([
        ["ONE", 1, "one"],
        ["TWO", 2, "two (v2)"],
      ]);
      const named = await store().listCurrentValues(a, "prod", ["TWO", "ABSENT"]);
      expect(named).toEqual([
        {
          id: two,
          organizationId: a,
          environment: "prod",
          name: "TWO",
          version: 2,
          tags: ["x"],
          updatedAt: at(5),
          ciphertext: Buffer.from("two (v2)"),
        },
      ]);
      expect(await store().listCurrentValues(a, "prod", [], { limit: 1 })).toHaveLength(1);
      expect((await store().listSecrets(a, "prod")).map((s) => s.name).sort()).toEqual(["ONE", "TWO"]);
    });

    test("versions are listed newest first and pruned below a version", async () => {
      const a = await target.organization();
      const id = await secret(a, "prod", "ROTATED");
      for (const version of [2, 3]) {
        await store().insertVersion({
          secretId: id,
          version,
          ciphertext: Buffer.from(`v${version}`),
          tags: [],
          actor: "test",
          createdAt: at(version),
        });
      }
      expect((await store().listVersions(id)).map((v) => v.version)).toEqual([3, 2, 1]);
      await store().pruneVersions(id, 3);
      expect((await store().listVersions(id)).map((v) => v.version)).toEqual([3]);
      expect(
        await rejectsAsDuplicate(
          store().insertVersion({ secretId: id, version: 3, ciphertext: Buffer.from("again"), tags: [], actor: "test", createdAt: at(4) }),
        ),
      ).toBe(true);
    });

    test("a secret is deleted with its versions, only through its own organisation and environment", async () => {
      const a = await target.organization();
      const b = await target.organization();
      const id = await secret(a, "prod", "GONE");
      expect(await store().deleteSecret(b, "prod", "GONE")).toBe(false);
      expect(await store().deleteSecret(a, "staging", "GONE")).toBe(false);
      expect(await store().findSecret(a, "prod", "GONE")).not.toBeNull();
      expect(await store().deleteSecret(a, "prod", "GONE")).toBe(true);
      expect(await store().findSecret(a, "prod", "GONE")).toBeNull();
      expect(await store().listVersions(id)).toEqual([]);
      expect(await store().deleteSecret(a, "prod", "GONE")).toBe(false);
    });
  });

  describe("audit trail", () => {
    test("events are listed newest first (time, then id), in pages after a cursor, per organisation", async () => {
      const a = await target.organization();
      const b = await target.organization();
      await store().insertAuditEvent(event(a, 10, "e-10"));
      await store().insertAuditEvents([event(a, 30, "e-30"), event(a, 20, "e-20b"), event(a, 20, "e-20a")]);
      await store().insertAuditEvents([]);
      await store().insertAuditEvent(event(b, 25, "e-b"));
      const first = await store().listAuditEvents(a, 2);
      expect(first.map((e) => e.id)).toEqual(["e-30", "e-20b"]);
      const last = first[1];
      if (!last) throw new Error("two events expected");
      const next = await store().listAuditEvents(a, 10, { createdAt: last.createdAt, id: last.id });
      expect(next.map((e) => e.id)).toEqual(["e-20a", "e-10"]);
      expect(next[0]).toEqual({ ...event(a, 20, "e-20a"), action: "write" });
      expect((await store().listAuditEvents(b, 10)).map((e) => e.id)).toEqual(["e-b"]);
    });
  });
});
