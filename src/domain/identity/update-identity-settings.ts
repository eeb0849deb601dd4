import type { IdentitySettingsPatch, IdentitySettingsRecord, IdentityStore } from "./identity-store.js";
import type { Clock } from "../clock.js";
import { checkIdentitySettings } from "./settings.js";

export interface UpdateIdentitySettingsOptions {
  store: Pick<IdentityStore, "findSettings" | "saveSettings">;
  clock: Clock;
  /** PUBLIC_URL: what an empty rp_id or origins follows. */
  publicUrl: string;
  organizationId: string;
  /** The settings to change (parseSettingsAssignments); the others keep their value. */
  patch: IdentitySettingsPatch;
}

/**
 * Changes an organisation's identity settings, for operators (the dashboard's
 * UpdateIdentitySettings and `gatehouse settings set`): the settings that
 * result must be consistent (checkIdentitySettings: the RP ID a domain, every
 * origin https and within it), else invalid_argument listing every problem
 * and nothing is saved. Answers the stored settings.
 */
export async function updateIdentitySettings(options: UpdateIdentitySettingsOptions): Promise<IdentitySettingsRecord> {
  const { store, organizationId, patch } = options;
  const stored = await store.findSettings(organizationId);
  checkIdentitySettings({ ...stored, ...patch }, options.publicUrl);
  return store.saveSettings(organizationId, patch, options.clock());
}
