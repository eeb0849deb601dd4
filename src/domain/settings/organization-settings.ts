import type { Publish } from "../changes/topic.js";
import { sealingKeyChanges } from "../changes/topics.js";
import type { Clock } from "../clock.js";
import type { IdentitySettingsPatch, IdentitySettingsRecord, IdentityStore } from "../identity/identity-store.js";
import { updateIdentitySettings } from "../identity/update-identity-settings.js";
import type { SecretsStore } from "../secrets/secrets-store.js";

export interface OrganizationSettingsDeps {
  identities: Pick<IdentityStore, "findSettings">;
  secrets: Pick<SecretsStore, "findSealingKeyRotationDays">;
  transaction<T>(fn: (scope: { identities: IdentityStore; secrets: SecretsStore; publish: Publish }) => Promise<T>): Promise<T>;
  clock: Clock;
  /** PUBLIC_URL: what an empty rp_id or origins follows. */
  publicUrl: string;
}

/**
 * An organisation's settings as operators change them (the dashboard's
 * identity settings, `gatehouse settings get|set`): the identity settings and
 * the secrets area's sealing_key_rotation_days, changed together or not at all.
 */
export function createOrganizationSettings(deps: OrganizationSettingsDeps) {
  return {
    /** The stored identity settings (null: every default). */
    identitySettings: (organizationId: string): Promise<IdentitySettingsRecord | null> => deps.identities.findSettings(organizationId),
    async sealingKeyRotationDays(organizationId: string): Promise<number> {
      return (await deps.secrets.findSealingKeyRotationDays(organizationId)) ?? 0;
    },
    /**
     * Saves what is given in one transaction: the identity settings checked as
     * a whole (updateIdentitySettings), the rotation schedule announced to
     * every instance (they forget the organisation's cached keys).
     */
    async update(organizationId: string, change: { identity?: IdentitySettingsPatch; sealingKeyRotationDays?: number }): Promise<void> {
      await deps.transaction(async ({ identities, secrets, publish }) => {
        if (change.identity) {
          await updateIdentitySettings({
            store: identities,
            clock: deps.clock,
            publicUrl: deps.publicUrl,
            organizationId,
            patch: change.identity,
          });
        }
        if (change.sealingKeyRotationDays !== undefined) {
          await secrets.setSealingKeyRotationDays(organizationId, change.sealingKeyRotationDays);
          publish(sealingKeyChanges, organizationId);
        }
      });
    },
  };
}

export type OrganizationSettings = ReturnType<typeof createOrganizationSettings>;
