import { chmodSync, closeSync, constants, fchmodSync, mkdirSync, openSync, statSync } from "node:fs";
import { dirname } from "node:path";

/** Files kept beside a SQLite database: its write-ahead log, shared memory and rollback journal, and the change feed's notices. */
const companions = ["-wal", "-shm", "-journal", "-notices"];

/**
 * Makes a SQLite database file and the files beside it readable by their
 * owner only (0600; docs/security.md "Files at rest"), before SQLite opens it.
 *
 * SQLite creates a missing database file with mode 0644 less the umask, so
 * under the usual umask 022 every local user could read it (password hashes,
 * sealed secrets). It creates the -wal, -shm and -journal files with the
 * database file's own permission bits, whatever the umask (os_unix.c,
 * findCreateFileMode and robust_open). So the file is created here, 0600
 * exactly (fchmod, the umask set aside), and SQLite's companions follow.
 * A database or companion left readable by others, by an earlier version or
 * by hand, is narrowed to 0600; one this process does not own is left as it is.
 * A directory created here is 0700; an existing one keeps its mode.
 */
export function keepSqliteFilesPrivate(file: string): void {
  if (file === "" || file === ":memory:") return;
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  try {
    const fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
    try {
      fchmodSync(fd, 0o600);
    } finally {
      closeSync(fd);
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  for (const path of [file, ...companions.map((suffix) => file + suffix)]) narrow(path);
}

function narrow(path: string): void {
  let mode: number;
  try {
    mode = statSync(path).mode;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
    throw error;
  }
  if ((mode & 0o077) === 0) return;
  try {
    chmodSync(path, 0o600);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EPERM") throw error;
  }
}
