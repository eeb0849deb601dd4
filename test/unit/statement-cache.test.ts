import Database from "better-sqlite3";
import { createStatementCache } from "../../src/storage/statement-cache.js";

function open(limit?: number) {
  const db = new Database(":memory:");
  return { db, cache: createStatementCache(db, limit) };
}

describe("statement cache of a SQLite connection", () => {
  test("one prepared statement serves every run of the same SQL, each with its own arguments", () => {
    const { cache } = open();
    cache.get("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)").run();
    const insert = "INSERT INTO t (id, name) VALUES (?, ?)";
    for (const [id, name] of [
      [1, "a"],
      [2, "b"],
      [3, "c"],
    ] as const) {
      expect(cache.get(insert).run([id, name]).changes).toBe(1);
    }
    const select = "SELECT id, name FROM t WHERE id >= ? ORDER BY id";
    const statement = cache.get(select);
    expect(cache.get(select)).toBe(statement);
    expect(statement.all([2])).toEqual([
      [2, "b"],
      [3, "c"],
    ]);
    expect(cache.get(select).all([3])).toEqual([[3, "c"]]);
    expect(statement.columns().map((c) => c.name)).toEqual(["id", "name"]);
    expect(cache.get(insert)).toBe(cache.get(insert));
    expect(cache.size).toBe(3);
  });

  test("statements that return rows give them as arrays, RETURNING included; writers keep their kind", () => {
    const { cache } = open();
    cache.get("CREATE TABLE c (k TEXT PRIMARY KEY, n INTEGER NOT NULL)").run();
    const hit = "INSERT INTO c (k, n) VALUES (?, 1) ON CONFLICT (k) DO UPDATE SET n = n + 1 RETURNING n";
    expect(cache.get(hit).reader).toBe(true);
    expect(cache.get(hit).readonly).toBe(false);
    expect(cache.get(hit).all(["x"])).toEqual([[1]]);
    expect(cache.get(hit).all(["x"])).toEqual([[2]]);
    expect(cache.get(hit).all(["y"])).toEqual([[1]]);
    expect(cache.get("DELETE FROM c WHERE k = ?").reader).toBe(false);
    expect(cache.get("SELECT n FROM c WHERE k = ?").readonly).toBe(true);
  });

  test("the least recently used statement leaves first when the cache is full", () => {
    const { cache } = open(2);
    const one = cache.get("SELECT 1");
    const two = cache.get("SELECT 2");
    expect(cache.get("SELECT 1")).toBe(one); // 1 is now the most recent
    cache.get("SELECT 3"); // evicts 2
    expect(cache.size).toBe(2);
    expect(cache.get("SELECT 1")).toBe(one);
    expect(cache.get("SELECT 2")).not.toBe(two);
    expect(cache.get("SELECT 2").all()).toEqual([[2]]);
  });

  test("errors of a statement reach the caller as before, and a SQL error keeps nothing", () => {
    const { cache } = open();
    cache.get("CREATE TABLE u (k TEXT PRIMARY KEY)").run();
    cache.get("INSERT INTO u (k) VALUES (?)").run(["a"]);
    expect(() => cache.get("INSERT INTO u (k) VALUES (?)").run(["a"])).toThrow(/UNIQUE/);
    expect(() => cache.get("SELECT * FROM missing")).toThrow(/no such table/);
    expect(cache.size).toBe(2);
  });

  test("the connection's own prepare is left as it is", () => {
    const { db, cache } = open();
    const prepare = db.prepare;
    cache.get("SELECT 1");
    expect(db.prepare).toBe(prepare);
    expect(Object.hasOwn(db, "prepare")).toBe(false);
    expect(db.prepare("SELECT 1")).not.toBe(cache.get("SELECT 1"));
  });
});
