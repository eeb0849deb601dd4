import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Sqlite from "better-sqlite3";
import { keepSqliteFilesPrivate } from "../../src/storage/sqlite-file-mode.js";

// A SQLite database and the files SQLite keeps beside it are owner-only (0600)
// whatever the umask (docs/security.md "Files at rest"). The process test
// (test/http/files-at-rest.test.ts) covers the write-ahead log; this one the
// rollback journal, which a database in WAL mode never has, and umask 000.
// Runs on every run (SQLite needs only a file).

let dir: string;
let previousUmask: number;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "gatehouse-file-mode-"));
  chmodSync(dir, 0o755);
  previousUmask = process.umask();
});

afterAll(() => {
  process.umask(previousUmask);
  rmSync(dir, { recursive: true, force: true });
});

const modeOf = (path: string) => (statSync(path).mode & 0o777).toString(8);

describe.each(["022", "000"])("under umask %s", (mask) => {
  const umask = Number.parseInt(mask, 8);
  test("the database and its rollback journal are 0600", () => {
    process.umask(umask);
    const file = join(dir, `journal-${mask}.db`);
    keepSqliteFilesPrivate(file);
    const db = new Sqlite(file);
    try {
      db.pragma("journal_mode = DELETE");
      db.exec("CREATE TABLE t (x)");
      db.exec("BEGIN");
      db.exec("INSERT INTO t VALUES (1)");
      // The journal exists while the write transaction is open.
      expect({ db: modeOf(file), journal: modeOf(`${file}-journal`) }).toEqual({ db: "600", journal: "600" });
      db.exec("COMMIT");
    } finally {
      db.close();
    }
  });

  test("a directory it creates is 0700; the database inside it 0600", () => {
    process.umask(umask);
    const file = join(dir, `new-${mask}`, "nested", "gatehouse.db");
    keepSqliteFilesPrivate(file);
    expect({ directory: modeOf(join(dir, `new-${mask}`, "nested")), file: modeOf(file) }).toEqual({ directory: "700", file: "600" });
  });
});

test("an existing database keeps its content; it and its companions are narrowed to 0600, other files are left alone", () => {
  const folder = join(dir, "existing");
  mkdirSync(folder);
  const file = join(folder, "gatehouse.db");
  const db = new Sqlite(file);
  db.exec("CREATE TABLE t (x); INSERT INTO t VALUES (42)");
  db.close();
  // Companions left by an earlier run (empty stand-ins here), and a file that is none of the database's.
  for (const name of ["gatehouse.db-wal", "gatehouse.db-shm", "gatehouse.db-notices", "unrelated.txt"]) {
    writeFileSync(join(folder, name), "");
    chmodSync(join(folder, name), 0o644);
  }
  chmodSync(file, 0o644);
  keepSqliteFilesPrivate(file);
  const modes = Object.fromEntries(readdirSync(folder).map((name) => [name, modeOf(join(folder, name))]));
  expect(modes).toEqual({
    "gatehouse.db": "600",
    "gatehouse.db-wal": "600",
    "gatehouse.db-shm": "600",
    "gatehouse.db-notices": "600",
    "unrelated.txt": "644",
  });
  const reopened = new Sqlite(file, { readonly: true });
  expect(reopened.prepare("SELECT x FROM t").pluck().get()).toBe(42);
  reopened.close();
});
