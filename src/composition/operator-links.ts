import { systemClock, type Clock } from "../domain/clock.js";
import {
  createOperatorSignInLinks,
  type IssuedSignInLink,
  type OperatorSignInLinks,
} from "../dashboard/operators/operator-sign-in-links.js";
import { createDashboardStore } from "../storage/dashboard-store.js";
import type { Database } from "../storage/database.js";
import { createSignInLinkStore } from "../storage/sign-in-link-store.js";
import type { RandomSource } from "../crypto/tokens.js";

/** The one-time operator sign-in links of one data store (the dashboard spends them; the operator command issues them). */
export function operatorSignInLinksOf(
  database: Database,
  options: { publicUrl: string; clock?: Clock; random?: RandomSource },
): OperatorSignInLinks {
  const storeOf = (db: Parameters<typeof createDashboardStore>[0]) => createDashboardStore(db, database.provider);
  return createOperatorSignInLinks({
    links: createSignInLinkStore(database.client),
    accounts: storeOf(database.client),
    transaction: (fn) => database.transaction((tx) => fn({ links: createSignInLinkStore(tx), dashboard: storeOf(tx) })),
    clock: options.clock ?? systemClock,
    ...(options.random ? { random: options.random } : {}),
    publicUrl: options.publicUrl,
  });
}

/**
 * For the headless operator command (`gatehouse operators sign-in-link
 * --email <e-mail> [--ttl <seconds>] [--json]`): issues a one-time dashboard
 * sign-in link on a data store, printed once.
 */
export function issueOperatorSignInLink(
  app: { database: Database; config: { publicUrl: string } },
  input: { email: string; ttlSeconds?: number },
  options: { clock?: Clock } = {},
): Promise<IssuedSignInLink> {
  return operatorSignInLinksOf(app.database, { publicUrl: app.config.publicUrl, ...options }).issue(input);
}
