import { checkMasterKeys } from "../domain/master-key/check-master-keys.js";
import { masterKeyStatus, type MasterKeyStatus } from "../domain/master-key/master-key-status.js";
import { rotateMasterKey } from "../domain/master-key/rotate-master-key.js";
import { createMasterKeyStore } from "../storage/master-key-store.js";
import type { Platform } from "./platform.js";

/** Refuses a store holding values wrapped under a master key the platform was not given (at start, by id). */
export async function checkPlatformMasterKeys(platform: Pick<Platform, "database" | "keyring">): Promise<void> {
  await checkMasterKeys({ store: createMasterKeyStore(platform.database.client), keyring: platform.keyring });
}

/** How many wrapped values each master key holds (`gatehouse master-key status`). */
export function masterKeyStatusOf(platform: Platform): Promise<MasterKeyStatus> {
  return masterKeyStatus({ store: createMasterKeyStore(platform.database.client), keyring: platform.keyring });
}

/** Wraps every value again under the current master key, in batches (`gatehouse master-key rotate`). */
export function rotateMasterKeyOf(
  platform: Platform,
  options: Pick<Parameters<typeof rotateMasterKey>[0], "batchSize" | "onProgress">,
): ReturnType<typeof rotateMasterKey> {
  const { database } = platform;
  return rotateMasterKey({
    store: createMasterKeyStore(database.client),
    transaction: (fn) => database.transaction((tx) => fn(createMasterKeyStore(tx))),
    keyring: platform.keyring,
    batchSize: options.batchSize,
    // SQLite has one writer: the servers' writes get the lock between batches.
    yieldBetweenBatches: database.provider === "sqlite",
    ...(options.onProgress ? { onProgress: options.onProgress } : {}),
  });
}
