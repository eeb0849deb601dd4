import type { App } from "../app.js";
import { notFound } from "../domain/errors.js";
import { createTenancyStore } from "../storage/tenancy-store.js";
import type { Output } from "./output.js";

/**
 * Opens the data store for an operator command (quiet logs), runs fn, closes
 * it. Opening may apply migrations and a remote database may be slow, so the
 * whole of it counts as work that shows a progress line when it is long.
 * The application is imported here, when a command needs it, so that help,
 * --version, completion and the API clients start without loading the server.
 */
export function withApp<T>(out: Output, doing: string, fn: (app: App) => Promise<T>): Promise<T> {
  return out.progress(doing, async () => {
    const [{ createApp }, { loadConfig }] = await Promise.all([import("../app.js"), import("../config.js")]);
    const app = await createApp({ config: { ...loadConfig(), logLevel: process.env.LOG_LEVEL ?? "warn" } });
    try {
      return await fn(app);
    } finally {
      await app.close();
    }
  });
}

/** not_found (organization_not_found) for an organisation id that names none, rather than an empty answer. */
export async function requireOrganization(app: App, organizationId: string): Promise<void> {
  if (!(await createTenancyStore(app.database.client).findOrganization(organizationId))) {
    throw notFound("organization_not_found", `organisation ${organizationId} does not exist (see gatehouse orgs list)`);
  }
}
