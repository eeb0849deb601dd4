import type { App } from "../app.js";
import type { Config } from "../config.js";
import { notFound } from "../domain/errors.js";
import type { ChangeFeed } from "../storage/change-feed.js";
import type { Database } from "../storage/database.js";
import type { Output } from "./output.js";

/**
 * Opens the data store for an operator command (quiet logs), runs fn, closes
 * it. Opening may apply migrations and a remote database may be slow, so the
 * whole of it counts as work that shows a progress line when it is long.
 * The application is imported here, when a command needs it, so that help,
 * --version, completion and the API clients start without loading the server.
 * Commands that need only the database use withStore, which loads less.
 */
export function withApp<T>(out: Output, doing: string, fn: (app: App) => Promise<T>): Promise<T> {
  return out.progress(doing, async () => {
    const [{ createApp }, config] = await Promise.all([import("../app.js"), operatorConfig()]);
    return reportingBusy(config, async () => {
      const app = await createApp({ config, databaseLockWaitMs: config.operatorLockWaitMs });
      try {
        return await fn(app);
      } finally {
        await app.close();
      }
    });
  });
}

/** What an operator command that needs only the database works with: no server, no services. */
export interface OperatorStore {
  readonly config: Config;
  readonly database: Database;
  /** A change feed on the database, opened on first use and closed with the store. */
  changeFeed(): ChangeFeed;
  /** Tells every instance to stop trusting what it cached about credentials (after a revocation). */
  credentialsChanged(): Promise<void>;
}

/**
 * Opens the database alone (with its migrations) for an operator command, runs
 * fn, closes it: a tenth of what withApp loads, so that `keys list` and the
 * like answer at once.
 */
export function withStore<T>(out: Output, doing: string, fn: (store: OperatorStore) => Promise<T>): Promise<T> {
  return out.progress(doing, async () => {
    const [{ openDatabase }, { createChangeFeed }, { announceCredentialsChanged }, config] = await Promise.all([
      import("../storage/database.js"),
      import("../storage/change-feed.js"),
      import("../interceptors/credential-cache.js"),
      operatorConfig(),
    ]);
    return reportingBusy(config, async () => {
      const database = await openDatabase(config.database, { lockWaitMs: config.operatorLockWaitMs });
      let feed: ChangeFeed | undefined;
      const changeFeed = () => {
        feed ??= createChangeFeed({ database, config: config.database });
        return feed;
      };
      try {
        return await fn({ config, database, changeFeed, credentialsChanged: () => announceCredentialsChanged(changeFeed()) });
      } finally {
        await feed?.close();
        await database.close();
      }
    });
  });
}

/**
 * Runs work; a write that waited for another process's lock (SQLite, beside a
 * busy server) for the whole bound becomes an error that says so and what to do.
 */
async function reportingBusy<T>(config: Config, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    const { isDatabaseBusy } = await import("../storage/errors.js");
    if (!isDatabaseBusy(error)) throw error;
    const { CliError } = await import("./errors.js");
    throw new CliError(
      "database_busy",
      `gave up after waiting ${config.operatorLockWaitMs / 1000} s for the database's write lock, which another process ` +
        "(a running server) held all that time; the write that waited changed nothing. Run the command again, or allow a " +
        "longer wait with GATEHOUSE_LOCK_WAIT_SECONDS (up to 3600)",
    );
  }
}

/**
 * The master keyring as the server builds it (GATEHOUSE_MASTER_KEY, else the
 * data directory's key file), for an operator command that wraps or unwraps keys.
 */
export async function masterKeyringOf(config: Config) {
  const { loadMasterKeyring } = await import("../crypto/master-keys.js");
  return loadMasterKeyring(config);
}

/**
 * The organisations' secrets keyrings (the server's own code) over the
 * command's store: a rotation is announced to every instance, which forgets
 * the organisation's cached keys.
 */
export async function secretKeyringsOf(store: OperatorStore) {
  const [{ createSecretKeyrings, sealingKeysTopic }, { createSecretsStore, createSecretsTransactor }, { systemRandom }, masterKeyring] =
    await Promise.all([
      import("../domain/secrets/secret-keyrings.js"),
      import("../storage/secrets-store.js"),
      import("../crypto/tokens.js"),
      masterKeyringOf(store.config),
    ]);
  const feed = store.changeFeed();
  const transact = createSecretsTransactor((fn) => feed.transaction(fn));
  return createSecretKeyrings({
    store: createSecretsStore(store.database.client),
    transaction: (fn) => transact((tx) => fn(tx)),
    announceRotation: (organizationId) => feed.transaction(async (_tx, notify) => notify(sealingKeysTopic, organizationId)),
    masterKeyring,
    random: systemRandom,
  });
}

/** The server's configuration as an operator command reads it: quiet logs. */
async function operatorConfig(): Promise<Config> {
  const { loadConfig } = await import("../config.js");
  return { ...loadConfig(), logLevel: process.env.LOG_LEVEL ?? "warn" };
}

/** not_found (organization_not_found) for an organisation id that names none, rather than an empty answer. */
export async function requireOrganization(store: Pick<OperatorStore, "database">, organizationId: string): Promise<void> {
  const { createTenancyStore } = await import("../storage/tenancy-store.js");
  if (!(await createTenancyStore(store.database.client).findOrganization(organizationId))) {
    throw notFound("organization_not_found", `organisation ${organizationId} does not exist (see gatehouse orgs list)`);
  }
}

/** The tenancy domain (organisations, API keys) over the command's store; a revocation is announced to every instance. */
export async function tenancyOf(store: OperatorStore) {
  const [{ createTenancy }, { createTenancyStore }, { systemClock }] = await Promise.all([
    import("../domain/tenancy/tenancy.js"),
    import("../storage/tenancy-store.js"),
    import("../domain/clock.js"),
  ]);
  return createTenancy({
    transaction: (fn) => store.database.transaction((tx) => fn(createTenancyStore(tx))),
    clock: systemClock,
    publicUrl: store.config.publicUrl,
    credentialsChanged: () => store.credentialsChanged(),
  });
}
