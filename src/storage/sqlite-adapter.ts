import type {
  IsolationLevel,
  SqlDriverAdapter,
  SqlDriverAdapterFactory,
  SqlQuery,
  SqlResultSet,
  Transaction,
  TransactionOptions,
} from "@prisma/driver-adapter-utils";
import { DriverAdapterError } from "@prisma/driver-adapter-utils";
import Sqlite from "better-sqlite3";
import { columnTypesOf, driverArgs, engineRow, toDriverAdapterError } from "./sqlite-conversion.js";
import { createStatementCache, type StatementCache } from "./statement-cache.js";
import { createTransactionGate, type TransactionGate } from "./sqlite-transactions.js";

export interface SqliteAdapterOptions {
  /** The database file; ":memory:" gives a private in-memory database (and no reader connection). */
  file: string;
  /**
   * How long a write waits for another process's write lock before failing
   * (SQLITE_BUSY, which Prisma reports as "Operation has timed out"): the
   * writer retries, without blocking the event loop, until then.
   */
  busyTimeoutMs?: number;
  /** Prepared statements kept per connection (statement-cache.ts). */
  statementCacheSize?: number;
}

const adapterName = "gatehouse-better-sqlite3";

/**
 * Prisma's driver adapter for SQLite over better-sqlite3, built on the public
 * interfaces of @prisma/driver-adapter-utils (SqlDriverAdapterFactory,
 * SqlDriverAdapter, Transaction), for what the stock
 * @prisma/adapter-better-sqlite3 cannot be told to do:
 *
 * - a query outside a transaction never runs inside an open one: writes wait
 *   until it has ended (sqlite-transactions.ts), and a statement that writes
 *   nothing is answered by a second, read-only connection, which sees what is
 *   committed (WAL lets it read beside the writer), so a long import does not
 *   hold up every read of the process;
 * - each connection keeps its prepared statements (statement-cache.ts);
 * - another process's write lock (a running server beside an operator
 *   command, two servers on one file) is waited for without blocking the
 *   event loop, and without the deadlock of a deferred transaction (below).
 *
 * Values and errors convert as the stock adapter converts them
 * (sqlite-conversion.ts), so the two read each other's rows.
 *
 * Code inside a transaction must query through the transaction's client only
 * (the stores take it as their argument): a query through the outer client
 * waits for the transaction it is part of, until that times out. Telling the
 * two apart by async context would put a hook on every promise of the process
 * (AsyncLocalStorage in Node 20), a few per cent of a cheap request.
 */
export function createSqliteAdapterFactory(options: SqliteAdapterOptions): SqlDriverAdapterFactory {
  return {
    provider: "sqlite",
    adapterName,
    async connect() {
      const writer = openConnection(options, false);
      // The reader opens after the writer has put the file in WAL mode; an in-memory database cannot be shared.
      const reader = options.file === ":memory:" ? null : openConnection(options, true);
      return new SqliteAdapter(writer, reader, options.busyTimeoutMs ?? 10_000);
    },
  };
}

function openConnection(options: SqliteAdapterOptions, readonly: boolean): SqliteConnection {
  // The writer's waits for the write lock are the adapter's (lockWaiting below): SQLite's own busy handler
  // sleeps inside the call, which would hold up every request of the process. The reader keeps it: a WAL
  // reader is refused only in the rare moments another connection rebuilds the WAL index.
  const db = new Sqlite(options.file, { readonly, timeout: readonly ? (options.busyTimeoutMs ?? 10_000) : 0 });
  try {
    // 64-bit integers come back exact (as bigint); the engine gets them as numbers when they fit (engineRow).
    db.defaultSafeIntegers(true);
    // Readers beside the writer need the write-ahead log (persistent: a no-op on a file already in WAL mode).
    if (!readonly && options.file !== ":memory:") db.pragma("journal_mode = WAL");
  } catch (error) {
    db.close();
    throw error;
  }
  return new SqliteConnection(db, createStatementCache(db, options.statementCacheSize));
}

/** One better-sqlite3 connection and its prepared statements; every call runs synchronously. */
class SqliteConnection {
  constructor(
    readonly db: Sqlite.Database,
    readonly statements: StatementCache,
  ) {}

  query(query: SqlQuery): SqlResultSet {
    try {
      const statement = this.statements.get(query.sql);
      const args = driverArgs(query);
      if (!statement.reader) {
        statement.run(args);
        return { columnNames: [], columnTypes: [], rows: [] };
      }
      const columns = statement.columns();
      const rows = statement.all(args) as unknown[][];
      const columnTypes = columnTypesOf(
        columns.map((column) => column.type),
        rows,
      );
      return { columnNames: columns.map((column) => column.name), columnTypes, rows: rows.map((row) => engineRow(row, columnTypes)) };
    } catch (error) {
      toDriverAdapterError(error);
    }
  }

  execute(query: SqlQuery): number {
    try {
      return this.statements.get(query.sql).run(driverArgs(query)).changes;
    } catch (error) {
      toDriverAdapterError(error);
    }
  }

  script(script: string): void {
    try {
      this.db.exec(script);
    } catch (error) {
      toDriverAdapterError(error);
    }
  }

  /**
   * Whether the statement only reads: it returns rows and changes nothing, as
   * SQLite's compiler says (sqlite3_stmt_readonly). Transaction control (BEGIN,
   * SAVEPOINT) counts as read-only there but returns no rows, so it stays on
   * the writer.
   */
  readsOnly(sql: string): boolean {
    try {
      const statement = this.statements.get(sql);
      return statement.readonly && statement.reader;
    } catch (error) {
      toDriverAdapterError(error);
    }
  }
}

/** Whether a driver error says another connection holds the lock (SQLITE_BUSY and its extended codes). */
function isBusy(error: unknown): boolean {
  return error instanceof DriverAdapterError && (error.cause as { kind?: unknown }).kind === "SocketTimeout";
}

class SqliteAdapter implements SqlDriverAdapter {
  readonly provider = "sqlite";
  readonly adapterName = adapterName;
  readonly #gate: TransactionGate = createTransactionGate();

  constructor(
    private readonly writer: SqliteConnection,
    private readonly reader: SqliteConnection | null,
    private readonly lockWaitMs: number,
  ) {}

  // The async methods run synchronously up to their first await: the gate's
  // check and the statement are one step, with no gap for a BEGIN to slip into.

  async queryRaw(query: SqlQuery): Promise<SqlResultSet> {
    return this.#lockWaiting(() => {
      if (!this.#gate.held) return this.writer.query(query);
      if (this.reader && this.writer.readsOnly(query.sql)) return this.reader.query(query);
      return this.#gate.run(() => this.writer.query(query));
    });
  }

  async executeRaw(query: SqlQuery): Promise<number> {
    return this.#lockWaiting(() => {
      if (!this.#gate.held) return this.writer.execute(query);
      return this.#gate.run(() => this.writer.execute(query));
    });
  }

  async executeScript(script: string): Promise<void> {
    return this.#lockWaiting(() => this.#gate.run(() => this.writer.script(script)));
  }

  async startTransaction(isolationLevel?: IsolationLevel): Promise<Transaction> {
    // SQLite transactions are serializable; nothing else can be offered.
    if (isolationLevel && isolationLevel !== "SERIALIZABLE") {
      throw new DriverAdapterError({ kind: "InvalidIsolationLevel", level: isolationLevel });
    }
    // IMMEDIATE takes the write lock at BEGIN. A deferred transaction that read and then writes while
    // another process committed in between fails at once with SQLITE_BUSY, and waiting cannot help it:
    // "If a write transaction is started ... after a read ... the busy handler is not invoked"
    // (https://www.sqlite.org/lang_transaction.html, https://www.sqlite.org/c3ref/busy_handler.html).
    // In this process the gate already lets one transaction at a time hold the writer, so taking
    // the lock early costs nothing here.
    const end = await this.#lockWaiting(() =>
      this.#gate.hold(() => this.writer.execute({ sql: "BEGIN IMMEDIATE", args: [], argTypes: [] })),
    );
    return new SqliteTransaction(this.writer, end);
  }

  /**
   * Runs work (synchronously up to its first await, as the callers need), and
   * again after a pause while another process holds the write lock, until
   * lockWaitMs have passed; then the SQLITE_BUSY error stands. A statement
   * refused with SQLITE_BUSY did nothing, so running it again is safe. The
   * pauses grow from 1 to 4 ms: other processes' transactions are short, and a
   * process that lets the lock go for a moment (a master-key rotation between
   * its batches) must find the waiting write ready to take it.
   */
  async #lockWaiting<T>(work: () => T | Promise<T>): Promise<T> {
    const deadline = Date.now() + this.lockWaitMs;
    for (let pause = 1; ; pause = Math.min(pause * 2, 4)) {
      try {
        return await work();
      } catch (error) {
        if (!isBusy(error) || Date.now() >= deadline) throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, pause * (0.5 + Math.random())));
    }
  }

  async dispose(): Promise<void> {
    this.#gate.close(new Error("the database connection is closed"));
    this.reader?.db.close();
    this.writer.db.close();
  }
}

/**
 * A transaction on the writer connection. The query engine sends COMMIT and
 * ROLLBACK itself through executeRaw (usePhantomQuery false); commit() and
 * rollback() only tell the adapter that the transaction is over.
 */
class SqliteTransaction implements Transaction {
  readonly provider = "sqlite";
  readonly adapterName = adapterName;
  readonly options: TransactionOptions = { usePhantomQuery: false };

  constructor(
    private readonly connection: SqliteConnection,
    private readonly end: () => void,
  ) {}

  async queryRaw(query: SqlQuery): Promise<SqlResultSet> {
    return this.connection.query(query);
  }

  async executeRaw(query: SqlQuery): Promise<number> {
    return this.connection.execute(query);
  }

  async commit(): Promise<void> {
    this.end();
  }

  async rollback(): Promise<void> {
    this.end();
  }

  async createSavepoint(name: string): Promise<void> {
    this.connection.execute({ sql: `SAVEPOINT ${name}`, args: [], argTypes: [] });
  }

  async rollbackToSavepoint(name: string): Promise<void> {
    this.connection.execute({ sql: `ROLLBACK TO ${name}`, args: [], argTypes: [] });
  }

  async releaseSavepoint(name: string): Promise<void> {
    this.connection.execute({ sql: `RELEASE SAVEPOINT ${name}`, args: [], argTypes: [] });
  }
}
