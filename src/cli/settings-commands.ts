import type { App } from "../app.js";
import { DomainError } from "../domain/errors.js";
import { effectiveSettings, parseSettingsAssignments, settingsKeyHelp, settingsToJson } from "../domain/identity/settings.js";
import { createIdentityStore } from "../storage/identity-store.js";
import { createTenancyStore } from "../storage/tenancy-store.js";
import { requireFlag, UsageError } from "./args.js";
import { withApp, type Command } from "./command.js";

const keyWidth = Math.max(...Object.keys(settingsKeyHelp).map((key) => key.length));

export const settingsUsage = `
Identity settings (operators only; no API key, publishable or secret key can change them):
  gatehouse settings get --org ID [--json]
  gatehouse settings set --org ID KEY=VALUE...
${Object.entries(settingsKeyHelp)
  .map(([key, help]) => `    ${key.padEnd(keyWidth)}  ${help}`)
  .join("\n")}
`;

async function requireOrganization(app: App, organizationId: string): Promise<void> {
  if (!(await createTenancyStore(app.database.client).findOrganization(organizationId))) {
    throw new DomainError("not_found", "organization_not_found", `organisation ${organizationId} does not exist`);
  }
}

function print(settings: Record<string, unknown>, json: boolean): void {
  if (json) {
    process.stdout.write(`${JSON.stringify(settings, null, 2)}\n`);
    return;
  }
  for (const [key, value] of Object.entries(settings)) {
    process.stdout.write(`${key.padEnd(keyWidth)}  ${Array.isArray(value) ? value.join(",") : String(value)}\n`);
  }
}

/** `gatehouse settings get|set`: identity settings, acting on the data store directly. */
export const settingsCommands: Record<string, Command> = {
  "settings get": async (args) => {
    const organizationId = requireFlag(args, "org");
    return withApp(async (app) => {
      await requireOrganization(app, organizationId);
      const stored = await createIdentityStore(app.database.client).findSettings(organizationId);
      print(settingsToJson(effectiveSettings(stored, app.config.publicUrl)), args.switches.has("json"));
      return 0;
    });
  },

  "settings set": async (args) => {
    const organizationId = requireFlag(args, "org");
    const assignments = args.positionals.slice(2);
    if (assignments.length === 0) throw new UsageError("settings set needs at least one KEY=VALUE");
    // Validate before opening the store: every problem is listed at once.
    const patch = parseSettingsAssignments(assignments);
    return withApp(async (app) => {
      await requireOrganization(app, organizationId);
      const saved = await createIdentityStore(app.database.client).saveSettings(organizationId, patch, new Date());
      print(settingsToJson(effectiveSettings(saved, app.config.publicUrl)), args.switches.has("json"));
      return 0;
    });
  },
};
