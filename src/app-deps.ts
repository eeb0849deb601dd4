import type { Config } from "./config.js";
import type { MasterKeyring } from "./crypto/envelope.js";
import type { RandomSource } from "./crypto/tokens.js";
import type { Clock } from "./domain/clock.js";
import type { PasswordHasher } from "./domain/identity/password-hasher.js";
import type { ChangeFeed } from "./storage/change-feed.js";
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
  /** The app's change feed: notifications that reach every instance sharing the database. */
  changeFeed: ChangeFeed;
  /**
   * Call after any write that can take access away (a key revoked or rotated, a role
   * changed, a membership removed, an account disabled): every instance stops
   * trusting what it cached about credentials.
   */
  credentialsChanged(): Promise<void>;
  /** Work to run when the app closes (listeners, timers), in reverse order. */
  onClose(fn: () => Promise<void> | void): void;
}
