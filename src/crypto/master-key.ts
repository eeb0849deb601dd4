import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, openSync, readFileSync, writeSync, closeSync, constants } from "node:fs";
import { dirname } from "node:path";

/**
 * Loads the 32-byte master key: from GATEHOUSE_MASTER_KEY when set, else from
 * <dataDir>/master.key, generating that file (mode 0600) on first start. The
 * exclusive create makes simultaneous first starts agree on one key.
 */
export function loadMasterKey(options: { base64?: string | undefined; file: string }): Buffer {
  if (options.base64) return Buffer.from(options.base64, "base64");
  mkdirSync(dirname(options.file), { recursive: true, mode: 0o700 });
  try {
    const fd = openSync(options.file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
    try {
      writeSync(fd, `${randomBytes(32).toString("base64")}\n`);
    } finally {
      closeSync(fd);
    }
    chmodSync(options.file, 0o600);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  const key = Buffer.from(readFileSync(options.file, "utf8").trim(), "base64");
  if (key.length !== 32) throw new Error(`${options.file} does not hold a 32-byte base64 key`);
  return key;
}
