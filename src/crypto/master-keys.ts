import { randomBytes } from "node:crypto";
import { closeSync, constants, existsSync, fsyncSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";
import { DomainError } from "../domain/errors.js";
import { createMasterKeyring, type MasterKeyring } from "./envelope.js";
import { loadMasterKey } from "./master-key.js";

/** Where the master keys come from: the environment, else the data directory's key files. */
export interface MasterKeySources {
  /** GATEHOUSE_MASTER_KEY (base64), or undefined for <dataDir>/master.key. */
  masterKeyBase64: string | undefined;
  /** GATEHOUSE_PREVIOUS_MASTER_KEYS (base64 each). */
  previousMasterKeysBase64: readonly string[];
  dataDir: string;
}

/** The file of the keys being retired beside the default master key file: one base64 key per line. */
export function previousKeysFile(dataDir: string): string {
  return join(dataDir, "master.key.previous");
}

/**
 * The master keyring of docs/secrets.md, "Rotating the master key": the
 * current key (GATEHOUSE_MASTER_KEY, else <dataDir>/master.key, created on
 * first start) and the keys being retired (GATEHOUSE_PREVIOUS_MASTER_KEYS, else,
 * with the file-based key, <dataDir>/master.key.previous when it exists).
 */
export function loadMasterKeyring(sources: MasterKeySources): MasterKeyring {
  const current = loadMasterKey({ base64: sources.masterKeyBase64, file: join(sources.dataDir, "master.key") });
  const previous =
    sources.previousMasterKeysBase64.length > 0 || sources.masterKeyBase64 !== undefined
      ? sources.previousMasterKeysBase64.map((key) => Buffer.from(key, "base64"))
      : readPreviousKeys(previousKeysFile(sources.dataDir));
  return createMasterKeyring(current, previous);
}

function readPreviousKeys(file: string): Buffer[] {
  if (!existsSync(file)) return [];
  const lines = readFileSync(file, "utf8")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "");
  return lines.map((line, i) => {
    const key = Buffer.from(line, "base64");
    if (key.length !== 32) throw new Error(`${file}: line ${i + 1} does not hold a 32-byte base64 key`);
    return key;
  });
}

/**
 * Introduces a new file-based master key: the current key is appended to
 * master.key.previous, then a new key replaces master.key (written to a
 * temporary file, synced, renamed over it: a crash leaves the old key or the
 * new one, and the old one is kept in the previous keys either way). Both
 * files are mode 0600. Returns the ids of the new key and of the one it
 * replaced. With GATEHOUSE_MASTER_KEY set there is no file to change.
 */
export function introduceMasterKeyFile(sources: MasterKeySources): { currentId: string; previousId: string } {
  if (sources.masterKeyBase64 !== undefined) {
    throw new DomainError(
      "failed_precondition",
      "master_key_from_environment",
      "GATEHOUSE_MASTER_KEY is set, so the master key is not a file this command can replace: make a key (openssl rand -base64 32), " +
        "give it as GATEHOUSE_MASTER_KEY and the old one in GATEHOUSE_PREVIOUS_MASTER_KEYS to every instance, restart them, " +
        "then run gatehouse master-key rotate",
    );
  }
  const ring = loadMasterKeyring(sources);
  const keyFile = join(sources.dataDir, "master.key");
  const current = loadMasterKey({ base64: undefined, file: keyFile });
  appendLine(previousKeysFile(sources.dataDir), current.toString("base64"));
  const next = randomBytes(32);
  const temporary = `${keyFile}.new`;
  try {
    unlinkSync(temporary);
  } catch {
    // none left by an earlier crash
  }
  const fd = openSync(temporary, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  try {
    writeSync(fd, `${next.toString("base64")}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temporary, keyFile);
  return { currentId: createMasterKeyring(next).currentId, previousId: ring.currentId };
}

function appendLine(file: string, line: string): void {
  const fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND, 0o600);
  try {
    writeSync(fd, `${line}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
