import { setFlagsFromString } from "node:v8";
import type { SqlDriverAdapter, SqlDriverAdapterFactory } from "@prisma/driver-adapter-utils";
import type { DatabaseConfig } from "../config.js";
import type { PrismaClient } from "./generated/sqlite/client.js";
import { applyMigrations } from "./migrate.js";
import { createSqliteAdapterFactory } from "./sqlite-adapter.js";
import { keepSqliteFilesPrivate } from "./sqlite-file-mode.js";
import { createSql, type Sql } from "./sql.js";

/**
 * The Prisma client. Both providers' clients are generated from one logical
 * schema, so they have the same model API; the SQLite client's type stands for both.
 */
export type Db = PrismaClient;

/** A Prisma client bound to one interactive transaction. */
export type Tx = Omit<Db, "$connect" | "$disconnect" | "$on" | "$transaction" | "$extends">;

export interface Database {
  readonly provider: DatabaseConfig["provider"];
  readonly client: Db;
  /** Plain SQL on the client's own connection, outside transactions, for hot paths (see sql.ts). */
  readonly sql: Sql;
  /**
   * Runs fn in one transaction: all of its writes commit or none do. On
   * PostgreSQL it runs at READ COMMITTED; code that needs a serial order takes a
   * row lock first (see lockOrganization in the stores). Inside fn, query
   * through tx only: on SQLite a query through the outer client waits until
   * the transaction has ended (sqlite-adapter.ts).
   */
  transaction<T>(fn: (tx: Tx) => Promise<T>, options?: { timeoutMs?: number }): Promise<T>;
  /** Throws when the database cannot be reached. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** Apply pending migrations first (default true). */
  migrate?: boolean;
  /**
   * SQLite: how long a write waits for another process's write lock before it
   * fails (default 10 s, the server's; operator commands wait longer, see
   * docs/cli.md "Beside a running server").
   */
  lockWaitMs?: number;
}

/** Opens the database of the configuration, applying pending migrations first. */
export async function openDatabase(config: DatabaseConfig, options: OpenDatabaseOptions = {}): Promise<Database> {
  const lockWaitMs = options.lockWaitMs ?? 10_000;
  if (options.migrate !== false) {
    if (config.provider === "sqlite") await applyMigrations({ provider: "sqlite", file: config.file, busyTimeoutMs: lockWaitMs });
    else await applyMigrations({ provider: "postgresql", url: config.url });
  }
  const { client, adapter } = await createClient(config, lockWaitMs);
  await client.$connect();
  return {
    provider: config.provider,
    client,
    sql: createSql(config.provider, adapter),
    transaction: (fn, txOptions) =>
      client.$transaction((tx) => fn(tx), {
        // Longer than a BEGIN may wait for another process's lock: Prisma must never give up on a BEGIN that then succeeds.
        maxWait: lockWaitMs + 10_000,
        timeout: txOptions?.timeoutMs ?? 30_000,
      }),
    ping: async () => {
      await client.$queryRawUnsafe("SELECT 1");
    },
    close: () => client.$disconnect(),
  };
}

/** The client, and the adapter it connected (there once the client has connected). */
async function createClient(config: DatabaseConfig, lockWaitMs: number): Promise<{ client: Db; adapter: () => SqlDriverAdapter }> {
  let connected: SqlDriverAdapter | undefined;
  const adapter = () => {
    if (!connected) throw new Error("the database client has not connected yet");
    return connected;
  };
  const keep = (opened: SqlDriverAdapter) => {
    connected = opened;
  };
  // Prisma's query compiler is a 3 MB WebAssembly module. V8 compiles it with
  // its baseline compiler, then recompiles hot functions with the optimising
  // one, whose working memory stays in the allocator's thread arenas: 60 to 80
  // MB of resident memory for the life of the process. Query plans are cached,
  // so the compiler's code is not on any hot path: the baseline code costs no
  // measurable time. Set before the client module compiles it.
  setFlagsFromString("--liftoff-only");
  if (config.provider === "sqlite") {
    keepSqliteFilesPrivate(config.file);
    const { PrismaClient: SqliteClient } = await import("./generated/sqlite/client.js");
    // Our own adapter (sqlite-adapter.ts): queries outside a transaction stay out of it, and each connection keeps its prepared statements.
    const factory = createSqliteAdapterFactory({ file: config.file, busyTimeoutMs: lockWaitMs });
    return { client: new SqliteClient({ adapter: onConnect(factory, keep) }), adapter };
  }
  const [{ PrismaClient: PgClient }, { PrismaPg }] = await Promise.all([
    import("./generated/postgresql/client.js"),
    import("@prisma/adapter-pg"),
  ]);
  const factory = new PrismaPg({ connectionString: config.url, max: 10 });
  // The two generated clients have the same model API (one logical schema) but are distinct types.
  return { client: new PgClient({ adapter: onConnect(factory, keep) }) as Db, adapter };
}

/**
 * A factory that connects through `factory` and hands each adapter it
 * connects to `connected` before the client gets it (Database.sql queries the
 * client's own adapter). Composition over the public interface: the stock
 * factories keep their settings in private fields, so they are called, not copied.
 */
function onConnect(factory: SqlDriverAdapterFactory, connected: (adapter: SqlDriverAdapter) => void): SqlDriverAdapterFactory {
  return {
    provider: factory.provider,
    adapterName: factory.adapterName,
    async connect() {
      const opened = await factory.connect();
      connected(opened);
      return opened;
    },
  };
}
