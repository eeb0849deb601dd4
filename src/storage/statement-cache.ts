import type { Database as Sqlite, Statement } from "better-sqlite3";

/** What the Prisma SQLite adapter calls on a prepared statement (and nothing more). */
interface AdapterStatement {
  readonly reader: boolean;
  /** The statement writes nothing (what sqlite-transactions.ts asks). */
  readonly readonly: boolean;
  bind(args: unknown[]): BoundStatement;
  run(): unknown;
}

interface BoundStatement {
  readonly reader: boolean;
  run(): unknown;
  columns(): ReturnType<Statement["columns"]>;
  raw(): { all(): unknown[] };
}

/**
 * Keeps the prepared statements of a better-sqlite3 connection by SQL text.
 *
 * Prisma's SQLite adapter prepares every query again (`prepare(sql).bind(args)`),
 * and SQLite's parser and planner were a tenth of the event loop's time on a
 * password login. A statement can be bound only once in better-sqlite3, so the
 * cache hands out views that pass each call's arguments to the kept statement
 * instead. The SQL the adapter sees is Prisma's compiled, parameterised text:
 * a few hundred distinct strings at most, kept least recently used first out.
 */
export function cacheStatements(db: Sqlite, limit = 512): void {
  const prepare = db.prepare.bind(db);
  const kept = new Map<string, Statement>();

  const statementFor = (sql: string): Statement => {
    let statement = kept.get(sql);
    if (statement) {
      // Most recently used last.
      kept.delete(sql);
    } else {
      statement = prepare(sql);
      if (kept.size >= limit) {
        const oldest = kept.keys().next().value;
        if (oldest !== undefined) kept.delete(oldest);
      }
    }
    kept.set(sql, statement);
    return statement;
  };

  const view = (statement: Statement): AdapterStatement => ({
    reader: statement.reader,
    readonly: statement.readonly,
    run: () => statement.run(),
    bind: (args) => ({
      reader: statement.reader,
      run: () => statement.run(args),
      columns: () => statement.columns(),
      raw: () => ({ all: () => statement.raw(true).all(args) }),
    }),
  });

  (db as unknown as { prepare(sql: string): AdapterStatement }).prepare = (sql) => view(statementFor(sql));
}

/** The better-sqlite3 connection inside a connected Prisma adapter, when it is where this version keeps it. */
export function connectionOf(adapter: unknown): Sqlite | undefined {
  const client = (adapter as { client?: unknown }).client;
  if (client && typeof (client as Sqlite).prepare === "function" && typeof (client as Sqlite).exec === "function") return client as Sqlite;
  return undefined;
}
