import { randomUUID } from "node:crypto";
import { createIdentityStore } from "../../src/storage/identity-store.js";
import { createTenancyStore } from "../../src/storage/tenancy-store.js";
import { at, describeStorage, latch, withinFiveSeconds } from "./storage-target.js";

// What callers may rely on about transactions, through the stores as the
// application uses them: outside a transaction, the client and the plain-SQL
// door; inside, the transaction's client. On SQLite it is the adapter's
// transaction gate and reader connection that make this true (sqlite-adapter.ts).

describeStorage("transaction isolation", (target) => {
  const outside = () => createIdentityStore(target.db.client, target.db.sql);

  async function identity(organizationId: string) {
    const id = randomUUID();
    await outside().createIdentity({ id, organizationId, identifier: `${id}@example.com`, createdAt: at(0) });
    return id;
  }

  // A test that fails while holding a transaction open lets it go, so the next test does not wait for it.
  const holds: (() => void)[] = [];
  afterEach(() => {
    for (const release of holds.splice(0)) release();
  });

  /** A transaction that creates a session, signals, waits for `hold`, then fails or commits. */
  function openTransaction(organizationId: string, identityId: string, outcome: "rollback" | "commit") {
    const entered = latch();
    const hold = latch();
    const sessionId = randomUUID();
    holds.push(hold.release);
    const done = target.db
      .transaction(async (tx) => {
        await createIdentityStore(tx).createSession({
          id: sessionId,
          organizationId,
          identityId,
          method: "password",
          createdAt: at(0),
          expiresAt: at(60),
        });
        entered.release();
        await hold.released;
        if (outcome === "rollback") throw new Error("the transaction fails");
      })
      .then(
        () => "committed",
        (error: Error) => error.message,
      );
    return { entered: entered.released, release: hold.release, done, sessionId };
  }

  test("a write outside a transaction does not join an open one, and survives its rollback", async () => {
    const a = await target.organization();
    const identityId = await identity(a);
    const tx = openTransaction(a, identityId, "rollback");
    await tx.entered;
    const outsideSession = randomUUID();
    const written = outside().createSession({
      id: outsideSession,
      organizationId: a,
      identityId,
      method: "passkey",
      createdAt: at(1),
      expiresAt: at(60),
    });
    // Through the Prisma client as well as the plain-SQL door.
    const organizationId = randomUUID();
    const created = createTenancyStore(target.db.client).createOrganization({ id: organizationId, name: "Outside" });
    tx.release();
    await Promise.all([written, created]);
    expect(await tx.done).toBe("the transaction fails");
    expect(await outside().findSession(a, tx.sessionId)).toBeNull();
    expect((await outside().findSession(a, outsideSession))?.method).toBe("passkey");
    expect((await createTenancyStore(target.db.client).findOrganization(organizationId))?.name).toBe("Outside");
  });

  test("reads outside an open transaction see only committed rows, and are answered while it is open", async () => {
    const a = await target.organization();
    const identityId = await identity(a);
    const committedBefore = randomUUID();
    await outside().createSession({
      id: committedBefore,
      organizationId: a,
      identityId,
      method: "password",
      createdAt: at(0),
      expiresAt: at(60),
    });
    const tx = openTransaction(a, identityId, "commit");
    await tx.entered;
    // Plain SQL, a typed Prisma query and a raw Prisma query, all while the transaction holds its rows.
    expect(await withinFiveSeconds(outside().findSession(a, tx.sessionId))).toBeNull();
    expect((await withinFiveSeconds(outside().findSession(a, committedBefore))) as object).toMatchObject({ id: committedBefore });
    expect(await withinFiveSeconds(target.db.client.identitySession.count({ where: { identityId } }))).toBe(1);
    expect(await withinFiveSeconds(createTenancyStore(target.db.client).findOrganization(a))).toMatchObject({ id: a });
    tx.release();
    expect(await tx.done).toBe("committed");
    expect((await outside().findSession(a, tx.sessionId))?.id).toBe(tx.sessionId);
    expect(await target.db.client.identitySession.count({ where: { identityId } })).toBe(2);
  });

  test("a long transaction does not hold up reads, and writes made meanwhile all count once it ends", async () => {
    const a = await target.organization();
    const identityId = await identity(a);
    const tx = openTransaction(a, identityId, "commit");
    await tx.entered;
    const reads = await withinFiveSeconds(Promise.all(Array.from({ length: 20 }, () => outside().findIdentity(a, identityId))));
    expect(Array.isArray(reads) && reads.every((row) => row?.id === identityId)).toBe(true);
    const key = `isolation:${randomUUID()}`;
    const hits = Promise.all([
      outside().hitRateCounter(key, at(0)),
      outside().hitRateCounter(key, at(0)),
      outside().hitRateCounter(key, at(0)),
    ]);
    tx.release();
    expect((await hits).sort()).toEqual([1, 2, 3]);
    expect(await tx.done).toBe("committed");
  });

  test("under a mix of failing transactions and outside writes, every outside write that returned is kept", async () => {
    const a = await target.organization();
    const identityId = await identity(a);
    const work: Promise<unknown>[] = [];
    for (let i = 0; i < 30; i++) {
      work.push(
        target.db
          .transaction(async (tx) => {
            await createIdentityStore(tx).recordLoginFailure({
              id: `tx-${i}-${a}`,
              organizationId: a,
              identifierHash: "mix",
              clientHash: "client",
              createdAt: at(i),
            });
            await new Promise((resolve) => setTimeout(resolve, 2));
            if (i % 2 === 0) throw new Error("rolled back");
          })
          .catch(() => undefined),
      );
      // Spread over the time the transactions take, so that most land while one is open.
      work.push(
        new Promise((resolve) => setTimeout(resolve, 3 * i)).then(() =>
          outside().createSession({
            id: `out-${i}-${a}`,
            organizationId: a,
            identityId,
            method: "password",
            createdAt: at(i),
            expiresAt: at(60),
          }),
        ),
      );
    }
    await Promise.all(work);
    expect(await target.db.client.identitySession.count({ where: { organizationId: a } })).toBe(30);
    expect(
      (
        await outside().recentLoginFailures(a, {
          identifierHash: "mix",
          clientHash: "client",
          since: at(0),
          threshold: 100,
          identifierLimit: 100,
        })
      ).pair
        .map((d) => d.getTime() / 1000 - at(0).getTime() / 1000)
        .sort((x, y) => x - y),
    ).toEqual(Array.from({ length: 15 }, (_, n) => 2 * n + 1));
  });
});
