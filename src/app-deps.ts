import type { Config } from "./config.js";
import type { MasterKeyring } from "./crypto/envelope.js";
import type { RandomSource } from "./crypto/tokens.js";
import type { Clock } from "./domain/clock.js";
import type { PasswordHasher } from "./domain/identity/password-hasher.js";
import type { Database } from "./storage/database.js";
import type { Logger } from "./server/logger.js";

/** What every area of the app is built from (narrow it with Pick where you can). */
export interface AppDeps {
  config: Config;
  database: Database;
  clock: Clock;
  random: RandomSource;
  keyring: MasterKeyring;
  logger: Logger;
  /**
   * The app's one argon2id hasher: end users' and operators' passwords share its
   * concurrency limit (one hash per core), so together they never oversubscribe the pool.
   */
  passwordHasher: PasswordHasher;
  /** Work to run when the app closes (listeners, timers), in reverse order. */
  onClose(fn: () => Promise<void> | void): void;
}
