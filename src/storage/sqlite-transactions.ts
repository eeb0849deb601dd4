import type { SqlDriverAdapter, Transaction } from "@prisma/driver-adapter-utils";
import type { Database as Sqlite } from "better-sqlite3";

interface OpenTransaction {
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
 * session row lost because an unrelated import failed). Here a write waits
 * until the open transaction has ended, and a statement that writes nothing
 * goes to `reader`, a second connection to the same file, which sees what is
 * committed (WAL lets readers run beside the writer), so a long import does
 * not hold up every read of the process.
 *
 * So code inside a transaction queries through the transaction's client only
 * (the stores take it as their argument): a query through the outer client
 * would wait for the transaction it is part of, until that times out. Telling
 * the two apart by async context would put a hook on every promise of the
 * process (AsyncLocalStorage in Node 20), a few per cent of a cheap request.
 *
 * The transaction counts as open from the moment its BEGIN runs (seen on the
 * connection, synchronously: the adapter resolves its promise some microtasks
 * later, and a query slipped into that gap would join it) until the adapter
 * is told to commit or roll back.
 */
export function isolateTransactions(adapter: SqlDriverAdapter, connection: Sqlite, reader: SqlDriverAdapter): void {
  let open: OpenTransaction | null = null;

  const prepare = connection.prepare.bind(connection);
  connection.prepare = ((sql: string) => {
    const statement = prepare(sql);
    if (sql !== "BEGIN") return statement;
    const run = statement.run.bind(statement);
    statement.run = ((...args: unknown[]) => {
      const result = run(...(args as []));
      let end = () => {};
      const ended = new Promise<void>((resolve) => (end = resolve));
      open = { ended, end };
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
    for (let state = open; state; state = open) await state.ended;
    return run();
  }

  // Whether SQL writes nothing, as SQLite's compiler says (the statement is kept by statement-cache.ts).
  const readsOnly = (sql: string) => (connection.prepare(sql) as unknown as { readonly: boolean }).readonly;

  // The adapter runs the SQL synchronously inside these calls, so the check and the statement cannot be split.
  const queryRaw = adapter.queryRaw.bind(adapter);
  const executeRaw = adapter.executeRaw.bind(adapter);
  adapter.queryRaw = (query) => {
    if (!open) return queryRaw(query);
    return readsOnly(query.sql) ? reader.queryRaw(query) : outside(() => queryRaw(query));
  };
  adapter.executeRaw = (query) => (open ? outside(() => executeRaw(query)) : executeRaw(query));

  const dispose = adapter.dispose.bind(adapter);
  adapter.dispose = () => Promise.all([reader.dispose(), dispose()]).then(() => undefined);
}
