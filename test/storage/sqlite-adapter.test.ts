import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PrismaBetterSqlite3 } from "@prisma/adapter-better-sqlite3";
import Sqlite from "better-sqlite3";
import type { ArgType, SqlDriverAdapter, SqlQuery } from "@prisma/driver-adapter-utils";
import { createSqliteAdapterFactory } from "../../src/storage/sqlite-adapter.js";
import { createTransactionGate } from "../../src/storage/sqlite-transactions.js";

// The SQLite driver adapter on its own, below Prisma's client: what it shares
// with the stock @prisma/adapter-better-sqlite3, and the turn-taking that the
// stock one lacks. Runs on every run (SQLite needs only a file).

const type = (scalarType: ArgType["scalarType"]): ArgType => ({ scalarType, arity: "scalar" });
const q = (sql: string, args: unknown[] = [], argTypes: ArgType[] = args.map(() => type("unknown"))): SqlQuery => ({ sql, args, argTypes });

let dir: string;
let file: string;
const opened: SqlDriverAdapter[] = [];

async function connect(): Promise<SqlDriverAdapter> {
  const adapter = await createSqliteAdapterFactory({ file }).connect();
  opened.push(adapter);
  return adapter;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "gatehouse-adapter-"));
  file = join(dir, "adapter.db");
  const adapter = await connect();
  await adapter.executeScript(`
    CREATE TABLE "Thing" ("id" TEXT NOT NULL PRIMARY KEY, "n" INTEGER NOT NULL, "big" BIGINT, "flag" BOOLEAN NOT NULL,
      "at" DATETIME NOT NULL, "bytes" BLOB, "ratio" REAL, "note" TEXT);
    CREATE TABLE "Log" ("seq" INTEGER PRIMARY KEY AUTOINCREMENT, "what" TEXT NOT NULL);`);
});

afterAll(async () => {
  for (const adapter of opened) await adapter.dispose().catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
});

describe("values and errors, as the stock adapter converts them", () => {
  const insert = 'INSERT INTO "Thing" ("id", "n", "big", "flag", "at", "bytes", "ratio", "note") VALUES (?, ?, ?, ?, ?, ?, ?, ?)';
  const row = (id: string) =>
    q(
      insert,
      [id, "7", "9007199254740993", true, "2026-11-22T10:00:00.123Z", Buffer.from([0, 1, 254, 255]).toString("base64"), "0.25", null],
      [type("string"), type("int"), type("bigint"), type("boolean"), type("datetime"), type("bytes"), type("float"), type("string")],
    );
  const select = (id: string) =>
    q(
      'SELECT "id", "n", "big", "flag", "at", "bytes", "ratio", "note", "n" * 2 AS "twice", 1.5 AS "half", NULL AS "nothing" FROM "Thing" WHERE "id" = ?',
      [id],
    );

  test("rows written through either adapter read back the same through both", async () => {
    const ours = await connect();
    const stock = await new PrismaBetterSqlite3({ url: `file:${file}` }).connect();
    try {
      expect(await ours.executeRaw(row("ours"))).toBe(1);
      expect(await stock.executeRaw(row("stock"))).toBe(1);
      for (const id of ["ours", "stock"]) {
        const expected = await stock.queryRaw(select(id));
        expect(await ours.queryRaw(select(id))).toEqual(expected);
        expect(expected.rows[0]?.slice(1, 5)).toEqual([7, "9007199254740993", 1, "2026-11-22T10:00:00.123+00:00"]);
      }
      const update = q('UPDATE "Thing" SET "note" = ? WHERE "n" = ?', ["x", 7], [type("string"), type("int")]);
      expect(await ours.executeRaw(update)).toBe(2);
    } finally {
      await stock.dispose();
    }
  });

  test("driver errors map to the same kinds as the stock adapter's", async () => {
    const ours = await connect();
    const stock = await new PrismaBetterSqlite3({ url: `file:${file}` }).connect();
    const causeOf = (promise: Promise<unknown>) =>
      promise.then(
        () => "no error",
        (error: { name?: string; cause?: unknown }) => ({ name: error.name, cause: error.cause }),
      );
    try {
      await ours.executeRaw(row("dup"));
      for (const query of [
        row("dup"),
        q('SELECT * FROM "Missing"'),
        q('INSERT INTO "Thing" ("id") VALUES (?)', ["no-n"]),
        q("SELECT nope FROM Thing"),
      ]) {
        const mine = await causeOf(ours.queryRaw(query));
        expect(mine).toEqual(await causeOf(stock.queryRaw(query)));
        expect(mine).toMatchObject({ name: "DriverAdapterError" });
      }
      expect(await causeOf(ours.executeRaw(row("dup")))).toMatchObject({
        cause: { kind: "UniqueConstraintViolation", originalCode: "SQLITE_CONSTRAINT_PRIMARYKEY", constraint: { fields: ["id"] } },
      });
    } finally {
      await stock.dispose();
    }
  });
});

describe("transactions on the writer connection", () => {
  const log = (what: string) => q('INSERT INTO "Log" ("what") VALUES (?)', [what]);
  const logged = async (adapter: SqlDriverAdapter, prefix: string) =>
    (await adapter.queryRaw(q('SELECT "what" FROM "Log" WHERE "what" LIKE ? ORDER BY "seq"', [`${prefix}%`]))).rows.map((r) => r[0]);
  const settled = async (promise: Promise<unknown>) => {
    let done = false;
    promise.then(
      () => {
        done = true;
      },
      () => {
        done = true;
      },
    );
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    return done;
  };

  test("work waits for the open transaction and then runs in the order it came, transactions included", async () => {
    const adapter = await connect();
    const first = await adapter.startTransaction();
    await first.executeRaw(log("fifo:tx1"));
    const before = adapter.executeRaw(log("fifo:queued-before-tx2"));
    const second = adapter.startTransaction();
    const after = adapter.executeRaw(log("fifo:queued-after-tx2"));
    expect(await settled(before)).toBe(false);
    await first.executeRaw(q("COMMIT"));
    await first.commit();
    expect(await before).toBe(1);
    const tx2 = await second;
    expect(await settled(after)).toBe(false);
    await tx2.executeRaw(log("fifo:tx2"));
    await tx2.executeRaw(q("ROLLBACK"));
    await tx2.rollback();
    expect(await after).toBe(1);
    expect(await logged(adapter, "fifo:")).toEqual(["fifo:tx1", "fifo:queued-before-tx2", "fifo:queued-after-tx2"]);
  });

  test("a statement that writes nothing is answered at once with what is committed; one that writes and returns rows waits", async () => {
    const adapter = await connect();
    const tx = await adapter.startTransaction();
    await tx.executeRaw(log("reader:uncommitted"));
    expect(await adapter.queryRaw(q('SELECT COUNT(*) AS "n" FROM "Log" WHERE "what" = ?', ["reader:uncommitted"]))).toMatchObject({
      rows: [[0]],
    });
    const returning = adapter.queryRaw(q('INSERT INTO "Log" ("what") VALUES (?) RETURNING "what"', ["reader:returning"]));
    expect(await settled(returning)).toBe(false);
    await tx.executeRaw(q("COMMIT"));
    await tx.commit();
    expect((await returning).rows).toEqual([["reader:returning"]]);
    expect(await logged(adapter, "reader:")).toEqual(["reader:uncommitted", "reader:returning"]);
  });

  test("ending a transaction twice releases the connection once", async () => {
    const adapter = await connect();
    const tx = await adapter.startTransaction();
    await tx.executeRaw(q("ROLLBACK"));
    await tx.rollback();
    const next = await adapter.startTransaction();
    await tx.rollback();
    const waiting = adapter.executeRaw(log("twice:after"));
    expect(await settled(waiting)).toBe(false);
    await next.executeRaw(q("COMMIT"));
    await next.commit();
    expect(await waiting).toBe(1);
  });

  test("savepoints roll back part of a transaction", async () => {
    const adapter = await connect();
    const tx = await adapter.startTransaction();
    await tx.executeRaw(log("savepoint:kept"));
    await tx.createSavepoint?.("sp_1");
    await tx.executeRaw(log("savepoint:undone"));
    await tx.rollbackToSavepoint?.("sp_1");
    await tx.releaseSavepoint?.("sp_1");
    await tx.executeRaw(q("COMMIT"));
    await tx.commit();
    expect(await logged(adapter, "savepoint:")).toEqual(["savepoint:kept"]);
  });

  test("SQLite offers only serializable transactions", async () => {
    const adapter = await connect();
    await expect(adapter.startTransaction("READ COMMITTED")).rejects.toMatchObject({ cause: { kind: "InvalidIsolationLevel" } });
    const tx = await adapter.startTransaction("SERIALIZABLE");
    await tx.executeRaw(q("ROLLBACK"));
    await tx.rollback();
  });

  test("closing the connection refuses the work still waiting", async () => {
    const adapter = await createSqliteAdapterFactory({ file }).connect();
    await adapter.startTransaction();
    const waiting = adapter.executeRaw(log("closed:never"));
    await adapter.dispose();
    await expect(waiting).rejects.toThrow(/closed/);
    expect(await logged(await connect(), "closed:")).toEqual([]);
  });
});

describe("another process's write lock", () => {
  /** Another process's connection (SQLite cannot tell it from one): it takes the write lock and holds it. */
  function holdWriteLock(): { release(): void } {
    const other = new Sqlite(file, { timeout: 0 });
    other.exec("BEGIN IMMEDIATE");
    return {
      release() {
        other.exec("ROLLBACK");
        other.close();
      },
    };
  }

  test("a transaction waits for it without blocking the event loop, then runs", async () => {
    const adapter = await connect();
    const lock = holdWriteLock();
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 5);
    const started = adapter.startTransaction();
    await new Promise((resolve) => setTimeout(resolve, 200));
    lock.release();
    const tx = await started;
    clearInterval(ticker);
    // Timers kept firing while the transaction waited: nothing slept inside a call.
    expect(ticks).toBeGreaterThan(10);
    await tx.executeRaw(q('INSERT INTO "Log" ("what") VALUES (?)', ["lock:after-wait"]));
    await tx.executeRaw(q("COMMIT"));
    await tx.commit();
  });

  test("a transaction holds the write lock from BEGIN, so a write of another process between its read and its write cannot break it", async () => {
    const adapter = await connect();
    const tx = await adapter.startTransaction();
    await tx.queryRaw(q('SELECT COUNT(*) FROM "Log"'));
    const other = new Sqlite(file, { timeout: 0 });
    try {
      expect(() => other.exec(`INSERT INTO "Log" ("what") VALUES ('lock:other')`)).toThrow(
        expect.objectContaining({ code: "SQLITE_BUSY" }),
      );
    } finally {
      other.close();
    }
    await tx.executeRaw(q('INSERT INTO "Log" ("what") VALUES (?)', ["lock:mine"]));
    await tx.executeRaw(q("COMMIT"));
    await tx.commit();
  });

  test('past the wait it allows, a write fails with SQLITE_BUSY (Prisma\'s "Operation has timed out"), having changed nothing', async () => {
    const adapter = await createSqliteAdapterFactory({ file, busyTimeoutMs: 150 }).connect();
    opened.push(adapter);
    const lock = holdWriteLock();
    try {
      const started = Date.now();
      await expect(adapter.executeRaw(q('INSERT INTO "Log" ("what") VALUES (?)', ["lock:never"]))).rejects.toMatchObject({
        cause: { kind: "SocketTimeout", originalCode: expect.stringMatching(/^SQLITE_BUSY/) },
      });
      expect(Date.now() - started).toBeGreaterThanOrEqual(150);
      await expect(adapter.startTransaction()).rejects.toMatchObject({ cause: { kind: "SocketTimeout" } });
    } finally {
      lock.release();
    }
    const rows = await adapter.queryRaw(q('SELECT COUNT(*) FROM "Log" WHERE "what" = ?', ["lock:never"]));
    expect(rows.rows).toEqual([[0]]);
    // The connection is not left holding anything: the next transaction starts at once.
    const tx = await adapter.startTransaction();
    await tx.executeRaw(q("ROLLBACK"));
    await tx.rollback();
  });
});

describe("the gate alone", () => {
  test("a begin that fails holds nothing, and the work behind it runs", async () => {
    const gate = createTransactionGate();
    const order: string[] = [];
    const end = await gate.hold(() => order.push("begin 1"));
    const failing = gate.hold(() => {
      throw new Error("cannot begin");
    });
    const after = gate.run(() => order.push("after"));
    end();
    await expect(failing).rejects.toThrow("cannot begin");
    await after;
    expect(gate.held).toBe(false);
    expect(order).toEqual(["begin 1", "after"]);
  });
});
