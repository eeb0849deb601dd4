import { AsyncLocalStorage } from "node:async_hooks";
import type { SqlDriverAdapter, Transaction } from "@prisma/driver-adapter-utils";
import type { Database as Sqlite } from "better-sqlite3";

/**
 * Which transaction the current code runs for: set by `Database.transaction`
 * around its callback, so a query the callback makes through the outer client
 * is known to belong to it.
 */
export const transactionScope = new AsyncLocalStorage<object>();

interface OpenTransaction {
  scope: object | undefined;
  ended: Promise<void>;
  end(): void;
}

/**
 * Keeps queries outside a transaction out of it on a SQLite connection.
 *
 * Prisma's SQLite adapter has one connection. It serialises transactions with
 * a mutex, but a query made outside any transaction runs on that connection
 * at once, so while a transaction is open (its callback awaiting something)
 * the query lands inside it: it reads that transaction's uncommitted rows,
 * and its writes are undone if that transaction rolls back, although the
 * query returned success to a caller that has nothing to do with it (a
 * session row lost because an unrelated import failed). Here such a query
 * waits until the open transaction has ended. A query the transaction's own
 * callback makes through the outer client goes ahead (it is part of that
 * transaction, as it would wait for it forever otherwise).
 *
 * The transaction counts as open from the moment its BEGIN runs (seen on the
 * connection, synchronously: the adapter resolves its promise some microtasks
 * later, and a query slipped into that gap would join it) until the adapter
 * is told to commit or roll back.
 */
export function isolateTransactions(adapter: SqlDriverAdapter, connection: Sqlite): void {
  let open: OpenTransaction | null = null;

  const prepare = connection.prepare.bind(connection);
  connection.prepare = ((sql: string) => {
    const statement = prepare(sql);
    if (sql !== "BEGIN") return statement;
    const run = statement.run.bind(statement);
    statement.run = ((...args: unknown[]) => {
      const result = run(...(args as []));
      // The adapter runs BEGIN in the async context of the caller that starts the transaction.
      let end = () => {};
      const ended = new Promise<void>((resolve) => (end = resolve));
      open = { scope: transactionScope.getStore(), ended, end };
      return result;
    }) as typeof statement.run;
    return statement;
  }) as typeof connection.prepare;

  const startTransaction = adapter.startTransaction.bind(adapter);
  adapter.startTransaction = async (isolationLevel) => {
    const transaction: Transaction = await startTransaction(isolationLevel);
    const state = open;
    const finish = () => {
      if (!state) return;
      if (open === state) open = null;
      state.end();
    };
    const commit = transaction.commit.bind(transaction);
    const rollback = transaction.rollback.bind(transaction);
    transaction.commit = () => commit().finally(finish);
    transaction.rollback = () => rollback().finally(finish);
    return transaction;
  };

  /** Until no other transaction is open; one that ends may be followed by the next at once, so look again. */
  async function outside<T>(run: () => Promise<T>): Promise<T> {
    for (let state = open; state && (state.scope === undefined || transactionScope.getStore() !== state.scope); state = open) {
      await state.ended;
    }
    return run();
  }

  // The adapter runs the SQL synchronously inside these calls, so the check and the statement cannot be split.
  const queryRaw = adapter.queryRaw.bind(adapter);
  const executeRaw = adapter.executeRaw.bind(adapter);
  adapter.queryRaw = (query) => (open ? outside(() => queryRaw(query)) : queryRaw(query));
  adapter.executeRaw = (query) => (open ? outside(() => executeRaw(query)) : executeRaw(query));
}
