import { randomUUID } from "node:crypto";
import { createIdentityStore, type IdentityStore, type OneTimeTokenKind } from "../../src/storage/identity-store.js";
import { at, describeStorage, domainErrorOf } from "./storage-target.js";

describeStorage("identity store", (target) => {
  // The application builds the store with the database's plain-SQL door outside
  // transactions, and over a transaction client (no door) inside one: both must behave alike.
  describe.each([
    ["plain SQL", true],
    ["Prisma client only", false],
  ])("through %s", (_mode, plain) => {
    const store = (): IdentityStore => createIdentityStore(target.db.client, plain ? target.db.sql : undefined);

    async function identity(organizationId: string, identifier = `user-${randomUUID()}@example.com`) {
      const record = { id: randomUUID(), organizationId, identifier, createdAt: at(0) };
      await store().createIdentity(record);
      return record;
    }

    async function session(organizationId: string, identityId: string, createdAt = at(0), expiresAt = at(3600)) {
      const id = randomUUID();
      await store().createSession({ id, organizationId, identityId, method: "password", createdAt, expiresAt });
      return id;
    }

    async function token(organizationId: string, identityId: string, kind: OneTimeTokenKind = "magic_link", expiresAt = at(900)) {
      const hash = `token-${randomUUID()}`;
      await store().createOneTimeToken({ id: randomUUID(), organizationId, identityId, kind, hash, createdAt: at(0), expiresAt });
      return hash;
    }

    describe("settings", () => {
      test("an organisation without settings has none; another's settings are not its own", async () => {
        const a = await target.organization();
        const b = await target.organization();
        await store().saveSettings(a, { password: true }, at(1));
        expect(await store().findSettings(b)).toBeNull();
        expect((await store().findSettings(a))?.password).toBe(true);
      });

      test("a patch changes only the fields it names, and origins keep their order", async () => {
        const a = await target.organization();
        const first = await store().saveSettings(
          a,
          { password: true, rpId: "example.com", origins: ["https://b.example", "https://a.example"] },
          at(1),
        );
        expect(first).toMatchObject({ password: true, passkeys: true, magicLinks: true, sessionTtlSeconds: 3600, updatedAt: at(1) });
        await store().saveSettings(a, { sessionTtlSeconds: 120 }, at(2));
        expect(await store().findSettings(a)).toEqual({
          ...first,
          sessionTtlSeconds: 120,
          updatedAt: at(2),
        });
        await store().saveSettings(a, { origins: null, rpId: null }, at(3));
        expect(await store().findSettings(a)).toMatchObject({ origins: null, rpId: null, password: true, sessionTtlSeconds: 120 });
      });
    });

    describe("identities", () => {
      test("an identifier is unique in its organisation (already_exists, identity_exists) and free in another", async () => {
        const a = await target.organization();
        const b = await target.organization();
        const first = await identity(a, "same@example.com");
        expect(
          await domainErrorOf(
            store().createIdentity({ id: randomUUID(), organizationId: a, identifier: "same@example.com", createdAt: at(1) }),
          ),
        ).toEqual({ kind: "already_exists", reason: "identity_exists" });
        const other = await identity(b, "same@example.com");
        expect(await store().findIdentityByIdentifier(a, "same@example.com")).toEqual(first);
        expect(await store().findIdentityByIdentifier(b, "same@example.com")).toEqual(other);
      });

      test("an identity is found only through its own organisation", async () => {
        const a = await target.organization();
        const b = await target.organization();
        const ofA = await identity(a);
        expect(await store().findIdentity(a, ofA.id)).toEqual(ofA);
        expect(await store().findIdentity(b, ofA.id)).toBeNull();
        expect(await store().findIdentityByIdentifier(b, ofA.identifier)).toBeNull();
        expect(await store().findIdentity(a, randomUUID())).toBeNull();
      });

      test("concurrent creations of one identifier: exactly one succeeds", async () => {
        const a = await target.organization();
        const outcomes = await Promise.allSettled(
          Array.from({ length: 6 }, () =>
            store().createIdentity({ id: randomUUID(), organizationId: a, identifier: "race@example.com", createdAt: at(0) }),
          ),
        );
        expect(outcomes.filter((o) => o.status === "fulfilled")).toHaveLength(1);
        for (const outcome of outcomes) {
          if (outcome.status === "rejected") expect(outcome.reason).toMatchObject({ kind: "already_exists", reason: "identity_exists" });
        }
      });
    });

    describe("passwords and the login context", () => {
      test("a password hash is found only through its own organisation, and replaced by a new one", async () => {
        const a = await target.organization();
        const b = await target.organization();
        const ofA = await identity(a);
        expect(await store().findPasswordHash(a, ofA.id)).toBeNull();
        await store().savePasswordHash(a, ofA.id, "hash-1", at(1));
        await store().savePasswordHash(a, ofA.id, "hash-2", at(2));
        expect(await store().findPasswordHash(a, ofA.id)).toBe("hash-2");
        expect(await store().findPasswordHash(b, ofA.id)).toBeNull();
      });

      test("the login context holds the settings, identity, hash and recent failures of its own organisation only", async () => {
        const a = await target.organization();
        const b = await target.organization();
        const ofA = await identity(a, "ctx@example.com");
        await store().savePasswordHash(a, ofA.id, "hash-a", at(0));
        await store().saveSettings(a, { password: true }, at(0));
        const failure = (organizationId: string, clientHash: string, second: number) =>
          store().recordLoginFailure({ id: randomUUID(), organizationId, identifierHash: "h-ctx", clientHash, createdAt: at(second) });
        for (const second of [10, 20, 30]) await failure(a, "client-1", second);
        await failure(a, "client-2", 25);
        await failure(b, "client-1", 25);
        const query = (since: number, threshold: number, identifierLimit: number) => ({
          identifierHash: "h-ctx",
          clientHash: "client-1",
          since: at(since),
          threshold,
          identifierLimit,
        });

        const context = await store().findLoginContext(a, "ctx@example.com", query(15, 5, 10));
        expect(context).toMatchObject({ identityId: ofA.id, hash: "hash-a" });
        expect(context.settings?.password).toBe(true);
        // From this client: newest first; from any client of this organisation: newest first.
        expect(context.failures).toEqual({ pair: [at(30), at(20)], identifier: [at(30), at(25), at(20)] });

        const limited = await store().findLoginContext(a, "ctx@example.com", query(0, 2, 2));
        expect(limited.failures).toEqual({ pair: [at(30), at(20)], identifier: [at(30), at(25)] });

        expect(await store().findLoginContext(b, "ctx@example.com", query(0, 5, 10))).toEqual({
          settings: null,
          identityId: null,
          hash: null,
          failures: { pair: [at(25)], identifier: [at(25)] },
        });
      });

      test("recent failures are the organisation's own, and clearing is per organisation", async () => {
        const a = await target.organization();
        const b = await target.organization();
        for (const second of [5, 15, 10]) {
          await store().recordLoginFailure({
            id: randomUUID(),
            organizationId: a,
            identifierHash: "h",
            clientHash: "c",
            createdAt: at(second),
          });
        }
        await store().recordLoginFailure({ id: randomUUID(), organizationId: b, identifierHash: "h", clientHash: "c", createdAt: at(12) });
        const query = { identifierHash: "h", clientHash: "c", since: at(0), threshold: 10, identifierLimit: 10 };
        expect((await store().recentLoginFailures(a, query)).pair).toEqual([at(15), at(10), at(5)]);
        expect((await store().recentLoginFailures(a, { ...query, since: at(11) })).identifier).toEqual([at(15)]);
        await store().clearLoginFailures(b, "h");
        expect((await store().recentLoginFailures(a, query)).pair).toHaveLength(3);
        expect(await store().recentLoginFailures(b, query)).toEqual({ pair: [], identifier: [] });
      });
    });

    describe("sessions", () => {
      test("a session is found, and revoked, only through its own organisation", async () => {
        const a = await target.organization();
        const b = await target.organization();
        const ofA = await identity(a);
        const id = await session(a, ofA.id);
        expect(await store().findSession(b, id)).toBeNull();
        expect(await store().revokeSession(b, id, at(1))).toBe(false);
        expect((await store().findSession(a, id))?.revokedAt).toBeNull();
        expect(await store().revokeSession(a, id, at(2))).toBe(true);
        expect(await store().findSession(a, id)).toMatchObject({ id, identityId: ofA.id, method: "password", revokedAt: at(2) });
        // Revoking again still names an existing session; an unknown one does not exist.
        expect(await store().revokeSession(a, id, at(3))).toBe(true);
        expect((await store().findSession(a, id))?.revokedAt).toEqual(at(2));
        expect(await store().revokeSession(a, randomUUID(), at(3))).toBe(false);
      });

      test("revoking an identity's sessions spares the one kept, expired ones and other identities", async () => {
        const a = await target.organization();
        const ofA = await identity(a);
        const other = await identity(a);
        const kept = await session(a, ofA.id);
        const live = [await session(a, ofA.id), await session(a, ofA.id)];
        const expired = await session(a, ofA.id, at(0), at(5));
        const othersSession = await session(a, other.id);
        expect(await store().revokeSessionsOf(a, ofA.id, kept, at(10))).toBe(2);
        for (const id of live) expect((await store().findSession(a, id))?.revokedAt).toEqual(at(10));
        expect((await store().findSession(a, kept))?.revokedAt).toBeNull();
        expect((await store().findSession(a, expired))?.revokedAt).toBeNull();
        expect((await store().findSession(a, othersSession))?.revokedAt).toBeNull();
      });
    });

    describe("one-time tokens", () => {
      test("a token is spent once, only through its organisation and kind, and not once expired", async () => {
        const a = await target.organization();
        const b = await target.organization();
        const ofA = await identity(a);
        const hash = await token(a, ofA.id, "magic_link");
        expect(await store().spendOneTimeToken(b, hash, "magic_link", at(1))).toBe(false);
        expect(await store().spendOneTimeToken(a, hash, "password_reset", at(1))).toBe(false);
        expect(await store().spendOneTimeToken(a, hash, "magic_link", at(1))).toBe(true);
        expect(await store().spendOneTimeToken(a, hash, "magic_link", at(2))).toBe(false);
        expect((await store().findOneTimeToken(hash))?.spentAt).toEqual(at(1));
        const expiring = await token(a, ofA.id, "magic_link", at(60));
        expect(await store().spendOneTimeToken(a, expiring, "magic_link", at(60))).toBe(false);
        expect(await store().findOneTimeToken(`token-${randomUUID()}`)).toBeNull();
      });

      test("of concurrent spends of one token exactly one succeeds", async () => {
        const a = await target.organization();
        const hash = await token(a, (await identity(a)).id);
        const results = await Promise.all(Array.from({ length: 8 }, () => store().spendOneTimeToken(a, hash, "magic_link", at(1))));
        expect(results.filter(Boolean)).toHaveLength(1);
      });

      test("spending an identity's open tokens of one kind leaves other kinds, identities and spent tokens alone", async () => {
        const a = await target.organization();
        const ofA = await identity(a);
        const other = await identity(a);
        const open = [await token(a, ofA.id, "password_reset"), await token(a, ofA.id, "password_reset")];
        const magic = await token(a, ofA.id, "magic_link");
        const othersToken = await token(a, other.id, "password_reset");
        expect(await store().spendOneTimeTokensOf(a, ofA.id, "password_reset", at(5))).toBe(2);
        for (const hash of open) expect((await store().findOneTimeToken(hash))?.spentAt).toEqual(at(5));
        expect((await store().findOneTimeToken(magic))?.spentAt).toBeNull();
        expect((await store().findOneTimeToken(othersToken))?.spentAt).toBeNull();
      });
    });

    describe("rate counters", () => {
      test("hits of one window add up, also concurrently; another window starts again", async () => {
        const key = `ip:${randomUUID()}`;
        expect(await store().hitRateCounter(key, at(0))).toBe(1);
        const counts = await Promise.all(Array.from({ length: 9 }, () => store().hitRateCounter(key, at(0))));
        expect([...counts].sort((x, y) => x - y)).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10]);
        expect(await store().hitRateCounter(key, at(60))).toBe(1);
      });
    });
  });

  describe("session signing keys", () => {
    const store = () => createIdentityStore(target.db.client, target.db.sql);
    const key = (id: string, organizationId: string, createdAt: Date) => ({
      id,
      organizationId,
      privateKeyEnc: Buffer.from([1, 2, 3, 255]),
      masterKeyId: "mk1",
      publicJwk: JSON.stringify({ kid: id }),
      createdAt,
    });

    test("an organisation's live key is its own; rotation retires the others and publishes them until a date", async () => {
      const a = await target.organization("A");
      const b = await target.organization("B");
      const prefix = randomUUID().slice(0, 8);
      await store().createSessionSigningKey(key(`${prefix}-a1`, a, at(0)));
      await store().createSessionSigningKey(key(`${prefix}-b1`, b, at(0)));
      expect((await store().findLiveSessionSigningKey(a))?.id).toBe(`${prefix}-a1`);
      expect((await store().findLiveSessionSigningKey(a))?.privateKeyEnc).toEqual(Buffer.from([1, 2, 3, 255]));
      await store().createSessionSigningKey(key(`${prefix}-a2`, a, at(10)));
      const retired = await store().retireSessionSigningKeys(a, `${prefix}-a2`, at(10), at(100));
      expect(retired.map((r) => r.id)).toEqual([`${prefix}-a1`]);
      expect((await store().findLiveSessionSigningKey(a))?.id).toBe(`${prefix}-a2`);
      // B's key is untouched by A's rotation.
      expect((await store().findLiveSessionSigningKey(b))?.id).toBe(`${prefix}-b1`);
      const publishedOf = async (when: Date) => (await store().listPublishedSessionSigningKeys(when, a)).map((k) => k.id);
      expect(await publishedOf(at(50))).toEqual([`${prefix}-a2`, `${prefix}-a1`]);
      expect(await publishedOf(at(101))).toEqual([`${prefix}-a2`]);
      expect((await store().findSessionSigningKey(`${prefix}-a1`))?.organizationId).toBe(a);
      expect(await store().findSessionSigningKey(`${prefix}-none`)).toBeNull();
    });
  });
});
