import type { Database as Sqlite, Statement } from "better-sqlite3";

/** The prepared statements of one better-sqlite3 connection, by SQL text. */
export interface StatementCache {
  /** The statement of `sql`, prepared on first use; a SQL error throws as prepare() does. */
  get(sql: string): Statement<unknown[]>;
  /** How many statements are kept. */
  readonly size: number;
}

/**
 * Keeps a connection's prepared statements, least recently used first out.
 *
 * Preparing is SQLite's parser and planner, a tenth of the event loop's time
 * on a password login when every query was prepared anew. Statements are kept
 * whole (a better-sqlite3 statement takes fresh arguments on every run, all()
 * and get()); a statement that returns rows is set to give them as arrays, as
 * the adapter reads them. The SQL is Prisma's compiled, parameterised text and
 * ours: a few hundred distinct strings at most, so `limit` is rarely reached.
 */
export function createStatementCache(connection: Sqlite, limit = 512): StatementCache {
  const kept = new Map<string, Statement<unknown[]>>();
  return {
    get(sql) {
      let statement = kept.get(sql);
      if (statement) {
        // Most recently used last.
        kept.delete(sql);
      } else {
        statement = connection.prepare<unknown[]>(sql);
        if (statement.reader) statement.raw(true);
        if (kept.size >= limit) {
          const oldest = kept.keys().next().value;
          if (oldest !== undefined) kept.delete(oldest);
        }
      }
      kept.set(sql, statement);
      return statement;
    },
    get size() {
      return kept.size;
    },
  };
}
