import { DomainError, invalidArgument, type Violation } from "../../domain/errors.js";
import { effectiveSettings, parseSettingsAssignments, settingsKeyHelp, settingsToJson } from "../../domain/identity/settings.js";
import { formatRecord } from "../format.js";
import { type CommandGroup, examples, helpGroups } from "../program.js";
import { type OperatorStore, requireOrganization, withStore } from "../with-app.js";

/** The secrets area's setting, stored with the organisation (docs/secrets.md, "Rotating the sealing key"). */
const rotationDaysKey = "sealing_key_rotation_days";
const maxRotationDays = 3650;
const keyHelp: Record<string, string> = {
  ...settingsKeyHelp,
  [rotationDaysKey]: `days after which the sealing key is rotated when next read, 1 to ${maxRotationDays}; 0: never (default 0)`,
};

const keyWidth = Math.max(...Object.keys(keyHelp).map((key) => key.length));

const keysHelp = `
Keys:
${Object.entries(keyHelp)
  .map(([key, help]) => `  ${key.padEnd(keyWidth)}  ${help}`)
  .join("\n")}

Combinations that cannot work are refused with the rule they break: the RP ID is a
domain (not an IP address); every origin is https (http only for localhost); and every
origin lies within the RP ID ("the RP ID must be equal to the origin's effective domain,
or a registrable domain suffix of the origin's effective domain", WebAuthn Level 3).
An empty rp_id or origins follows PUBLIC_URL.`;

/**
 * Splits sealing_key_rotation_days off the identity settings' assignments and
 * parses both, listing every problem of the command line at once.
 */
function parseAssignments(assignments: readonly string[]) {
  const violations: Violation[] = [];
  const identity = assignments.filter((assignment) => !assignment.startsWith(`${rotationDaysKey}=`));
  const rotation = assignments.filter((assignment) => assignment.startsWith(`${rotationDaysKey}=`));
  let rotationDays: number | undefined;
  if (rotation.length > 1) violations.push({ field: rotationDaysKey, description: "is given more than once" });
  for (const assignment of rotation) {
    const raw = assignment.slice(rotationDaysKey.length + 1);
    rotationDays = Number(raw);
    if (!/^\d+$/.test(raw) || rotationDays > maxRotationDays) {
      violations.push({
        field: rotationDaysKey,
        description: `must be a whole number of days from 0 (never) to ${maxRotationDays}, got "${raw}"`,
      });
    }
  }
  let patch: ReturnType<typeof parseSettingsAssignments> = {};
  if (identity.length > 0 || rotation.length === 0) {
    try {
      patch = parseSettingsAssignments(identity);
    } catch (error) {
      if (!(error instanceof DomainError) || error.kind !== "invalid_argument") throw error;
      violations.unshift(...error.violations);
    }
  }
  if (violations.length > 0) throw invalidArgument(violations);
  return { patch, rotationDays, changesIdentity: identity.length > 0 };
}

/** The organisation settings domain over the command's store. */
async function organizationSettingsOf(store: OperatorStore) {
  return (await import("../../composition/settings.js")).organizationSettingsOf(store);
}

/** The settings as get and set print them: the identity settings in effect, then the secrets area's. */
async function settingsOf(store: OperatorStore, organizationId: string) {
  const settings = await organizationSettingsOf(store);
  return {
    ...settingsToJson(effectiveSettings(await settings.identitySettings(organizationId), store.config.publicUrl)),
    [rotationDaysKey]: await settings.sealingKeyRotationDays(organizationId),
  };
}

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
    .description("show and change an organisation's identity settings and sealing-key rotation (operators only)");

  const get = settings
    .command("get")
    .description("show the identity settings in effect, defaults resolved")
    .requiredOption("--org <id>", "organisation id")
    .action(async (options: { org: string }) => {
      const current = await withStore(cli.out, "reading settings", async (store) => {
        await requireOrganization(store, options.org);
        return settingsOf(store, options.org);
      });
      cli.out.result(current, () => formatSettings(current));
    });
  examples(get, ['gatehouse settings get --org "$ORG"', 'gatehouse settings get --org "$ORG" --json']);

  const set = settings
    .command("set")
    .description("change identity settings and sealing_key_rotation_days; every problem is listed at once and nothing changes")
    .requiredOption("--org <id>", "organisation id")
    .argument("<key=value...>", "settings to change (keys below)")
    .addHelpText("after", keysHelp)
    .action(async (assignments: string[], options: { org: string }) => {
      // Validate before opening the store: every problem of the command line is listed at once.
      const { patch, rotationDays, changesIdentity } = parseAssignments(assignments);
      const saved = await withStore(cli.out, "saving settings", async (store) => {
        await requireOrganization(store, options.org);
        // One transaction: every setting is saved, or (an inconsistent combination) none is; a new rotation schedule is
        // announced (running instances forget the organisation's cached keys, and with them the old schedule).
        await (await organizationSettingsOf(store)).update(options.org, {
          ...(changesIdentity ? { identity: patch } : {}),
          ...(rotationDays !== undefined ? { sealingKeyRotationDays: rotationDays } : {}),
        });
        return settingsOf(store, options.org);
      });
      cli.out.result(saved, () => formatSettings(saved));
    });
  examples(set, [
    'gatehouse settings set --org "$ORG" password=true',
    'gatehouse settings set --org "$ORG" rp_id=example.com origins=https://example.com,https://app.example.com',
    'gatehouse settings set --org "$ORG" rp_id= origins=        # back to the defaults from PUBLIC_URL',
    'gatehouse settings set --org "$ORG" sealing_key_rotation_days=30',
  ]);
};
