import { randomUUID } from "node:crypto";
import { createDashboardStore, type OperatorPasskeyRecord } from "../../src/storage/dashboard-store.js";
import { createIdentityStore } from "../../src/storage/identity-store.js";
import { createSecretsStore } from "../../src/storage/secrets-store.js";
import { createSignInLinkStore } from "../../src/storage/sign-in-link-store.js";
import { createTenancyStore } from "../../src/storage/tenancy-store.js";
import { at, describeStorage, domainErrorOf } from "./storage-target.js";

describeStorage("dashboard store", (target) => {
  const store = () => createDashboardStore(target.db.client, target.provider);
  const tenancy = () => createTenancyStore(target.db.client);

  function operatorPasskey(accountId: string, overrides: Partial<OperatorPasskeyRecord> = {}): OperatorPasskeyRecord {
    return {
      id: randomUUID(),
      accountId,
      credentialId: `cred-${randomUUID()}`,
      publicKey: new Uint8Array([165, 1, 2, 3]),
      counter: 0,
      transports: ["internal"],
      deviceType: "multiDevice",
      backedUp: true,
      name: "Laptop",
      createdAt: at(0),
      lastUsedAt: null,
      ...overrides,
    };
  }

  describe("accounts", () => {
    test("an account is found by id and e-mail; unknown ones find nothing", async () => {
      const id = await target.account({ email: "find-me@example.com" });
      expect(await store().findAccount(id)).toMatchObject({
        id,
        email: "find-me@example.com",
        kind: "person",
        passwordHash: null,
        disabledAt: null,
      });
      expect((await store().findAccountByEmail("find-me@example.com"))?.id).toBe(id);
      expect(await store().findAccount(randomUUID())).toBeNull();
      expect(await store().findAccountByEmail("nobody@example.com")).toBeNull();
    });

    test("setting up an account with another account's e-mail is already_exists (email_taken)", async () => {
      await target.account({ email: "owner@example.com" });
      const other = await target.account();
      expect(await domainErrorOf(store().setUpAccount(other, { email: "owner@example.com", displayName: "X", passwordHash: "h" }))).toEqual(
        {
          kind: "already_exists",
          reason: "email_taken",
        },
      );
      await store().setUpAccount(other, { email: "other@example.com", displayName: "Other", passwordHash: "h" });
      expect(await store().findAccount(other)).toMatchObject({ email: "other@example.com", displayName: "Other", passwordHash: "h" });
    });

    test("a disabled account reopened has its new name and password and no passkeys; only once", async () => {
      const id = await target.account();
      await store().setPasswordHash(id, "h");
      await store().createOperatorPasskey(operatorPasskey(id));
      await store().disableAccount(id, at(1));
      await store().disableAccount(id, at(2));
      expect((await store().findAccount(id))?.disabledAt).toEqual(at(1));
      const change = { displayName: "Back Again", passwordHash: "h2" };
      const reopened = await Promise.all([store().reopenAccount(id, change), store().reopenAccount(id, change)]);
      expect(reopened.filter(Boolean)).toHaveLength(1);
      expect(await store().findAccount(id)).toMatchObject({ disabledAt: null, passwordHash: "h2" });
      expect(await store().countOperatorPasskeys(id)).toBe(0);
    });

    test("a password is set and removed", async () => {
      const id = await target.account();
      await store().setPasswordHash(id, "h");
      expect((await store().findAccount(id))?.passwordHash).toBe("h");
      await store().setPasswordHash(id, null);
      expect((await store().findAccount(id))?.passwordHash).toBeNull();
    });

    test("an account that is not disabled is not reopened", async () => {
      const id = await target.account();
      expect(await store().reopenAccount(id, { displayName: "x", passwordHash: "h" })).toBe(false);
    });
  });

  describe("setup tokens", () => {
    async function setupToken(accountId: string, expiresAt = at(600)) {
      const hash = `setup-${randomUUID()}`;
      await tenancy().createSetupToken({ id: randomUUID(), accountId, hash, expiresAt });
      return hash;
    }

    test("a setup token is spent once, and not once expired", async () => {
      const id = await target.account();
      const hash = await setupToken(id);
      expect(await store().findSetupToken(hash)).toMatchObject({ accountId: id, usedAt: null });
      expect(await store().spendSetupToken(hash, at(1))).toBe(true);
      expect(await store().spendSetupToken(hash, at(2))).toBe(false);
      expect(await store().spendSetupToken(await setupToken(id, at(60)), at(60))).toBe(false);
      expect(await store().findSetupToken(`setup-${randomUUID()}`)).toBeNull();
    });

    test("voiding spends every unused token of the account and no other account's", async () => {
      const id = await target.account();
      const other = await target.account();
      const mine = [await setupToken(id), await setupToken(id)];
      const theirs = await setupToken(other);
      await store().voidSetupTokensOf(id, at(5));
      for (const hash of mine) expect((await store().findSetupToken(hash))?.usedAt).toEqual(at(5));
      expect((await store().findSetupToken(theirs))?.usedAt).toBeNull();
    });
  });

  describe("sign-in links", () => {
    const links = () => createSignInLinkStore(target.db.client);
    async function link(accountId: string, expiresAt = at(900)) {
      const hash = `link-${randomUUID()}`;
      await links().createLink({ id: randomUUID(), accountId, hash, createdAt: at(0), expiresAt });
      return hash;
    }

    test("a link is spent once, for its account, and not once expired", async () => {
      const accountId = await target.account();
      const hash = await link(accountId);
      const spent = await Promise.all(Array.from({ length: 4 }, () => links().spendLink(hash, at(1))));
      expect(spent.filter((a) => a !== null)).toEqual([accountId]);
      expect(await links().findLink(hash)).toMatchObject({ accountId, usedAt: at(1) });
      expect(await links().spendLink(await link(accountId), at(900))).toBeNull();
    });

    test("voiding spends every unused, unexpired link of the account and no other account's", async () => {
      const accountId = await target.account();
      const other = await target.account();
      const used = await link(accountId);
      await links().spendLink(used, at(1));
      const unused = await link(accountId);
      const expired = await link(accountId, at(3));
      const theirs = await link(other);
      await links().voidLinksOf(accountId, at(5));
      expect((await links().findLink(used))?.usedAt).toEqual(at(1));
      expect((await links().findLink(unused))?.usedAt).toEqual(at(5));
      expect((await links().findLink(expired))?.usedAt).toBeNull();
      expect(await links().spendLink(unused, at(6))).toBeNull();
      expect((await links().findLink(theirs))?.usedAt).toBeNull();
    });
  });

  describe("dashboard sessions", () => {
    async function session(accountId: string, times: { createdAt?: Date; lastSeenAt?: Date; expiresAt?: Date } = {}) {
      const id = randomUUID();
      const hash = `session-${id}`;
      await store().createSession({
        id,
        accountId,
        hash,
        createdAt: times.createdAt ?? at(0),
        lastSeenAt: times.lastSeenAt ?? at(0),
        expiresAt: times.expiresAt ?? at(43_200),
      });
      return { id, hash };
    }

    test("a session is found by id and hash, touched and revoked; a revoked one is not touched", async () => {
      const accountId = await target.account();
      const { id, hash } = await session(accountId);
      expect(await store().findSessionByHash(hash)).toMatchObject({ id, accountId, revokedAt: null });
      await store().touchSession(id, at(10));
      expect((await store().findSession(id))?.lastSeenAt).toEqual(at(10));
      await store().revokeSession(id, at(20));
      await store().touchSession(id, at(30));
      expect(await store().findSession(id)).toMatchObject({ lastSeenAt: at(10), revokedAt: at(20) });
      expect(await store().findSessionByHash(`session-${randomUUID()}`)).toBeNull();
    });

    test("revoking an account's sessions leaves other accounts' sessions alone", async () => {
      const accountId = await target.account();
      const other = await target.account();
      const mine = await session(accountId);
      const theirs = await session(other);
      await store().revokeSessionsOf(accountId, at(5));
      expect((await store().findSession(mine.id))?.revokedAt).toEqual(at(5));
      expect((await store().findSession(theirs.id))?.revokedAt).toBeNull();
    });

    test("revoking an account's sessions but one keeps that one, and revoked ones keep their time", async () => {
      const accountId = await target.account();
      const kept = await session(accountId);
      const other = await session(accountId);
      const earlier = await session(accountId);
      await store().revokeSession(earlier.id, at(1));
      await store().revokeSessionsOf(accountId, at(5), kept.id);
      expect((await store().findSession(kept.id))?.revokedAt).toBeNull();
      expect((await store().findSession(other.id))?.revokedAt).toEqual(at(5));
      expect((await store().findSession(earlier.id))?.revokedAt).toEqual(at(1));
    });

    test("purging deletes ended sessions and expired challenges, and counts them", async () => {
      const accountId = await target.account();
      const live = await session(accountId, { lastSeenAt: at(1000), expiresAt: at(5000) });
      const expired = await session(accountId, { lastSeenAt: at(1000), expiresAt: at(1500) });
      const idle = await session(accountId, { lastSeenAt: at(100), expiresAt: at(5000) });
      await store().createChallenge({
        id: randomUUID(),
        kind: "sign_in",
        challenge: "c1",
        accountId: null,
        emailGiven: false,
        createdAt: at(0),
        expiresAt: at(300),
      });
      const keptChallenge = randomUUID();
      await store().createChallenge({
        id: keptChallenge,
        kind: "sign_in",
        challenge: "c2",
        accountId: null,
        emailGiven: false,
        createdAt: at(0),
        expiresAt: at(9000),
      });
      const purged = await store().purgeExpired(at(2000), at(200));
      expect(purged.sessions).toBeGreaterThanOrEqual(2);
      expect(purged.challenges).toBeGreaterThanOrEqual(1);
      expect(await store().findSession(live.id)).not.toBeNull();
      expect(await store().findSession(expired.id)).toBeNull();
      expect(await store().findSession(idle.id)).toBeNull();
      expect(await store().findChallenge(keptChallenge)).not.toBeNull();
    });
  });

  describe("operator passkeys and challenges", () => {
    test("a credential id is registered to one account (already_exists, passkey_exists)", async () => {
      const first = operatorPasskey(await target.account());
      await store().createOperatorPasskey(first);
      const again = operatorPasskey(await target.account(), { credentialId: first.credentialId });
      expect(await domainErrorOf(store().createOperatorPasskey(again))).toEqual({ kind: "already_exists", reason: "passkey_exists" });
      expect(await store().findOperatorPasskeyByCredentialId(first.credentialId)).toEqual(first);
    });

    test("an account's passkeys are listed oldest first; another account cannot remove them", async () => {
      const accountId = await target.account();
      const other = await target.account();
      const later = operatorPasskey(accountId, { createdAt: at(20) });
      const earlier = operatorPasskey(accountId, { createdAt: at(10) });
      await store().createOperatorPasskey(later);
      await store().createOperatorPasskey(earlier);
      await store().createOperatorPasskey(operatorPasskey(other));
      expect((await store().listOperatorPasskeys(accountId)).map((p) => p.id)).toEqual([earlier.id, later.id]);
      expect(await store().removeOperatorPasskey(other, earlier.id)).toBe(false);
      expect(await store().removeOperatorPasskey(accountId, earlier.id)).toBe(true);
      expect(await store().countOperatorPasskeys(accountId)).toBe(1);
      await store().removeOperatorPasskeysOf(accountId);
      expect(await store().countOperatorPasskeys(accountId)).toBe(0);
      expect(await store().countOperatorPasskeys(other)).toBe(1);
    });

    test("an account's add-passkey ceremonies are removed; its sign-in ones and other accounts' stay", async () => {
      const accountId = await target.account();
      const other = await target.account();
      const challenge = async (kind: "add_passkey" | "sign_in", owner: string) => {
        const id = randomUUID();
        await store().createChallenge({
          id,
          kind,
          challenge: "c",
          accountId: owner,
          emailGiven: false,
          createdAt: at(0),
          expiresAt: at(300),
        });
        return id;
      };
      const mine = await challenge("add_passkey", accountId);
      const mySignIn = await challenge("sign_in", accountId);
      const theirs = await challenge("add_passkey", other);
      await store().removeAddPasskeyChallengesOf(accountId);
      expect(await store().findChallenge(mine)).toBeNull();
      expect(await store().findChallenge(mySignIn)).not.toBeNull();
      expect(await store().findChallenge(theirs)).not.toBeNull();
    });

    test("a use is recorded only with a counter above the stored one, unless both are 0", async () => {
      const record = operatorPasskey(await target.account(), { counter: 3 });
      await store().createOperatorPasskey(record);
      const use = (counter: number) => ({ counter, backedUp: false, deviceType: "singleDevice", at: at(counter) });
      expect(await store().recordOperatorPasskeyUse(record.id, use(3))).toBe(false);
      expect(await store().recordOperatorPasskeyUse(record.id, use(4))).toBe(true);
      expect(await store().findOperatorPasskeyByCredentialId(record.credentialId)).toMatchObject({ counter: 4, lastUsedAt: at(4) });
    });

    test("a challenge is spent once, of its kind, by its account when one is named, before it expires", async () => {
      const accountId = await target.account();
      const id = randomUUID();
      await store().createChallenge({
        id,
        kind: "add_passkey",
        challenge: "c",
        accountId,
        emailGiven: true,
        createdAt: at(0),
        expiresAt: at(300),
      });
      expect(await store().spendChallenge(id, "sign_in", accountId, at(1))).toBeNull();
      expect(await store().spendChallenge(id, "add_passkey", await target.account(), at(1))).toBeNull();
      expect(await store().spendChallenge(id, "add_passkey", accountId, at(300))).toBeNull();
      const spent = await Promise.all(Array.from({ length: 5 }, () => store().spendChallenge(id, "add_passkey", accountId, at(2))));
      expect(spent.filter((c) => c !== null)).toEqual([
        { id, kind: "add_passkey", challenge: "c", accountId, emailGiven: true, createdAt: at(0), expiresAt: at(300), usedAt: at(2) },
      ]);
      expect(await store().spendChallenge(id, "add_passkey", null, at(3))).toBeNull();
    });
  });

  describe("organisations and members", () => {
    test("an account's organisations are listed by name, with its role in each", async () => {
      const zeta = await target.organization("Zeta");
      const alpha = await target.organization("Alpha");
      await target.organization("Not mine");
      const accountId = await target.account({ organizationId: zeta, role: "member" });
      await tenancy().addMembership({ organizationId: alpha, accountId, role: "admin" });
      expect(await store().listOrganizationsOf(accountId)).toEqual([
        { organizationId: alpha, name: "Alpha", role: "admin" },
        { organizationId: zeta, name: "Zeta", role: "member" },
      ]);
      expect(await store().countMembershipsOf(accountId)).toBe(2);
    });

    test("members are an organisation's enabled people, by e-mail, in keyset pages", async () => {
      const a = await target.organization();
      const b = await target.organization();
      for (const email of ["c@example.com", "a@example.com", "b@example.com"]) await target.account({ organizationId: a, email });
      await target.account({ organizationId: a, kind: "service", email: `svc-${randomUUID()}@example.com` });
      const disabled = await target.account({ organizationId: a, email: "0-disabled@example.com" });
      await store().disableAccount(disabled, at(1));
      await target.account({ organizationId: b, email: "0-other-org@example.com" });
      const first = await store().listMembers(a, { after: null, take: 2 });
      expect(first.map((m) => m.email)).toEqual(["a@example.com", "b@example.com"]);
      expect(first[0]).toMatchObject({ role: "member", pending: true });
      expect((await store().listMembers(a, { after: "b@example.com", take: 2 })).map((m) => m.email)).toEqual(["c@example.com"]);
      expect(await store().findMember(b, first[0]?.accountId ?? "")).toBeNull();
      expect(await store().findMember(a, disabled)).toBeNull();
    });

    test("admins are counted per organisation, roles changed and memberships removed only there", async () => {
      const a = await target.organization();
      const b = await target.organization();
      const admin = await target.account({ organizationId: a, role: "admin" });
      const member = await target.account({ organizationId: a, role: "member" });
      await tenancy().addMembership({ organizationId: b, accountId: member, role: "admin" });
      expect(await store().countAdmins(a)).toBe(1);
      await store().setRole(a, member, "admin");
      expect(await store().countAdmins(a)).toBe(2);
      await store().disableAccount(admin, at(1));
      expect(await store().countAdmins(a)).toBe(1);
      await store().removeMembership(b, member);
      expect(await tenancy().findRole(a, member)).toBe("admin");
      expect(await tenancy().findRole(b, member)).toBeNull();
    });

    test("an organisation and an account are locked only when they exist", async () => {
      const a = await target.organization();
      const accountId = await target.account();
      await target.db.transaction(async (tx) => {
        const locked = createDashboardStore(tx, target.provider);
        expect(await locked.lockOrganization(a)).toBe(true);
        expect(await locked.lockOrganization(randomUUID())).toBe(false);
        expect(await locked.lockAccount(accountId)).toBe(true);
        expect(await locked.lockAccount(randomUUID())).toBe(false);
      });
    });
  });

  describe("keys of an organisation", () => {
    test("API keys are the organisation's members' keys, oldest first (time, then id), in keyset pages", async () => {
      const a = await target.organization();
      const b = await target.organization();
      const member = await target.account({ organizationId: a, role: "admin" });
      const outsider = await target.account({ organizationId: b });
      const keys: { id: string; createdAt: Date }[] = [];
      for (const [id, second] of [
        ["k-2", 20],
        ["k-1", 10],
        ["k-3", 20],
        ["k-4", 30],
      ] as const) {
        await tenancy().createApiKey({ id: `${a}-${id}`, accountId: member, name: id, prefix: "gk_test", hash: `${a}-${id}` });
        await target.db.client.apiKey.update({ where: { id: `${a}-${id}` }, data: { createdAt: at(second) } });
        keys.push({ id: `${a}-${id}`, createdAt: at(second) });
      }
      await tenancy().createApiKey({
        id: `${a}-outsider`,
        accountId: outsider,
        name: "outsider",
        prefix: "gk_test",
        hash: `${a}-outsider`,
      });
      await tenancy().revokeApiKey(`${a}-k-4`, at(40));
      const page1 = await store().listApiKeys(a, { includeRevoked: false }, { after: null, take: 2 });
      expect(page1.map((k) => k.name)).toEqual(["k-1", "k-2"]);
      const last = page1[1];
      if (!last) throw new Error("two keys expected");
      const page2 = await store().listApiKeys(a, { includeRevoked: false }, { after: { at: last.createdAt, id: last.id }, take: 2 });
      expect(page2.map((k) => [k.name, k.role])).toEqual([["k-3", "admin"]]);
      expect((await store().listApiKeys(a, { includeRevoked: true }, { after: null, take: 10 })).map((k) => k.name)).toEqual([
        "k-1",
        "k-2",
        "k-3",
        "k-4",
      ]);
      expect(await store().isApiKeyOf(a, `${a}-k-1`)).toBe(true);
      expect(await store().isApiKeyOf(b, `${a}-k-1`)).toBe(false);
      expect(await store().isApiKeyOf(a, `${a}-outsider`)).toBe(false);
    });

    test("identity keys are the organisation's unrevoked publishable and secret keys", async () => {
      const a = await target.organization();
      const b = await target.organization();
      await tenancy().createOrganizationKey({
        id: randomUUID(),
        organizationId: a,
        kind: "publishable",
        prefix: "pk_old",
        hash: `pk-${randomUUID()}`,
      });
      await tenancy().revokeOrganizationKeys(a, "publishable", at(1));
      await tenancy().createOrganizationKey({
        id: randomUUID(),
        organizationId: a,
        kind: "publishable",
        prefix: "pk_new",
        hash: `pk-${randomUUID()}`,
      });
      await tenancy().createOrganizationKey({
        id: randomUUID(),
        organizationId: a,
        kind: "secret",
        prefix: "sk_a",
        hash: `sk-${randomUUID()}`,
      });
      await tenancy().createOrganizationKey({
        id: randomUUID(),
        organizationId: b,
        kind: "secret",
        prefix: "sk_b",
        hash: `sk-${randomUUID()}`,
      });
      expect((await store().listIdentityKeys(a)).map((k) => k.prefix).sort()).toEqual(["pk_new", "sk_a"]);
      expect((await store().listIdentityKeys(b)).map((k) => k.prefix)).toEqual(["sk_b"]);
    });
  });

  describe("identities and secrets as the dashboard lists them", () => {
    test("identity search is case-insensitive, literal about % and _, scoped, and pages in byte order", async () => {
      const a = await target.organization();
      const b = await target.organization();
      const identities = createIdentityStore(target.db.client);
      for (const identifier of [
        "Zed_100%@example.com",
        "zed-100@example.com",
        "ann@example.com",
        "zed_2@example.com",
        "ZED_3@example.com",
      ]) {
        await identities.createIdentity({ id: randomUUID(), organizationId: a, identifier, createdAt: at(0) });
      }
      await identities.createIdentity({ id: randomUUID(), organizationId: b, identifier: "zed_b@example.com", createdAt: at(0) });
      const search = (fragment: string, after: string | null = null, take = 10) =>
        store()
          .searchIdentities(a, fragment, { after, take })
          .then((rows) => rows.map((row) => row.identifier));
      expect(await search("zed_")).toEqual(["ZED_3@example.com", "Zed_100%@example.com", "zed_2@example.com"]);
      expect(await search("100%")).toEqual(["Zed_100%@example.com"]);
      expect(await search("zed_", null, 2)).toEqual(["ZED_3@example.com", "Zed_100%@example.com"]);
      expect(await search("zed_", "Zed_100%@example.com")).toEqual(["zed_2@example.com"]);
      expect(await search("nobody")).toEqual([]);
    });

    test("an identity's sessions are listed newest first, counted live, only through its organisation", async () => {
      const a = await target.organization();
      const b = await target.organization();
      const identityId = randomUUID();
      const identities = createIdentityStore(target.db.client);
      await identities.createIdentity({ id: identityId, organizationId: a, identifier: `s-${identityId}`, createdAt: at(0) });
      for (const [id, created, expires] of [
        ["s-old", 10, 100],
        ["s-new", 30, 5000],
        ["s-mid", 20, 5000],
      ] as const) {
        await identities.createSession({
          id: `${identityId}-${id}`,
          organizationId: a,
          identityId,
          method: "password",
          createdAt: at(created),
          expiresAt: at(expires),
        });
      }
      const page = await store().listIdentitySessions(a, identityId, { after: null, take: 2 });
      expect(page.map((s) => s.id)).toEqual([`${identityId}-s-new`, `${identityId}-s-mid`]);
      const last = page[1];
      if (!last) throw new Error("two sessions expected");
      expect(
        (await store().listIdentitySessions(a, identityId, { after: { at: last.createdAt, id: last.id }, take: 2 })).map((s) => s.id),
      ).toEqual([`${identityId}-s-old`]);
      expect(await store().countLiveSessions(a, identityId, at(200))).toBe(2);
      expect(await store().listIdentitySessions(b, identityId, { after: null, take: 10 })).toEqual([]);
      expect(await store().countLiveSessions(b, identityId, at(200))).toBe(0);
    });

    test("secret environments and names are listed sorted (names in byte order), per organisation, never with values", async () => {
      const a = await target.organization();
      const b = await target.organization();
      const secrets = createSecretsStore(target.db.client);
      for (const [environment, name] of [
        ["prod", "b_token"],
        ["prod", "B_TOKEN"],
        ["prod", "a_token"],
        ["dev", "x"],
      ] as const) {
        await secrets.createSecret({ id: randomUUID(), organizationId: a, environment, name, version: 1, tags: ["t"], updatedAt: at(1) });
      }
      await secrets.createSecret({
        id: randomUUID(),
        organizationId: b,
        environment: "qa",
        name: "other",
        version: 1,
        tags: [],
        updatedAt: at(1),
      });
      expect(await store().listSecretEnvironments(a)).toEqual(["dev", "prod"]);
      const page = await store().listSecrets(a, "prod", { after: null, take: 2 });
      expect(page).toEqual([
        { name: "B_TOKEN", environment: "prod", version: 1, tags: ["t"], updatedAt: at(1) },
        { name: "a_token", environment: "prod", version: 1, tags: ["t"], updatedAt: at(1) },
      ]);
      expect((await store().listSecrets(a, "prod", { after: "a_token", take: 2 })).map((s) => s.name)).toEqual(["b_token"]);
      expect(await store().listSecrets(b, "prod", { after: null, take: 10 })).toEqual([]);
    });
  });
});
