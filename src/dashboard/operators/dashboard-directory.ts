import type { IdentityStore } from "../../domain/identity/identity-store.js";
import type { DashboardStore } from "./dashboard-store.js";

/**
 * What the dashboard lists and the operator commands read beyond the areas'
 * own services: its pages' listings, paged in the database. Reads only: every
 * change goes through a domain service.
 */
export function createDashboardDirectory(deps: {
  store: Pick<
    DashboardStore,
    | "listIdentityKeys"
    | "listApiKeys"
    | "searchIdentities"
    | "countLiveSessions"
    | "listIdentitySessions"
    | "listSecretEnvironments"
    | "listSecrets"
  >;
  passwords: Pick<IdentityStore, "findPasswordHash">;
}) {
  const { store } = deps;
  return {
    listIdentityKeys: store.listIdentityKeys.bind(store),
    listApiKeys: store.listApiKeys.bind(store),
    searchIdentities: store.searchIdentities.bind(store),
    countLiveSessions: store.countLiveSessions.bind(store),
    listIdentitySessions: store.listIdentitySessions.bind(store),
    listSecretEnvironments: store.listSecretEnvironments.bind(store),
    listSecrets: store.listSecrets.bind(store),
    /** Whether the identity has a password (never the hash). */
    async hasPassword(organizationId: string, identityId: string): Promise<boolean> {
      return (await deps.passwords.findPasswordHash(organizationId, identityId)) !== null;
    },
  };
}

export type DashboardDirectory = ReturnType<typeof createDashboardDirectory>;
