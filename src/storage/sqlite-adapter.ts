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
  /** How long a statement waits for another process's write lock before failing (SQLITE_BUSY). */
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
 * - each connection keeps its prepared statements (statement-cache.ts).
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
      return new SqliteAdapter(writer, reader);
    },
  };
}

function openConnection(options: SqliteAdapterOptions, readonly: boolean): SqliteConnection {
  const db = new Sqlite(options.file, { readonly, timeout: options.busyTimeoutMs ?? 10_000 });
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

class SqliteAdapter implements SqlDriverAdapter {
  readonly provider = "sqlite";
  readonly adapterName = adapterName;
  readonly #gate: TransactionGate = createTransactionGate();

  constructor(
    private readonly writer: SqliteConnection,
    private readonly reader: SqliteConnection | null,
  ) {}

  // The async methods run synchronously up to their first await: the gate's
  // check and the statement are one step, with no gap for a BEGIN to slip into.

  async queryRaw(query: SqlQuery): Promise<SqlResultSet> {
    if (!this.#gate.held) return this.writer.query(query);
    if (this.reader && this.writer.readsOnly(query.sql)) return this.reader.query(query);
    return this.#gate.run(() => this.writer.query(query));
  }

  async executeRaw(query: SqlQuery): Promise<number> {
    if (!this.#gate.held) return this.writer.execute(query);
    return this.#gate.run(() => this.writer.execute(query));
  }

  async executeScript(script: string): Promise<void> {
    return this.#gate.run(() => this.writer.script(script));
  }

  async startTransaction(isolationLevel?: IsolationLevel): Promise<Transaction> {
    // SQLite transactions are serializable; nothing else can be offered.
    if (isolationLevel && isolationLevel !== "SERIALIZABLE") {
      throw new DriverAdapterError({ kind: "InvalidIsolationLevel", level: isolationLevel });
    }
    const end = await this.#gate.hold(() => this.writer.execute({ sql: "BEGIN", args: [], argTypes: [] }));
    return new SqliteTransaction(this.writer, end);
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
