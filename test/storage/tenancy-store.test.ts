import { randomUUID } from "node:crypto";
import { createTenancyStore, type OrganizationKeyKind } from "../../src/storage/tenancy-store.js";
import { at, describeStorage, domainErrorOf, rejectsAsDuplicate } from "./storage-target.js";

const hash = () => `hash-${randomUUID()}`;

describeStorage("tenancy store", (target) => {
  const store = () => createTenancyStore(target.db.client);

  async function apiKey(accountId: string, name = "key") {
    const id = randomUUID();
    const keyHash = hash();
    await store().createApiKey({ id, accountId, name, prefix: "gk_test", hash: keyHash });
    return { id, hash: keyHash };
  }

  async function organizationKey(organizationId: string, kind: OrganizationKeyKind) {
    const id = randomUUID();
    const keyHash = hash();
    await store().createOrganizationKey({ id, organizationId, kind, prefix: kind === "secret" ? "sk_test" : "pk_test", hash: keyHash });
    return { id, hash: keyHash };
  }

  describe("organisations", () => {
    test("an organisation is found by its id; an unknown id finds nothing", async () => {
      const id = await target.organization("Acme");
      expect(await store().findOrganization(id)).toEqual({ id, name: "Acme", createdAt: expect.any(Date) });
      expect(await store().findOrganization(randomUUID())).toBeNull();
    });

    test("an id cannot be used twice", async () => {
      const id = await target.organization();
      expect(await rejectsAsDuplicate(store().createOrganization({ id, name: "Again" }))).toBe(true);
      expect((await store().findOrganization(id))?.name).toBe("Org");
    });

    test("organisations are listed oldest first", async () => {
      const ids = [await target.organization("Third"), await target.organization("First"), await target.organization("Second")];
      const times = [at(30), at(10), at(20)];
      for (const [i, id] of ids.entries()) {
        await target.db.client.organization.update({ where: { id }, data: { createdAt: times[i] } });
      }
      const listed = (await store().listOrganizations()).filter((org) => ids.includes(org.id)).map((org) => org.name);
      expect(listed).toEqual(["First", "Second", "Third"]);
    });
  });

  describe("accounts and memberships", () => {
    test("an e-mail address belongs to one account", async () => {
      await target.account({ email: "taken@example.com" });
      expect(
        await rejectsAsDuplicate(
          store().createAccount({ id: randomUUID(), email: "taken@example.com", displayName: "Other", kind: "person" }),
        ),
      ).toBe(true);
    });

    test("a role is per organisation: a member of A has no role in B", async () => {
      const a = await target.organization();
      const b = await target.organization();
      const accountId = await target.account({ organizationId: a, role: "admin" });
      expect(await store().findRole(a, accountId)).toBe("admin");
      expect(await store().findRole(b, accountId)).toBeNull();
      expect(await store().findRole(a, randomUUID())).toBeNull();
    });

    test("an account is a member of an organisation once", async () => {
      const a = await target.organization();
      const accountId = await target.account({ organizationId: a, role: "member" });
      expect(await rejectsAsDuplicate(store().addMembership({ organizationId: a, accountId, role: "admin" }))).toBe(true);
      expect(await store().findRole(a, accountId)).toBe("member");
    });
  });

  describe("API keys", () => {
    test("a key is found by its hash with its account; an unknown hash finds nothing", async () => {
      const accountId = await target.account();
      const key = await apiKey(accountId, "deploy");
      const found = await store().findApiKeyByHash(key.hash);
      expect(found).toMatchObject({ id: key.id, accountId, name: "deploy", hash: key.hash, revokedAt: null });
      expect(found?.account.disabledAt).toBeNull();
      expect(await store().findApiKeyByHash(hash())).toBeNull();
    });

    test("two keys cannot share a hash", async () => {
      const accountId = await target.account();
      const key = await apiKey(accountId);
      expect(
        await rejectsAsDuplicate(store().createApiKey({ id: randomUUID(), accountId, name: "copy", prefix: "gk_test", hash: key.hash })),
      ).toBe(true);
    });

    test("the principal of a key carries its role in the organisation asked about, and none in another", async () => {
      const a = await target.organization();
      const b = await target.organization();
      const accountId = await target.account({ organizationId: a, role: "admin" });
      const key = await apiKey(accountId);
      expect(await store().findApiKeyPrincipal(key.hash, a)).toMatchObject({ id: key.id, accountId, role: "admin" });
      expect(await store().findApiKeyPrincipal(key.hash, b)).toMatchObject({ id: key.id, accountId, role: null });
      expect(await store().findApiKeyPrincipal(hash(), a)).toBeNull();
    });

    test("an organisation lists only its members' keys, oldest first, without their hashes", async () => {
      const a = await target.organization();
      const b = await target.organization();
      const memberOfA = await target.account({ organizationId: a, role: "member" });
      const memberOfB = await target.account({ organizationId: b, role: "admin" });
      const later = await apiKey(memberOfA, "later");
      const earlier = await apiKey(memberOfA, "earlier");
      await apiKey(memberOfB, "of b");
      await target.db.client.apiKey.update({ where: { id: later.id }, data: { createdAt: at(20) } });
      await target.db.client.apiKey.update({ where: { id: earlier.id }, data: { createdAt: at(10) } });
      const listed = await store().listApiKeys(a);
      expect(listed.map((key) => [key.name, key.role])).toEqual([
        ["earlier", "member"],
        ["later", "member"],
      ]);
      expect(listed[0]).not.toHaveProperty("hash");
      expect((await store().listApiKeys(b)).map((key) => key.name)).toEqual(["of b"]);
    });

    test("a key is revoked once; an unknown key is not revoked", async () => {
      const key = await apiKey(await target.account());
      expect(await store().revokeApiKey(key.id, at(1))).toBe(true);
      expect(await store().revokeApiKey(key.id, at(2))).toBe(false);
      expect((await store().findApiKeyByHash(key.hash))?.revokedAt).toEqual(at(1));
      expect(await store().revokeApiKey(randomUUID(), at(3))).toBe(false);
    });

    test("a use is recorded on the key", async () => {
      const key = await apiKey(await target.account());
      await store().touchApiKey(key.id, at(5));
      expect((await store().findApiKeyByHash(key.hash))?.lastUsedAt).toEqual(at(5));
    });
  });

  describe("organisation keys", () => {
    test("a key is found by its hash, with its organisation and kind", async () => {
      const a = await target.organization();
      const key = await organizationKey(a, "secret");
      expect(await store().findOrganizationKeyByHash(key.hash)).toMatchObject({
        id: key.id,
        organizationId: a,
        kind: "secret",
        revokedAt: null,
      });
      expect(await store().findOrganizationKeyByHash(hash())).toBeNull();
    });

    test("revoking an organisation's keys of one kind leaves its other kind and other organisations' keys alone", async () => {
      const a = await target.organization();
      const b = await target.organization();
      const secretOfA = await organizationKey(a, "secret");
      const publishableOfA = await organizationKey(a, "publishable");
      const secretOfB = await organizationKey(b, "secret");
      expect(await store().revokeOrganizationKeys(a, "secret", at(1))).toBe(1);
      expect((await store().findOrganizationKeyByHash(secretOfA.hash))?.revokedAt).toEqual(at(1));
      expect((await store().findOrganizationKeyByHash(publishableOfA.hash))?.revokedAt).toBeNull();
      expect((await store().findOrganizationKeyByHash(secretOfB.hash))?.revokedAt).toBeNull();
      expect(await store().revokeOrganizationKeys(a, "secret", at(2))).toBe(0);
    });

    test("a use is recorded on the key", async () => {
      const key = await organizationKey(await target.organization(), "publishable");
      await store().touchOrganizationKey(key.id, at(7));
      expect((await store().findOrganizationKeyByHash(key.hash))?.lastUsedAt).toEqual(at(7));
    });
  });

  describe("setup tokens and initialisation", () => {
    test("a setup token hash is unique", async () => {
      const accountId = await target.account();
      const tokenHash = hash();
      await store().createSetupToken({ id: randomUUID(), accountId, hash: tokenHash, expiresAt: at(60) });
      expect(await rejectsAsDuplicate(store().createSetupToken({ id: randomUUID(), accountId, hash: tokenHash, expiresAt: at(60) }))).toBe(
        true,
      );
    });

    test("the store is initialised once: a second mark is already_exists (already_initialized)", async () => {
      expect(await store().isInitialized()).toBe(false);
      await store().markInitialized(at(0));
      expect(await store().isInitialized()).toBe(true);
      expect(await domainErrorOf(store().markInitialized(at(1)))).toEqual({ kind: "already_exists", reason: "already_initialized" });
    });
  });
});
