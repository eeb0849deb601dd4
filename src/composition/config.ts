import { configRevisions } from "../domain/changes/topics.js";
import { createConfigManager, type ConfigManager } from "../domain/config/config-manager.js";
import { createConfigStore } from "../storage/config-store.js";
import { createGatewayStore } from "../storage/gateway-store.js";
import type { Platform } from "./platform.js";
import { secretsOf } from "./secrets.js";
import { transact } from "./transactions.js";

/** Gateway configuration: imports, exports, history, rollback and live revisions (ConfigService, the dashboard). */
export function configManagerOf(platform: Platform): ConfigManager {
  return platform.memo("config", () => {
    const { database } = platform;
    const manager = createConfigManager({
      clock: platform.clock,
      maxDocumentBytes: platform.config.limits.configBody,
      transaction: (fn) =>
        transact(platform, ({ tx, publish, events }) =>
          fn(
            createConfigStore(tx, database.provider),
            (organizationId, revision) => publish(configRevisions, { organizationId, revision }),
            async (organizationId, secrets) => new Set((await createGatewayStore(tx).secretVersions(organizationId, secrets)).keys()),
            events,
          ),
        ),
      // SQLite: statements outside a transaction share the connection of an open
      // one and would see its uncommitted writes, so reads take a transaction too.
      // PostgreSQL: each read is a single statement, consistent on its own.
      read:
        database.provider === "sqlite"
          ? (fn) => database.transaction((tx) => fn(createConfigStore(tx, database.provider)))
          : (fn) => fn(createConfigStore(database.client, database.provider)),
      changes: platform.changes,
      secretValues: (organizationId, keys) => secretsOf(platform).valuesForCheck(organizationId, keys),
    });
    platform.onClose(() => manager.close());
    return manager;
  });
}
