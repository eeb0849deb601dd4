import { effectiveSettings, parseSettingsAssignments, settingsKeyHelp, settingsToJson } from "../../domain/identity/settings.js";
import { formatRecord } from "../format.js";
import { type CommandGroup, examples, helpGroups } from "../program.js";
import { requireOrganization, withStore } from "../with-app.js";

const keyWidth = Math.max(...Object.keys(settingsKeyHelp).map((key) => key.length));

const keysHelp = `
Keys:
${Object.entries(settingsKeyHelp)
  .map(([key, help]) => `  ${key.padEnd(keyWidth)}  ${help}`)
  .join("")}

Combinations that cannot work are refused with the rule they break: the RP ID is a
domain (not an IP address); every origin is https (http only for localhost); and every
origin lies within the RP ID ("the RP ID must be equal to the origin's effective domain,
or a registrable domain suffix of the origin's effective domain", WebAuthn Level 3).
An empty rp_id or origins follows PUBLIC_URL.`;

function formatSettings(settings: Record<string, unknown>): string {
  return formatRecord(
    Object.fromEntries(Object.entries(settings).map(([key, value]) => [key, Array.isArray(value) ? value.join(",") : String(value)])),
  );
}

/** `gatehouse settings get|set`: identity settings, on the data store directly (no key can change them). */
export const registerSettings: CommandGroup = (program, cli) => {
  const settings = program
    .command("settings")
    .helpGroup(helpGroups.operator)
    .description("show and change an organisation's identity settings (operators only)");

  const get = settings
    .command("get")
    .description("show the identity settings in effect, defaults resolved")
    .requiredOption("--org <id>", "organisation id")
    .action(async (options: { org: string }) => {
      const current = await withStore(cli.out, "reading settings", async (store) => {
        await requireOrganization(store, options.org);
        const { createIdentityStore } = await import("../../storage/identity-store.js");
        const stored = await createIdentityStore(store.database.client).findSettings(options.org);
        return settingsToJson(effectiveSettings(stored, store.config.publicUrl));
      });
      cli.out.result(current, () => formatSettings(current));
    });
  examples(get, ['gatehouse settings get --org "$ORG"', 'gatehouse settings get --org "$ORG" --json']);

  const set = settings
    .command("set")
    .description("change identity settings; every problem is listed at once and nothing changes")
    .requiredOption("--org <id>", "organisation id")
    .argument("<key=value...>", "settings to change (keys below)")
    .addHelpText("after", keysHelp)
    .action(async (assignments: string[], options: { org: string }) => {
      // Validate before opening the store: every problem of the command line is listed at once.
      const patch = parseSettingsAssignments(assignments);
      const saved = await withStore(cli.out, "saving settings", async (store) => {
        await requireOrganization(store, options.org);
        const [{ updateIdentitySettings }, { createIdentityStore }, { systemClock }] = await Promise.all([
          import("../../domain/identity/update-identity-settings.js"),
          import("../../storage/identity-store.js"),
          import("../../domain/clock.js"),
        ]);
        // The identity domain's change, the dashboard's too: checked as a whole, then saved.
        const stored = await updateIdentitySettings({
          store: createIdentityStore(store.database.client),
          clock: systemClock,
          publicUrl: store.config.publicUrl,
          organizationId: options.org,
          patch,
        });
        return settingsToJson(effectiveSettings(stored, store.config.publicUrl));
      });
      cli.out.result(saved, () => formatSettings(saved));
    });
  examples(set, [
    'gatehouse settings set --org "$ORG" password=true',
    'gatehouse settings set --org "$ORG" rp_id=example.com origins=https://example.com,https://app.example.com',
    'gatehouse settings set --org "$ORG" rp_id= origins=        # back to the defaults from PUBLIC_URL',
  ]);
};
