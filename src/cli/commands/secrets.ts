import { type Command, Option } from "commander";
import { CliError, UsageError } from "../errors.js";
import { formatTable } from "../format.js";
import type { Output } from "../output.js";
import { type CommandGroup, examples, helpGroups } from "../program.js";
import { createSecretsClient, type SecretWithValue, secretsClientConfig } from "../secrets-client.js";

/** `--tag a --tag b`: repeatable options collect into a list. */
export const collect = (value: string, previous: string[] | undefined) => [...(previous ?? []), value];

const apiEnvironment =
  "\nTalks to the public Secrets API: set GATEHOUSE_URL (default http://127.0.0.1:8080), GATEHOUSE_API_KEY\n" +
  "(an admin API key) and GATEHOUSE_ORG. Values are sealed and opened in this process; they never\n" +
  "travel or rest in clear.";

export function secretsClient() {
  return createSecretsClient(secretsClientConfig());
}

/** Options of a selection of secrets: pull and run. */
export interface Selection {
  env: string;
  name?: string[];
  tag?: string[];
  allowEmpty?: boolean;
}

/**
 * Retrieves a selection. An empty answer is an error unless --allow-empty:
 * a typo in the environment (`--env prodution`) would otherwise print nothing,
 * or start an application without its secrets, and exit 0.
 */
export async function pullSelection(out: Output, selection: Selection): Promise<SecretWithValue[]> {
  const client = secretsClient();
  const tags = selection.tag ?? [];
  const input = { environment: selection.env, names: selection.name ?? [], tags };
  // Generating the temporary RSA key pair can take a second on a slow machine.
  const secrets = await out.progress("generating a temporary key pair and retrieving secrets", () => client.pull(input));
  if (secrets.length > 0 || selection.allowEmpty) return secrets;
  if (tags.length > 0 && (await client.list(selection.env, [])).length > 0) {
    throw new CliError(
      "no_matching_secrets",
      `no secret in environment "${selection.env}" carries every tag of: ${tags.join(", ")} (--allow-empty accepts an empty selection)`,
    );
  }
  const environments = await client.environments();
  throw new CliError(
    "no_secrets",
    `no secrets in environment "${selection.env}"; ${
      environments.length > 0 ? `environments are: ${environments.join(", ")}` : "the organisation has no secrets yet"
    } (--allow-empty accepts an empty environment)`,
  );
}

/** Adds the selection options of pull and run. */
export function withSelection(command: Command): Command {
  return command
    .requiredOption("--env <environment>", "environment to read")
    .option("--name <name>", "only this secret (repeatable; an unknown name is an error)", collect)
    .option("--tag <tag>", "only secrets carrying this tag (repeatable: every tag)", collect)
    .option("--allow-empty", "succeed when nothing is selected (else: exit 1 naming the environments)");
}

/** Reads the value: all of stdin, byte for byte; typed at a terminal, the final newline is dropped. */
async function readValue(out: Output, name: string): Promise<Buffer> {
  const interactive = process.stdin.isTTY === true;
  if (interactive) out.note(`Value of ${name} (end with Enter, then Ctrl-D):`);
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));
  let value = Buffer.concat(chunks);
  if (interactive && value.at(-1) === 0x0a) value = value.subarray(0, value.at(-2) === 0x0d ? -2 : -1);
  return value;
}

/** `gatehouse secrets set|list|pull|delete`: clients of the public Secrets API. */
export const registerSecrets: CommandGroup = (program, cli) => {
  const secrets = program
    .command("secrets")
    .helpGroup(helpGroups.api)
    .description("store, list, retrieve and delete secrets (through the public API)")
    .addHelpText("after", apiEnvironment);

  const set = secrets
    .command("set")
    .description("read a value from stdin, seal it locally to the organisation key, and store it")
    .argument("<name>", "secret name, e.g. DATABASE_URL")
    .requiredOption("--env <environment>", "environment, e.g. production")
    .option("--tag <tag>", "a tag to attach (repeatable)", collect)
    .addHelpText("after", "\nThe value is all of stdin, byte for byte (typed at a terminal: end with Enter, then Ctrl-D).")
    .action(async (name: string, options: { env: string; tag?: string[] }) => {
      const value = await readValue(cli.out, name);
      const stored = await cli.out.progress(`sealing and storing ${name}`, () =>
        secretsClient().set({ name, environment: options.env, value, tags: options.tag ?? [] }),
      );
      value.fill(0);
      cli.out.result(
        stored,
        () =>
          `stored ${stored.name} in ${stored.environment}: version ${stored.version}${stored.tags.length ? ` [${stored.tags.join(", ")}]` : ""}\n`,
      );
    });
  examples(set, [
    "printf %s 'postgres://app:pw@db/app' | gatehouse secrets set DATABASE_URL --env production --tag db",
    "gatehouse secrets set TLS_KEY --env production < server.key",
  ]);

  const list = secrets
    .command("list")
    .description("list an environment's secrets: names, versions, tags, never values")
    .requiredOption("--env <environment>", "environment to list")
    .option("--tag <tag>", "only secrets carrying this tag (repeatable: every tag)", collect)
    .action(async (options: { env: string; tag?: string[] }) => {
      const listed = await cli.out.progress("listing secrets", () => secretsClient().list(options.env, options.tag ?? []));
      cli.out.result({ secrets: listed }, () =>
        formatTable(
          ["NAME", "VERSION", "UPDATED", "TAGS"],
          listed.map((s) => [s.name, String(s.version), s.updated_at, s.tags.join(",")]),
        ),
      );
    });
  examples(list, ["gatehouse secrets list --env production", "gatehouse secrets list --env production --tag db --json"]);

  const pull = withSelection(
    secrets.command("pull").description("retrieve secrets with a temporary key pair and print their values (dotenv or JSON)"),
  )
    .addOption(new Option("--format <format>", "output format (--json means json)").choices(["dotenv", "json"]))
    .addHelpText(
      "after",
      '\nAn environment with no secrets (a typo such as "prodution") is an error naming the environments\nthat exist, unless --allow-empty.',
    )
    .action(async (options: Selection & { format?: "dotenv" | "json" }) => {
      if (cli.out.json && options.format === "dotenv")
        throw new UsageError("--json prints JSON: leave out --format dotenv", "conflicting_options");
      const pulled = await pullSelection(cli.out, options);
      const format = cli.out.json ? "json" : (options.format ?? "dotenv");
      cli.out.write(
        format === "json" ? `${JSON.stringify(Object.fromEntries(pulled.map((s) => [s.name, s.value])), null, 2)}\n` : formatDotenv(pulled),
      );
    });
  examples(pull, [
    "gatehouse secrets pull --env production > .env",
    "gatehouse secrets pull --env production --name DATABASE_URL --format json",
    "gatehouse secrets pull --env preview --tag web --allow-empty",
  ]);

  const remove = secrets
    .command("delete")
    .description("delete a secret and every version of it from an environment")
    .argument("<name>", "secret name")
    .requiredOption("--env <environment>", "environment")
    .action(async (name: string, options: { env: string }) => {
      await cli.out.progress(`deleting ${name}`, () => secretsClient().remove(name, options.env));
      cli.out.result({ name, environment: options.env, deleted: true }, () => `deleted ${name} from ${options.env} (every version)\n`);
    });
  examples(remove, ["gatehouse secrets delete OLD_TOKEN --env staging"]);

  const rotateKey = secrets
    .command("rotate-key")
    .description("replace an organisation's sealing key (operator command: acts on the data store directly)")
    .requiredOption("--org <id>", "organisation id")
    .addHelpText(
      "after",
      "\nAn operator command, unlike the rest of this group: it reads DATABASE_URL, GATEHOUSE_DATA_DIR and\n" +
        "GATEHOUSE_MASTER_KEY as the server does, not GATEHOUSE_URL. Clients seal to the new key from now on;\n" +
        "values sealed to the old one are accepted for 24 hours more, then refused (409 sealing_key_outdated).\n" +
        'With --json: {"organization_id", "key_id", "previous": [{"key_id", "retired_at", "accepted_until"}]}.',
    )
    .action(async (options: { org: string }) => {
      const { requireOrganization, withStore } = await import("../with-app.js");
      const out = await withStore(
        cli.out,
        "rotating the sealing key",
        async (store) => {
          await requireOrganization(store, options.org);
          const { secretKeyringsOf } = await import("../../composition/secrets.js");
          const rotated = await secretKeyringsOf(store).rotate(options.org);
          return {
            organization_id: options.org,
            key_id: rotated.current.keyId,
            previous: rotated.previous.map((key) => ({
              key_id: key.keyId,
              retired_at: key.retiredAt.toISOString(),
              accepted_until: key.acceptedUntil.toISOString(),
            })),
          };
        },
        { masterKeys: true },
      );
      cli.out.result(out, () =>
        [
          `sealing key rotated: clients seal to ${out.key_id} from now on`,
          ...out.previous.map((key) => `  ${key.key_id} accepted until ${key.accepted_until}`),
          "",
        ].join("\n"),
      );
    });
  examples(rotateKey, ['gatehouse secrets rotate-key --org "$ORG"', 'gatehouse secrets rotate-key --org "$ORG" --json']);
};

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
