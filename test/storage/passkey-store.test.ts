import { randomUUID } from "node:crypto";
import { createIdentityStore } from "../../src/storage/identity-store.js";
import { type CeremonyKind, createPasskeyStore, type PasskeyRecord } from "../../src/storage/passkey-store.js";
import { at, describeStorage, domainErrorOf } from "./storage-target.js";

describeStorage("passkey store", (target) => {
  const store = () => createPasskeyStore(target.db.client);

  async function identity(organizationId: string, identifier = `user-${randomUUID()}@example.com`) {
    const id = randomUUID();
    await createIdentityStore(target.db.client).createIdentity({ id, organizationId, identifier, createdAt: at(0) });
    return id;
  }

  function passkey(organizationId: string, identityId: string, overrides: Partial<PasskeyRecord> = {}): PasskeyRecord {
    return {
      id: `cred-${randomUUID()}`,
      organizationId,
      identityId,
      publicKey: new Uint8Array([165, 1, 2, 3, 0, 255]),
      counter: 0,
      transports: ["internal", "hybrid"],
      deviceType: "multiDevice",
      backedUp: true,
      aaguid: "00000000-0000-0000-0000-000000000000",
      name: null,
      createdAt: at(0),
      lastUsedAt: null,
      ...overrides,
    };
  }

  async function ceremony(organizationId: string, kind: CeremonyKind = "login", expiresAt = at(300)) {
    const id = randomUUID();
    await store().createCeremony({
      id,
      organizationId,
      kind,
      challenge: `challenge-${id}`,
      identityId: null,
      identifier: "someone@example.com",
      displayName: null,
      createdAt: at(0),
      expiresAt,
    });
    return id;
  }

  describe("ceremonies", () => {
    test("a ceremony is found only through its own organisation", async () => {
      const a = await target.organization();
      const b = await target.organization();
      const id = await ceremony(a, "register");
      expect(await store().findCeremony(a, id)).toMatchObject({ id, organizationId: a, kind: "register", usedAt: null });
      expect(await store().findCeremony(b, id)).toBeNull();
      expect(await store().findCeremony(a, randomUUID())).toBeNull();
    });

    test("a ceremony is spent once, through its organisation and kind, before it expires", async () => {
      const a = await target.organization();
      const b = await target.organization();
      const id = await ceremony(a, "login", at(300));
      expect(await store().spendCeremony(b, id, "login", at(1))).toBeNull();
      expect(await store().spendCeremony(a, id, "register", at(1))).toBeNull();
      expect(await store().spendCeremony(a, id, "login", at(1))).toMatchObject({ id, usedAt: at(1) });
      expect(await store().spendCeremony(a, id, "login", at(2))).toBeNull();
      const expiring = await ceremony(a, "login", at(60));
      expect(await store().spendCeremony(a, expiring, "login", at(60))).toBeNull();
    });

    test("of concurrent spends of one ceremony exactly one gets it", async () => {
      const a = await target.organization();
      const id = await ceremony(a);
      const results = await Promise.all(Array.from({ length: 8 }, () => store().spendCeremony(a, id, "login", at(1))));
      expect(results.filter((r) => r !== null)).toHaveLength(1);
    });

    test("pruning deletes only ceremonies that expired before the time given", async () => {
      const a = await target.organization();
      const old = await ceremony(a, "login", at(10));
      const current = await ceremony(a, "login", at(100));
      await store().pruneCeremonies(at(50));
      expect(await store().findCeremony(a, old)).toBeNull();
      expect(await store().findCeremony(a, current)).not.toBeNull();
    });
  });

  describe("passkeys", () => {
    test("a credential id is registered once, in any organisation (already_exists, passkey_exists)", async () => {
      const a = await target.organization();
      const b = await target.organization();
      const first = passkey(a, await identity(a));
      await store().createPasskey(first);
      expect(await domainErrorOf(store().createPasskey(passkey(b, await identity(b), { id: first.id })))).toEqual({
        kind: "already_exists",
        reason: "passkey_exists",
      });
      expect(await store().findPasskey(b, first.id)).toBeNull();
    });

    test("a passkey reads back as it was stored", async () => {
      const a = await target.organization();
      const record = passkey(a, await identity(a), { counter: 2 ** 40, name: "Laptop", transports: ["usb"] });
      await store().createPasskey(record);
      expect(await store().findPasskey(a, record.id)).toEqual(record);
    });

    test("an identity's passkeys are listed oldest first and counted, only through their organisation", async () => {
      const a = await target.organization();
      const b = await target.organization();
      const owner = await identity(a);
      const later = passkey(a, owner, { createdAt: at(20), id: "cred-a" });
      const earlier = passkey(a, owner, { createdAt: at(10), id: `cred-z-${randomUUID()}` });
      const sameTime = passkey(a, owner, { createdAt: at(20), id: "cred-b" });
      for (const record of [later, earlier, sameTime]) await store().createPasskey(record);
      await store().createPasskey(passkey(a, await identity(a)));
      expect((await store().listPasskeys(a, owner)).map((p) => p.id)).toEqual([earlier.id, "cred-a", "cred-b"]);
      expect(await store().countPasskeys(a, owner)).toBe(3);
      expect(await store().listPasskeys(b, owner)).toEqual([]);
      expect(await store().countPasskeys(b, owner)).toBe(0);
      expect(await store().findPasskey(b, later.id)).toBeNull();
    });

    test("a passkey is removed only by its organisation and identity", async () => {
      const a = await target.organization();
      const b = await target.organization();
      const owner = await identity(a);
      const record = passkey(a, owner);
      await store().createPasskey(record);
      expect(await store().removePasskey(b, owner, record.id)).toBe(false);
      expect(await store().removePasskey(a, await identity(a), record.id)).toBe(false);
      expect(await store().findPasskey(a, record.id)).not.toBeNull();
      expect(await store().removePasskey(a, owner, record.id)).toBe(true);
      expect(await store().removePasskey(a, owner, record.id)).toBe(false);
      expect(await store().findPasskey(a, record.id)).toBeNull();
    });

    test("a use is recorded only with a counter above the stored one, unless both are 0 (WebAuthn 6.1.1)", async () => {
      const a = await target.organization();
      const b = await target.organization();
      const counting = passkey(a, await identity(a), { counter: 5 });
      const zero = passkey(a, await identity(a), { counter: 0 });
      await store().createPasskey(counting);
      await store().createPasskey(zero);
      const use = (counter: number, second: number) => ({ counter, backedUp: false, deviceType: "singleDevice", at: at(second) });
      expect(await store().recordPasskeyUse(a, counting.id, use(5, 1))).toBe(false);
      expect(await store().recordPasskeyUse(a, counting.id, use(4, 1))).toBe(false);
      expect(await store().recordPasskeyUse(b, counting.id, use(6, 1))).toBe(false);
      expect(await store().recordPasskeyUse(a, counting.id, use(6, 2))).toBe(true);
      expect(await store().findPasskey(a, counting.id)).toMatchObject({
        counter: 6,
        backedUp: false,
        deviceType: "singleDevice",
        lastUsedAt: at(2),
      });
      expect(await store().recordPasskeyUse(a, zero.id, use(0, 3))).toBe(true);
      expect(await store().recordPasskeyUse(a, zero.id, use(0, 4))).toBe(true);
      // An authenticator that starts counting may; one that stops again may not.
      expect(await store().recordPasskeyUse(a, zero.id, use(1, 5))).toBe(true);
      expect(await store().recordPasskeyUse(a, zero.id, use(0, 6))).toBe(false);
    });

    test("login candidates are the identity of the identifier in the organisation and its passkeys, oldest first", async () => {
      const a = await target.organization();
      const b = await target.organization();
      const owner = await identity(a, "candidate@example.com");
      const second = passkey(a, owner, { createdAt: at(20), transports: ["usb"] });
      const first = passkey(a, owner, { createdAt: at(10), transports: [] });
      await store().createPasskey(second);
      await store().createPasskey(first);
      expect(await store().findLoginCandidates(a, "candidate@example.com")).toEqual({
        identityId: owner,
        passkeys: [
          { id: first.id, transports: [] },
          { id: second.id, transports: ["usb"] },
        ],
      });
      expect(await store().findLoginCandidates(b, "candidate@example.com")).toEqual({ identityId: null, passkeys: [] });
      const bare = await identity(a, "bare@example.com");
      expect(await store().findLoginCandidates(a, "bare@example.com")).toEqual({ identityId: bare, passkeys: [] });
    });
  });

  describe("locks and system values", () => {
    test("an identity is locked only through its own organisation", async () => {
      const a = await target.organization();
      const b = await target.organization();
      const owner = await identity(a);
      expect(await target.db.transaction((tx) => createPasskeyStore(tx).lockIdentity(a, owner))).toBe(true);
      expect(await target.db.transaction((tx) => createPasskeyStore(tx).lockIdentity(b, owner))).toBe(false);
    });

    test("of concurrent first reads of a system value, one value wins for all", async () => {
      const key = `test-${randomUUID()}`;
      const values = await Promise.all(
        Array.from({ length: 6 }, (_, i) => store().findOrCreateSystemValue(key, () => ({ value: `value-${i}`, masterKeyId: `mk-${i}` }))),
      );
      expect(new Set(values.map((v) => `${v.value} ${v.masterKeyId}`)).size).toBe(1);
      expect(values[0]?.masterKeyId).toBe(values[0]?.value.replace("value", "mk"));
      expect(await store().findOrCreateSystemValue(key, () => ({ value: "later", masterKeyId: null }))).toEqual(values[0]);
    });
  });
});
