import { createOrganizationSettings, type OrganizationSettings } from "../domain/settings/organization-settings.js";
import { createIdentityStore } from "../storage/identity-store.js";
import { createSecretsStore } from "../storage/secrets-store.js";
import type { Platform } from "./platform.js";
import { transact } from "./transactions.js";

/** An organisation's identity settings and sealing-key rotation (the dashboard, `gatehouse settings`). */
export function organizationSettingsOf(platform: Platform): OrganizationSettings {
  return platform.memo("organization-settings", () =>
    createOrganizationSettings({
      identities: createIdentityStore(platform.database.client),
      secrets: createSecretsStore(platform.database.client),
      transaction: (fn) =>
        transact(platform, ({ tx, publish }) => fn({ identities: createIdentityStore(tx), secrets: createSecretsStore(tx), publish })),
      clock: platform.clock,
      publicUrl: platform.config.publicUrl,
    }),
  );
}
