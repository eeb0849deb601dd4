import type { Config } from "../config.js";
import { loadMasterKeyring } from "../crypto/master-keys.js";
import type { MasterKeyring } from "../crypto/envelope.js";
import { systemRandom, type RandomSource } from "../crypto/tokens.js";
import type { ChangeSubscriptions } from "../domain/changes/topic.js";
import { credentialChanges } from "../domain/changes/topics.js";
import { systemClock, type Clock } from "../domain/clock.js";
import type { PasswordHasher } from "../domain/identity/password-hasher.js";
import { createChangeFeed, type ChangeFeed } from "../storage/change-feed.js";
import { openDatabase, type Database } from "../storage/database.js";

/** The log lines the platform's parts write (pino's logger is one; operator commands use a quieter one). */
export interface PlatformLogger {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
  error(object: object, message: string): void;
}

/**
 * What every area is composed from: one per process (the server's, or an
 * operator command's). The composition functions of this folder build each
 * area's stores and domain services from it, once (memo); nothing outside
 * src/composition, src/app.ts and src/storage builds a store.
 */
export interface Platform {
  readonly config: Config;
  readonly database: Database;
  readonly clock: Clock;
  readonly random: RandomSource;
  readonly logger: PlatformLogger;
  /** The change feed on the database (an operator command opens it on first use): transactions and announcements. */
  readonly feed: ChangeFeed;
  /**
   * What caches follow: the feed in a server; nothing in an operator command,
   * whose one-off work keeps no cache worth telling (its subscriptions are never live).
   */
  readonly changes: ChangeSubscriptions;
  /** The master keys (loaded on first use). */
  readonly keyring: MasterKeyring;
  /** The process's one argon2id hasher (created on first use): every password computation shares its limit. */
  readonly passwordHasher: PasswordHasher;
  /** Tells every instance to stop trusting what it cached about credentials (after a revocation). */
  credentialsChanged(): Promise<void>;
  /** Work to run when the platform closes, in reverse order. */
  onClose(fn: () => Promise<void> | void): void;
  /** A part built once per platform. */
  memo<T>(key: string, build: () => T): T;
}

export interface PlatformParts {
  config: Config;
  database: Database;
  clock?: Clock;
  random?: RandomSource;
  logger: PlatformLogger;
  keyring: () => MasterKeyring;
  passwordHasher: () => PasswordHasher;
  /** A server follows the change feed; an operator command does not (Platform.changes). */
  serving: boolean;
  /** The server's credential cache tells its own instance at once; an operator command only announces. */
  credentialsChanged?: (feed: ChangeFeed) => Promise<void>;
}

/** A platform and what closes it (the feed, the parts that registered closers; not the database, which the caller owns). */
export function createPlatform(parts: PlatformParts): { platform: Platform; close(): Promise<void> } {
  const closers: (() => Promise<void> | void)[] = [];
  const memos = new Map<string, unknown>();
  let feed: ChangeFeed | undefined;
  let keyring: MasterKeyring | undefined;
  let hasher: PasswordHasher | undefined;
  const platform: Platform = {
    config: parts.config,
    database: parts.database,
    clock: parts.clock ?? systemClock,
    random: parts.random ?? systemRandom,
    logger: parts.logger,
    get feed() {
      feed ??= createChangeFeed({ database: parts.database, config: parts.config.database, logger: parts.logger });
      return feed;
    },
    get changes(): ChangeSubscriptions {
      return parts.serving ? platform.feed : inertSubscriptions;
    },
    get keyring() {
      keyring ??= parts.keyring();
      return keyring;
    },
    get passwordHasher() {
      hasher ??= parts.passwordHasher();
      return hasher;
    },
    async credentialsChanged() {
      const announce = parts.credentialsChanged ?? ((changes: ChangeFeed) => changes.announce(credentialChanges, "changed"));
      await announce(platform.feed);
    },
    onClose(fn) {
      closers.push(fn);
    },
    memo<T>(key: string, build: () => T): T {
      if (!memos.has(key)) memos.set(key, build());
      return memos.get(key) as T;
    },
  };
  return {
    platform,
    async close() {
      for (const fn of closers.reverse()) await fn();
      await feed?.close();
    },
  };
}

/**
 * The hasher of an operator command, loaded only if the command hashes (the
 * argon2 addon is not part of every command's start-up; docs/cli.md, "Start-up").
 */
function lazyPasswordHasher(): PasswordHasher {
  let made: Promise<PasswordHasher> | undefined;
  const get = () => {
    made ??= import("../domain/identity/password-hasher.js").then((module) => module.createPasswordHasher());
    return made;
  };
  return {
    parameters: { memoryCost: 19456, timeCost: 2, parallelism: 1 },
    hash: async (password, client) => (await get()).hash(password, client),
    verify: async (stored, password, client) => (await get()).verify(stored, password, client),
  };
}

/** Subscriptions that hear nothing and are never live (an operator command's caches then never trust a cache). */
const inertSubscriptions: ChangeSubscriptions = {
  subscribe: () => ({ ready: Promise.resolve(), live: () => false, close: () => {} }),
};

/** Operator commands log warnings and errors only, one JSON line each on stderr (results go to stdout). */
const operatorLogger: PlatformLogger = {
  info: () => {},
  warn: (object, message) => process.stderr.write(`${JSON.stringify({ level: "warn", msg: message, ...plain(object) })}\n`),
  error: (object, message) => process.stderr.write(`${JSON.stringify({ level: "error", msg: message, ...plain(object) })}\n`),
};

function plain(object: object): object {
  const err = (object as { err?: unknown }).err;
  return err instanceof Error ? { ...object, err: err.message } : object;
}

/**
 * The platform of an operator command (docs/cli.md): the database alone, with
 * its migrations applied, and the rest on first use. Runs fn, then closes it.
 */
export async function withOperatorPlatform<T>(
  config: Config,
  fn: (platform: Platform) => Promise<T>,
  options: { masterKeys?: boolean } = {},
): Promise<T> {
  const database = await openDatabase(config.database, { lockWaitMs: config.operatorLockWaitMs });
  const { platform, close } = createPlatform({
    config,
    database,
    logger: operatorLogger,
    serving: false,
    keyring: () => loadMasterKeyring(config),
    passwordHasher: lazyPasswordHasher,
  });
  try {
    if (options.masterKeys) {
      // A command that wraps or unwraps keys refuses a store holding values under a master key it lacks, as the server does.
      await (await import("./master-key.js")).checkPlatformMasterKeys(platform);
    }
    return await fn(platform);
  } finally {
    await close();
    await database.close();
  }
}

export { isDatabaseBusy } from "../storage/errors.js";
