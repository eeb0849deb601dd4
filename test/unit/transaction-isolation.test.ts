import type { Database, Tx } from "../../src/storage/database.js";
import { createTestDatabase, openTestDatabase, type TestDatabase } from "../support/database.js";

// Queries made outside a transaction stay out of it, on SQLite (one connection,
// see src/storage/sqlite-adapter.ts) as on PostgreSQL (a pool).

let testDb: TestDatabase;
let db: Database;

beforeAll(async () => {
  testDb = await createTestDatabase();
  db = await openTestDatabase(testDb);
});

afterAll(async () => {
  await db.close();
  await testDb.drop();
});

const epoch = new Date(0);
const insert = (key: string, client: Tx = db.client) =>
  client.$executeRaw`INSERT INTO "RateCounter" ("key", "windowStart", "count") VALUES (${key}, ${epoch}, 1)`;
const keys = async (prefix: string) =>
  (await db.client.rateCounter.findMany({ where: { key: { startsWith: prefix } }, orderBy: { key: "asc" } })).map((row) => row.key);

/** The answer, or a note that it did not come within 5 s (the timer never outlives the test). */
async function withinFiveSeconds<T>(answer: Promise<T>): Promise<T | string> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<string>((resolve) => {
    timer = setTimeout(() => resolve("still waiting after 5 s"), 5000);
  });
  try {
    return await Promise.race([answer, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Resolves when its release is called: holds a transaction open at a known point. */
function latch() {
  let release = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  return { released, release };
}

test("a write made outside a transaction survives that transaction's rollback", async () => {
  const hold = latch();
  const entered = latch();
  const failing = db
    .transaction(async (tx) => {
      await insert("a:inside", tx);
      entered.release();
      await hold.released;
      throw new Error("the transaction fails");
    })
    .catch((error: Error) => error.message);
  await entered.released;
  const outside = insert("a:outside");
  hold.release();
  expect(await outside).toBe(1);
  expect(await failing).toBe("the transaction fails");
  expect(await keys("a:")).toEqual(["a:outside"]);
});

test("a read outside a transaction never sees its uncommitted rows, and does not wait for it", async () => {
  const hold = latch();
  const entered = latch();
  const failing = db
    .transaction(async (tx) => {
      await insert("b:inside", tx);
      entered.release();
      await hold.released;
      throw new Error("the transaction fails");
    })
    .catch(() => undefined);
  await entered.released;
  // Answered while the transaction is still open (a second connection on SQLite), with committed rows only.
  expect(await withinFiveSeconds(keys("b:"))).toEqual([]);
  hold.release();
  await failing;
  expect(await keys("b:")).toEqual([]);
});

test("a read during a transaction sees what was committed before it", async () => {
  await insert("e:before");
  const hold = latch();
  const entered = latch();
  const committing = db.transaction(async (tx) => {
    await insert("e:inside", tx);
    entered.release();
    await hold.released;
  });
  await entered.released;
  expect(await withinFiveSeconds(keys("e:"))).toEqual(["e:before"]);
  hold.release();
  await committing;
  expect(await keys("e:")).toEqual(["e:before", "e:inside"]);
});

test("under a mix of failing transactions and outside writes, every outside write that returned is kept", async () => {
  const work: Promise<unknown>[] = [];
  for (let i = 0; i < 40; i++) {
    work.push(
      db
        .transaction(async (tx) => {
          await insert(`d:tx:${String(i).padStart(2, "0")}`, tx);
          await new Promise((resolve) => setTimeout(resolve, 2));
          if (i % 2 === 0) throw new Error("rolled back");
        })
        .catch(() => undefined),
    );
    // Spread over the time the transactions take, so that most land while one is open.
    work.push(new Promise((resolve) => setTimeout(resolve, 3 * i)).then(() => insert(`d:out:${String(i).padStart(2, "0")}`)));
  }
  await Promise.all(work);
  const kept = await keys("d:");
  expect(kept.filter((key) => key.startsWith("d:out:"))).toHaveLength(40);
  expect(kept.filter((key) => key.startsWith("d:tx:"))).toEqual(
    Array.from({ length: 20 }, (_, n) => `d:tx:${String(2 * n + 1).padStart(2, "0")}`),
  );
});
