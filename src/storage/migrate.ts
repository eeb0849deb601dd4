// Applies the committed SQL migrations (prisma/<provider>/migrations/<NNNN>_<name>/migration.sql)
// at every start. The SQL is written by scripts/prisma-migration.mjs from the Prisma schema;
// here it is only executed, with plain better-sqlite3 and pg, so the application needs no
// schema engine at run time.
//
// Applied migrations are recorded in _gatehouse_migrations with the sha256 of their SQL.
// Each migration runs in its own transaction together with its record, so a failed one
// leaves no trace and is retried at the next start. Several instances may start at once:
// PostgreSQL runs are serialized by an advisory lock, SQLite ones by BEGIN IMMEDIATE.
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import Database from "better-sqlite3";
import pg from "pg";
import { keepSqliteFilesPrivate } from "./sqlite-file-mode.js";

export type MigrationTarget =
  | {
      provider: "sqlite";
      file: string;
      /** How long to wait for another process's write lock when a migration is pending (at least 15 s). */
      busyTimeoutMs?: number;
    }
  | { provider: "postgresql"; url: string };

type Migration = { name: string; sql: string; checksum: string };
type AppliedMigration = { name: string; checksum: string };

const TABLE = "_gatehouse_migrations";
/** Key of the session-level advisory lock held while migrating ("gatehous" in ASCII). */
const ADVISORY_LOCK_KEY = 0x6761_7465_686f_7573n.toString();
/** How long a SQLite connection waits for another writer before failing. */
const SQLITE_BUSY_TIMEOUT_MS = 15_000;

/**
 * Applies every committed migration not yet applied, in order. Returns the names applied now.
 *
 * Throws, applying nothing, when the database's history does not fit the migrations on
 * disk: an applied migration whose SQL changed (checksum), an applied migration missing on
 * disk while later ones exist, or a pending migration that sorts before an applied one.
 * Migrations applied by a newer release (recorded, unknown here, after all of ours) are
 * tolerated so that an older instance can still start during a rolling deploy.
 */
export async function applyMigrations(target: MigrationTarget, options: { migrationsDir?: string } = {}): Promise<string[]> {
  const dir = options.migrationsDir ?? join(packageRoot(), "prisma", target.provider, "migrations");
  const migrations = readMigrations(dir);
  return target.provider === "sqlite"
    ? applySqlite(target.file, migrations, dir, Math.max(SQLITE_BUSY_TIMEOUT_MS, target.busyTimeoutMs ?? 0))
    : applyPostgres(target.url, migrations, dir);
}

// ---------------------------------------------------------------- migrations on disk

/** The folder holding package.json above this module (src/storage or dist/src/storage). */
function packageRoot(): string {
  const start = dirname(fileURLToPath(import.meta.url));
  for (let dir = start; ; dir = dirname(dir)) {
    if (existsSync(join(dir, "package.json"))) return dir;
    if (dirname(dir) === dir) throw new Error(`No package.json found above ${start}`);
  }
}

/**
 * SHA-256 of the script. Line endings are normalized first, so a checkout that turns LF
 * into CRLF does not look like an edited migration.
 */
function checksumOf(sql: string): string {
  return createHash("sha256").update(sql.replace(/\r\n/g, "\n"), "utf8").digest("hex");
}

function readMigrations(dir: string): Migration[] {
  if (!existsSync(dir)) throw new Error(`Migrations directory not found: ${dir}`);
  return readdirSync(dir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(dir, entry.name, "migration.sql")))
    .map((entry) => entry.name)
    .sort(compareNames)
    .map((name) => {
      const sql = readFileSync(join(dir, name, "migration.sql"), "utf8");
      return { name, sql, checksum: checksumOf(sql) };
    });
}

/** Code-unit order, the same on every machine (names are zero-padded sequence numbers). */
function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The migrations still to apply, after checking the recorded history against the disk. */
function pendingMigrations(migrations: Migration[], applied: AppliedMigration[], dir: string): Migration[] {
  const onDisk = new Map(migrations.map((m) => [m.name, m]));
  const lastOnDisk = migrations.at(-1)?.name;
  for (const record of applied) {
    const migration = onDisk.get(record.name);
    if (migration) {
      if (migration.checksum !== record.checksum) {
        throw new Error(
          `Refusing to start: migration "${record.name}" was changed after it was applied ` +
            `(checksum recorded ${record.checksum}, on disk ${migration.checksum}). ` +
            `Restore ${join(dir, record.name, "migration.sql")} and put the change in a new migration.`,
        );
      }
    } else if (lastOnDisk !== undefined && compareNames(record.name, lastOnDisk) < 0) {
      throw new Error(`Refusing to start: migration "${record.name}" is recorded as applied in ${TABLE} ` + `but is missing from ${dir}.`);
    }
  }
  const appliedNames = new Set(applied.map((a) => a.name));
  const lastApplied = applied
    .map((a) => a.name)
    .sort(compareNames)
    .at(-1);
  const pending = migrations.filter((m) => !appliedNames.has(m.name));
  const early = pending.find((m) => lastApplied !== undefined && compareNames(m.name, lastApplied) < 0);
  if (early && lastApplied !== undefined) {
    throw new Error(
      `Refusing to start: migration "${early.name}" is not applied but sorts before the applied ` +
        `migration "${lastApplied}". Renumber it to come after "${lastApplied}".`,
    );
  }
  return pending;
}

function failure(name: string, error: unknown): Error {
  const reason = error instanceof Error ? error.message : String(error);
  return new Error(`Migration "${name}" failed and was rolled back: ${reason}`, { cause: error });
}

// ---------------------------------------------------------------- SQLite

function applySqlite(file: string, migrations: Migration[], dir: string, busyTimeoutMs: number): string[] {
  const inMemory = file === ":memory:" || file === "";
  // SQLite would create the file 0644 less the umask: it is created owner-only first.
  if (!inMemory) keepSqliteFilesPrivate(resolve(file));
  const db = new Database(file, { timeout: busyTimeoutMs });
  try {
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    db.pragma("journal_mode = WAL");
    db.exec(`CREATE TABLE IF NOT EXISTS "${TABLE}" (
      "name" TEXT PRIMARY KEY,
      "checksum" TEXT NOT NULL,
      "applied_at" TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    )`);
    const readApplied = db.prepare<[], AppliedMigration>(`SELECT "name", "checksum" FROM "${TABLE}"`);
    const record = db.prepare<[string, string]>(`INSERT INTO "${TABLE}" ("name", "checksum") VALUES (?, ?)`);
    const checkForeignKeys = db.prepare("PRAGMA foreign_key_check");

    // Table rebuilds (create new, copy, drop old, rename) must not fire ON DELETE CASCADE
    // when the old table is dropped, and `PRAGMA foreign_keys` is a no-op inside a
    // transaction: enforcement is switched off around the transactions and the result
    // is verified with foreign_key_check before each commit instead.
    // Nothing pending (every start but the first after an upgrade): no write lock is taken, so an
    // operator command opening the store beside a busy server does not queue behind its writes.
    if (pendingMigrations(migrations, readApplied.all(), dir).length === 0) return [];
    const foreignKeys = db.pragma("foreign_keys", { simple: true }) as number;
    db.pragma("foreign_keys = OFF");
    const appliedNow: string[] = [];
    try {
      for (;;) {
        // One migration per write transaction; the history is re-read under the write
        // lock, so a migration applied meanwhile by another process is not run twice.
        db.exec("BEGIN IMMEDIATE");
        let migration: Migration | undefined;
        try {
          migration = pendingMigrations(migrations, readApplied.all(), dir)[0];
          if (!migration) {
            db.exec("COMMIT");
            break;
          }
          db.exec(migration.sql);
          const violations = checkForeignKeys.all();
          if (violations.length > 0) {
            throw new Error(`foreign key check failed: ${JSON.stringify(violations.slice(0, 5))}`);
          }
          record.run(migration.name, migration.checksum);
          db.exec("COMMIT");
        } catch (error) {
          if (db.inTransaction) db.exec("ROLLBACK");
          throw migration ? failure(migration.name, error) : error;
        }
        appliedNow.push(migration.name);
      }
    } finally {
      db.pragma(`foreign_keys = ${foreignKeys ? "ON" : "OFF"}`);
    }
    return appliedNow;
  } finally {
    db.close();
  }
}

// ---------------------------------------------------------------- PostgreSQL

async function applyPostgres(url: string, migrations: Migration[], dir: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url, application_name: "gatehouse-migrate" });
  // A connection lost mid-run rejects the pending query; without a listener the
  // client's "error" event would also crash the process.
  client.on("error", () => {});
  await client.connect();
  try {
    // Session-level lock: a second instance waits here until the first has finished,
    // then finds everything applied. It is released on unlock or when the session ends.
    await client.query("SELECT pg_advisory_lock($1::bigint)", [ADVISORY_LOCK_KEY]);
    try {
      await client.query(`CREATE TABLE IF NOT EXISTS "${TABLE}" (
        "name" TEXT PRIMARY KEY,
        "checksum" TEXT NOT NULL,
        "applied_at" TIMESTAMPTZ NOT NULL DEFAULT now()
      )`);
      const { rows } = await client.query<AppliedMigration>(`SELECT "name", "checksum" FROM "${TABLE}"`);
      const appliedNow: string[] = [];
      for (const migration of pendingMigrations(migrations, rows, dir)) {
        await client.query("BEGIN");
        try {
          // No parameters: the simple query protocol, which accepts a multi-statement script.
          await client.query(migration.sql);
          await client.query(`INSERT INTO "${TABLE}" ("name", "checksum") VALUES ($1, $2)`, [migration.name, migration.checksum]);
          await client.query("COMMIT");
        } catch (error) {
          await client.query("ROLLBACK").catch(() => {});
          throw failure(migration.name, error);
        }
        appliedNow.push(migration.name);
      }
      return appliedNow;
    } finally {
      await client.query("SELECT pg_advisory_unlock($1::bigint)", [ADVISORY_LOCK_KEY]).catch(() => {});
    }
  } finally {
    await client.end().catch(() => {});
  }
}
