import type { Platform } from "../composition/platform.js";
import type { Config } from "../config.js";
import { notFound } from "../domain/errors.js";
import type { Output } from "./output.js";

/** What an operator command works with: the platform of its process (src/composition), over the database alone. */
export type OperatorStore = Platform;

/**
 * Opens the data store for an operator command (quiet logs), runs fn, closes
 * it. Opening may apply migrations and a remote database may be slow, so the
 * whole of it counts as work that shows a progress line when it is long. What
 * fn uses is composed on first use (src/composition, one small module per
 * area), so that help, --version, completion and the API clients start
 * without loading the server, and `keys list` without the other areas.
 */
export function withStore<T>(
  out: Output,
  doing: string,
  fn: (store: OperatorStore) => Promise<T>,
  options: { masterKeys?: boolean } = {},
): Promise<T> {
  return out.progress(doing, async () => {
    const [{ withOperatorPlatform }, config] = await Promise.all([import("../composition/platform.js"), operatorConfig()]);
    return reportingBusy(config, () => withOperatorPlatform(config, fn, options));
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
    const { isDatabaseBusy } = await import("../composition/platform.js");
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

/** The server's configuration as an operator command reads it: quiet logs. */
async function operatorConfig(): Promise<Config> {
  const { loadConfig } = await import("../config.js");
  return { ...loadConfig(), logLevel: process.env.LOG_LEVEL ?? "warn" };
}

/** not_found (organization_not_found) for an organisation id that names none, rather than an empty answer. */
export async function requireOrganization(store: OperatorStore, organizationId: string): Promise<void> {
  const { tenancyOf } = await import("../composition/tenancy.js");
  if (!(await tenancyOf(store).findOrganization(organizationId))) {
    throw notFound("organization_not_found", `organisation ${organizationId} does not exist (see gatehouse orgs list)`);
  }
}

/** The tenancy domain (organisations, API keys) over the command's store; a revocation is announced to every instance. */
export async function tenancyOf(store: OperatorStore) {
  return (await import("../composition/tenancy.js")).tenancyOf(store);
}
