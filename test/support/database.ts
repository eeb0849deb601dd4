import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { openDatabase, type Database } from "../../src/storage/database.js";

/**
 * The database a test file runs against. `npm test` uses a fresh SQLite file;
 * with TEST_DATABASE_URL=postgresql://.../<db> every test file gets a fresh
 * PostgreSQL database of its own, dropped when it is done.
 */
export interface TestDatabase {
  /** DATABASE_URL for the server. */
  url: string;
  provider: "sqlite" | "postgresql";
  /** A data directory of its own (master key, SQLite file). */
  dataDir: string;
  drop(): Promise<void>;
}

export const testProvider: "sqlite" | "postgresql" = process.env.TEST_DATABASE_URL?.startsWith("postgres") ? "postgresql" : "sqlite";

export async function createTestDatabase(): Promise<TestDatabase> {
  const dataDir = mkdtempSync(join(tmpdir(), "gatehouse-test-"));
  const base = process.env.TEST_DATABASE_URL;
  if (!base || testProvider === "sqlite") {
    return {
      url: `file:${join(dataDir, "gatehouse.db")}`,
      provider: "sqlite",
      dataDir,
      drop: async () => rmSync(dataDir, { recursive: true, force: true }),
    };
  }
  const name = `gatehouse_t_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(base);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    provider: "postgresql",
    dataDir,
    async drop() {
      rmSync(dataDir, { recursive: true, force: true });
      const client = new pg.Client({ connectionString: base });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}

/**
 * Ends every change-feed LISTEN connection on a PostgreSQL test database, as a
 * network failure would; returns how many were ended.
 */
export async function dropChangeFeedConnections(url: string): Promise<number> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    const { rowCount } = await admin.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'gatehouse change feed' AND datname = current_database()",
    );
    return rowCount ?? 0;
  } finally {
    await admin.end();
  }
}

/**
 * Waits until no session but this one is connected to a PostgreSQL test
 * database: a killed server's sessions outlive it until each notices its
 * client is gone, and one that had already sent COMMIT still commits. Returns
 * the milliseconds it waited.
 */
export async function untilOtherSessionsEnd(url: string, timeoutMs = 120_000): Promise<number> {
  const started = Date.now();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (;;) {
      const { rows } = await client.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
      );
      if (rows[0]?.n === 0) return Date.now() - started;
      if (Date.now() - started > timeoutMs) throw new Error(`${rows[0]?.n} other sessions still on the database after ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  } finally {
    await client.end();
  }
}

/** Opens a test database in this process, migrations applied, as the server opens it. */
export function openTestDatabase(testDb: TestDatabase): Promise<Database> {
  return openDatabase(
    testDb.provider === "sqlite"
      ? { provider: "sqlite", file: join(testDb.dataDir, "gatehouse.db") }
      : { provider: "postgresql", url: testDb.url },
  );
}
