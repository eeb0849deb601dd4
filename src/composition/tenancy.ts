import { createTenancy, type Tenancy } from "../domain/tenancy/tenancy.js";
import { createTenancyStore } from "../storage/tenancy-store.js";
import type { Platform } from "./platform.js";
import { transact } from "./transactions.js";

/** Organisations, API keys and the organisations' identity keys (the dashboard, the CLI, `init`). */
export function tenancyOf(platform: Platform): Tenancy {
  return platform.memo("tenancy", () =>
    createTenancy({
      store: createTenancyStore(platform.database.client),
      transaction: (fn) => transact(platform, ({ tx, events }) => fn(createTenancyStore(tx), events)),
      clock: platform.clock,
      random: platform.random,
      publicUrl: platform.config.publicUrl,
      credentialsChanged: () => platform.credentialsChanged(),
      // Loaded when an operator rotates: `keys list` and the like never load the identity area.
      sessionSigningKeys: {
        rotate: async (organizationId) => (await import("./identity.js")).sessionsOf(platform).rotateSigningKey(organizationId),
      },
    }),
  );
}
