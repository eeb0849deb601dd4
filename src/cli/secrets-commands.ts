import { requireFlag, UsageError, type ParsedArgs } from "./args.js";
import type { Command } from "./command.js";
import { createSecretsClient, secretsClientConfig, type SecretMetadata, type SecretWithValue } from "./secrets-client.js";
import { runWithEnvironment } from "./secrets-run.js";

/**
 * `gatehouse secrets ...` and `gatehouse run`: clients of the public Secrets API
 * (GATEHOUSE_URL, GATEHOUSE_API_KEY, GATEHOUSE_ORG). Values are sealed and opened
 * in this process; they never travel or rest in clear.
 */
export const secretsUsage = `
Secrets (public API; set GATEHOUSE_URL, GATEHOUSE_API_KEY (admin), GATEHOUSE_ORG):
  gatehouse secrets set NAME --env ENV [--tag TAG]... [--json]
                                       read the value from stdin, seal it locally, store it
  gatehouse secrets list --env ENV [--tag TAG]... [--json]
  gatehouse secrets pull --env ENV [--name NAME]... [--tag TAG]... [--format dotenv|json]
                                       retrieve with a temporary key pair and print the values
  gatehouse secrets delete NAME --env ENV
  gatehouse run --env ENV [--name NAME]... [--tag TAG]... -- COMMAND [ARGS...]
                                       run COMMAND with the secrets in its environment
`;

const many = (args: ParsedArgs, name: string) => args.flags.get(name) ?? [];

function client() {
  return createSecretsClient(secretsClientConfig());
}

function secretName(args: ParsedArgs, command: string): string {
  const name = args.positionals[2];
  if (!name) throw new UsageError(`${command} needs the secret's NAME`);
  if (args.positionals.length > 3) throw new UsageError(`${command} takes one NAME, got "${args.positionals.slice(2).join(" ")}"`);
  return name;
}

/** Reads the value: all of stdin, byte for byte; typed at a terminal, the final newline is dropped. */
async function readValue(name: string): Promise<Buffer> {
  const interactive = process.stdin.isTTY === true;
  if (interactive) process.stderr.write(`Value of ${name} (end with Enter, then Ctrl-D):\n`);
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));
  let value = Buffer.concat(chunks);
  if (interactive && value.at(-1) === 0x0a) value = value.subarray(0, value.at(-2) === 0x0d ? -2 : -1);
  return value;
}

const set: Command = async (args) => {
  const name = secretName(args, "secrets set");
  const environment = requireFlag(args, "env");
  const value = await readValue(name);
  const stored = await client().set({ name, environment, value, tags: many(args, "tag") });
  value.fill(0);
  if (args.switches.has("json")) process.stdout.write(`${JSON.stringify(stored, null, 2)}\n`);
  else
    process.stdout.write(
      `stored ${stored.name} in ${stored.environment}: version ${stored.version}${stored.tags.length ? ` [${stored.tags.join(", ")}]` : ""}\n`,
    );
  return 0;
};

const list: Command = async (args) => {
  const secrets = await client().list(requireFlag(args, "env"), many(args, "tag"));
  if (args.switches.has("json")) process.stdout.write(`${JSON.stringify({ secrets }, null, 2)}\n`);
  else process.stdout.write(formatTable(secrets));
  return 0;
};

const pull: Command = async (args) => {
  const format = args.flags.get("format")?.at(-1) ?? "dotenv";
  if (format !== "dotenv" && format !== "json") throw new UsageError(`--format is dotenv or json, got "${format}"`);
  const secrets = await client().pull({ environment: requireFlag(args, "env"), names: many(args, "name"), tags: many(args, "tag") });
  process.stdout.write(format === "json" ? formatJson(secrets) : formatDotenv(secrets));
  return 0;
};

const remove: Command = async (args) => {
  const name = secretName(args, "secrets delete");
  const environment = requireFlag(args, "env");
  await client().remove(name, environment);
  process.stdout.write(`deleted ${name} from ${environment} (every version)\n`);
  return 0;
};

/**
 * Like `doppler run` and `infisical run`: the command inherits our environment
 * plus the secrets (a secret wins over a variable of the same name), except
 * GATEHOUSE_API_KEY, so the command does not receive the admin key it never asked for.
 */
const run: Command = async (args) => {
  const [command, ...commandArgs] = args.rest;
  if (args.positionals.length > 1) {
    throw new UsageError(
      `put the command after --: gatehouse run --env ${args.flags.get("env")?.at(-1) ?? "ENV"} -- ${args.positionals.slice(1).join(" ")} ...`,
    );
  }
  if (!command) throw new UsageError("run needs the command after --, e.g. gatehouse run --env production -- node server.js");
  const secrets = await client().pull({ environment: requireFlag(args, "env"), names: many(args, "name"), tags: many(args, "tag") });
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.GATEHOUSE_API_KEY;
  for (const secret of secrets) env[secret.name] = secret.value;
  return runWithEnvironment(command, commandArgs, env);
};

export const secretsCommands: Record<string, Command> = {
  "secrets set": set,
  "secrets list": list,
  "secrets pull": pull,
  "secrets delete": remove,
  run,
};

function formatTable(secrets: SecretMetadata[]): string {
  if (secrets.length === 0) return "";
  const rows = [["NAME", "VERSION", "UPDATED", "TAGS"], ...secrets.map((s) => [s.name, String(s.version), s.updated_at, s.tags.join(",")])];
  const widths = [0, 1, 2].map((i) => Math.max(...rows.map((r) => (r[i] as string).length)));
  return (
    rows
      .map((r) =>
        r
          .map((cell, i) => (i < 3 ? cell.padEnd(widths[i] as number) : cell))
          .join("  ")
          .trimEnd(),
      )
      .join("\n") + "\n"
  );
}

function formatJson(secrets: SecretWithValue[]): string {
  return `${JSON.stringify(Object.fromEntries(secrets.map((s) => [s.name, s.value])), null, 2)}\n`;
}

/**
 * dotenv lines. A value without quotes or line breaks goes in single quotes,
 * which dotenv parsers (Node dotenv, python-dotenv, Docker Compose) take
 * literally; any other value goes in double quotes with \\ \" \n \r and \$ escaped.
 */
export function formatDotenv(secrets: readonly { name: string; value: string }[]): string {
  return secrets
    .map(({ name, value }) => {
      if (!/['\n\r]/.test(value)) return `${name}='${value}'\n`;
      const escaped = value.replace(/[\\"$\n\r]/g, (c) => ({ "\\": "\\\\", '"': '\\"', $: "\\$", "\n": "\\n", "\r": "\\r" })[c] as string);
      return `${name}="${escaped}"\n`;
    })
    .join("");
}
