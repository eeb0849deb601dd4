import Database from "better-sqlite3";
import { cacheStatements, connectionOf } from "../../src/storage/statement-cache.js";

type AdapterView = {
  reader: boolean;
  run(): unknown;
  bind(args: unknown[]): { reader: boolean; run(): { changes: number }; columns(): { name: string }[]; raw(): { all(): unknown[][] } };
};

function open(limit?: number) {
  const db = new Database(":memory:");
  const prepared: string[] = [];
  const original = db.prepare.bind(db);
  db.prepare = ((sql: string) => {
    prepared.push(sql);
    return original(sql);
  }) as typeof db.prepare;
  cacheStatements(db, limit);
  const prepare = (sql: string) => (db as unknown as { prepare(sql: string): AdapterView }).prepare(sql);
  return { db, prepare, prepared };
}

describe("statement cache of the SQLite adapter", () => {
  test("one prepared statement serves every binding of the same SQL, each with its own arguments", () => {
    const { prepare, prepared } = open();
    prepare("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)").run();
    for (const [id, name] of [
      [1, "a"],
      [2, "b"],
      [3, "c"],
    ] as const) {
      expect(prepare("INSERT INTO t (id, name) VALUES (?, ?)").bind([id, name]).run().changes).toBe(1);
    }
    const select = "SELECT id, name FROM t WHERE id >= ? ORDER BY id";
    expect(prepare(select).bind([2]).raw().all()).toEqual([
      [2, "b"],
      [3, "c"],
    ]);
    expect(prepare(select).bind([3]).raw().all()).toEqual([[3, "c"]]);
    expect(
      prepare(select)
        .bind([1])
        .columns()
        .map((c) => c.name),
    ).toEqual(["id", "name"]);
    expect(prepared.filter((sql) => sql === select)).toHaveLength(1);
    expect(prepared.filter((sql) => sql.startsWith("INSERT"))).toHaveLength(1);
  });

  test("readers and writers keep their kind, and RETURNING reads", () => {
    const { prepare } = open();
    prepare("CREATE TABLE c (k TEXT PRIMARY KEY, n INTEGER NOT NULL)").run();
    const hit = "INSERT INTO c (k, n) VALUES (?, 1) ON CONFLICT (k) DO UPDATE SET n = n + 1 RETURNING n";
    expect(prepare(hit).reader).toBe(true);
    expect(prepare(hit).bind(["x"]).raw().all()).toEqual([[1]]);
    expect(prepare(hit).bind(["x"]).raw().all()).toEqual([[2]]);
    expect(prepare(hit).bind(["y"]).raw().all()).toEqual([[1]]);
    expect(prepare("DELETE FROM c WHERE k = ?").reader).toBe(false);
  });

  test("the least recently used statement leaves first when the cache is full", () => {
    const { prepare, prepared } = open(2);
    prepare("SELECT 1").bind([]).raw().all();
    prepare("SELECT 2").bind([]).raw().all();
    prepare("SELECT 1").bind([]).raw().all(); // 1 is now the most recent
    prepare("SELECT 3").bind([]).raw().all(); // evicts 2
    prepare("SELECT 1").bind([]).raw().all();
    prepare("SELECT 2").bind([]).raw().all();
    expect(prepared).toEqual(["SELECT 1", "SELECT 2", "SELECT 3", "SELECT 2"]);
  });

  test("errors of a statement reach the caller as before", () => {
    const { prepare } = open();
    prepare("CREATE TABLE u (k TEXT PRIMARY KEY)").run();
    prepare("INSERT INTO u (k) VALUES (?)").bind(["a"]).run();
    expect(() => prepare("INSERT INTO u (k) VALUES (?)").bind(["a"]).run()).toThrow(/UNIQUE/);
    expect(() => prepare("SELECT * FROM missing")).toThrow(/no such table/);
  });

  test("the connection is found only where the adapter keeps one", () => {
    const db = new Database(":memory:");
    expect(connectionOf({ client: db })).toBe(db);
    expect(connectionOf({})).toBeUndefined();
    expect(connectionOf({ client: { query() {} } })).toBeUndefined();
  });
});
