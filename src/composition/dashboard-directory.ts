import { createDashboardDirectory, type DashboardDirectory } from "../dashboard/operators/dashboard-directory.js";
import { createDashboardStore } from "../storage/dashboard-store.js";
import { createIdentityStore } from "../storage/identity-store.js";
import type { Platform } from "./platform.js";

/** The dashboard's listings (and the operator commands' reads of identities' sessions), without the dashboard itself. */
export function dashboardDirectoryOf(platform: Platform): DashboardDirectory {
  return platform.memo("dashboard-directory", () =>
    createDashboardDirectory({
      store: createDashboardStore(platform.database.client, platform.database.provider),
      passwords: createIdentityStore(platform.database.client),
    }),
  );
}
