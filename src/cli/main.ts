import { createApp } from "../app.js";
import { loadConfig } from "../config.js";
import { DomainError } from "../domain/errors.js";
import type { InitialCredentials } from "../domain/tenancy/tenancy.js";
import { createTenancyStore } from "../storage/tenancy-store.js";
import { parseArgs, requireFlag, UsageError, type ParsedArgs } from "./args.js";
import { withApp, type Command } from "./command.js";
import { secretsCommands, secretsUsage } from "./secrets-commands.js";
import { settingsCommands, settingsUsage } from "./settings-commands.js";

const usage = `gatehouse: gateway configuration, sealed secrets and passkey-first identity

Usage:
  gatehouse serve                      start the platform (what npm start runs)
  gatehouse init [--json]              initialise an empty data store and print the first credentials once
  gatehouse orgs create --name NAME [--json]
  gatehouse orgs list [--json]
  gatehouse keys create --org ID --name NAME --role admin|member [--json]
  gatehouse keys list --org ID [--json]
  gatehouse keys revoke KEY_ID
  gatehouse signing-key rotate --org ID [--json]
                                       a new key signs the organisation's session tokens from now on

Operator commands act on the data store directly (DATABASE_URL, GATEHOUSE_DATA_DIR), never through the API.
${settingsUsage}${secretsUsage}`;

/** Runs the command line; returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  let args: ParsedArgs;
  try {
    args = parseArgs(argv, ["json", "help"]);
  } catch (error) {
    return usageFailure(error);
  }
  const [group, action] = args.positionals;
  const commands: Record<string, Command> = {
    serve,
    init,
    "orgs create": orgsCreate,
    "orgs list": orgsList,
    "keys create": keysCreate,
    "keys list": keysList,
    "keys revoke": keysRevoke,
    "signing-key rotate": signingKeyRotate,
    ...secretsCommands,
    ...settingsCommands,
  };
  const command = commands[`${group} ${action}`] ?? (group ? commands[group] : undefined);
  if (args.switches.has("help")) {
    process.stdout.write(usage);
    return 0;
  }
  if (!command) return usageFailure(new UsageError(group ? `unknown command "${args.positionals.join(" ")}"` : "a command is needed"));
  try {
    return await command(args);
  } catch (error) {
    if (error instanceof UsageError) return usageFailure(error);
    if (error instanceof DomainError) {
      process.stderr.write(`gatehouse: ${error.message}\n`);
      for (const v of error.violations) process.stderr.write(`  ${v.field}: ${v.description}\n`);
      return 1;
    }
    process.stderr.write(`gatehouse: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}

function usageFailure(error: unknown): number {
  process.stderr.write(`gatehouse: ${error instanceof Error ? error.message : String(error)}\n\n${usage}`);
  return 2;
}

function printCredentials(credentials: InitialCredentials): void {
  process.stdout.write(
    [
      "",
      "Gatehouse is initialised. These credentials are shown ONCE and never again: store them now.",
      "",
      `  organization_id      ${credentials.organization_id}`,
      `  api_key (admin)      ${credentials.api_key}`,
      `  publishable_key      ${credentials.publishable_key}`,
      `  secret_key           ${credentials.secret_key}`,
      `  dashboard_setup_url  ${credentials.dashboard_setup_url}`,
      "",
      "",
    ].join("\n"),
  );
}

const serve: Command = async () => {
  const app = await createApp({ config: loadConfig() });
  const credentials = await app.initialize();
  const listening = await app.listen();
  if (credentials) printCredentials(credentials);
  app.logger.info({ ...listening }, "gatehouse listening");
  process.stdout.write(
    `Gatehouse platform API  ${listening.url}\n          gRPC (h2c)    ${listening.grpcUrl}\n          plant API     ${listening.sampleUrl}\n`,
  );
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      app.logger.info({ signal }, "shutting down");
      resolve();
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
  });
  await app.close();
  return 0;
};

const init: Command = async (args) =>
  withApp(async (app) => {
    const credentials = await app.initialize();
    if (!credentials) {
      process.stderr.write("gatehouse: the data store is already initialised; credentials are shown only once\n");
      return 1;
    }
    if (args.switches.has("json")) process.stdout.write(`${JSON.stringify(credentials, null, 2)}\n`);
    else printCredentials(credentials);
    return 0;
  });

const orgsCreate: Command = async (args) =>
  withApp(async (app) => {
    const org = await app.tenancy.createOrganization(requireFlag(args, "name"));
    const out = {
      organization_id: org.organizationId,
      publishable_key: org.publishableKey,
      secret_key: org.secretKey,
      dashboard_setup_url: org.dashboardSetupUrl,
    };
    process.stdout.write(args.switches.has("json") ? `${JSON.stringify(out, null, 2)}\n` : formatRecord(out));
    return 0;
  });

const orgsList: Command = async (args) =>
  withApp(async (app) => {
    const orgs = await createTenancyStore(app.database.client).listOrganizations();
    if (args.switches.has("json")) {
      process.stdout.write(
        `${JSON.stringify(
          orgs.map((o) => ({ organization_id: o.id, name: o.name, created_at: o.createdAt })),
          null,
          2,
        )}\n`,
      );
    } else {
      for (const o of orgs) process.stdout.write(`${o.id}  ${o.name}  ${o.createdAt.toISOString()}\n`);
    }
    return 0;
  });

const keysCreate: Command = async (args) =>
  withApp(async (app) => {
    const created = await app.tenancy.createApiKey({
      organizationId: requireFlag(args, "org"),
      name: requireFlag(args, "name"),
      role: requireFlag(args, "role"),
    });
    if (args.switches.has("json")) process.stdout.write(`${JSON.stringify({ api_key: created.apiKey, id: created.id })}\n`);
    else process.stdout.write(`API key (shown once): ${created.apiKey}\nid: ${created.id}\n`);
    return 0;
  });

const keysList: Command = async (args) =>
  withApp(async (app) => {
    const keys = await createTenancyStore(app.database.client).listApiKeys(requireFlag(args, "org"));
    const rows = keys.map((k) => ({
      id: k.id,
      name: k.name,
      prefix: k.prefix,
      role: k.role,
      created_at: k.createdAt.toISOString(),
      last_used_at: k.lastUsedAt?.toISOString() ?? null,
      revoked_at: k.revokedAt?.toISOString() ?? null,
    }));
    if (args.switches.has("json")) process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
    else for (const r of rows) process.stdout.write(`${r.id}  ${r.prefix}…  ${r.role}  ${r.name}${r.revoked_at ? "  (revoked)" : ""}\n`);
    return 0;
  });

const keysRevoke: Command = async (args) =>
  withApp(async (app) => {
    const id = args.positionals[2];
    if (!id) throw new UsageError("keys revoke needs the key id (see gatehouse keys list)");
    const revoked = await createTenancyStore(app.database.client).revokeApiKey(id, new Date());
    if (revoked) await app.credentialsChanged();
    if (!revoked) {
      process.stderr.write(`gatehouse: no active API key with id ${id}\n`);
      return 1;
    }
    process.stdout.write(`revoked ${id}\n`);
    return 0;
  });

const signingKeyRotate: Command = async (args) =>
  withApp(async (app) => {
    const { organizationId, key, retired } = await app.tenancy.rotateSessionSigningKey(requireFlag(args, "org"));
    const out = {
      organization_id: organizationId,
      kid: key.kid,
      created_at: key.createdAt.toISOString(),
      retired: retired.map((r) => ({ kid: r.kid, published_until: r.publishedUntil?.toISOString() ?? null })),
    };
    if (args.switches.has("json")) process.stdout.write(`${JSON.stringify(out)}\n`);
    else {
      process.stdout.write(`session signing key rotated: new sessions are signed by ${out.kid}\n`);
      for (const r of out.retired) process.stdout.write(`  ${r.kid} stays published until ${r.published_until}\n`);
    }
    return 0;
  });

function formatRecord(record: Record<string, string>): string {
  const width = Math.max(...Object.keys(record).map((k) => k.length));
  return `${Object.entries(record)
    .map(([k, v]) => `${k.padEnd(width)}  ${v}`)
    .join("\n")}\n`;
}
