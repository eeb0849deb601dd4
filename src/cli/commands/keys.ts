import { Option } from "commander";
import { notFound } from "../../domain/errors.js";
import { createTenancyStore } from "../../storage/tenancy-store.js";
import { formatTable } from "../format.js";
import { type CommandGroup, examples, helpGroups } from "../program.js";
import { requireOrganization, withApp } from "../with-app.js";

/** `gatehouse keys create|list|revoke`: API keys, on the data store directly. */
export const registerKeys: CommandGroup = (program, cli) => {
  const keys = program.command("keys").helpGroup(helpGroups.operator).description("create, list and revoke API keys");

  const create = keys
    .command("create")
    .description("create an API key for an organisation and print it, once")
    .requiredOption("--org <id>", "organisation id")
    .requiredOption("--name <name>", "a name that says what the key is for")
    .addOption(new Option("--role <role>", "the key's role").choices(["admin", "member"]).makeOptionMandatory())
    .addHelpText("after", '\nThe key is shown once and stored only as a hash. With --json: {"api_key": "gk_...", "id": "..."}.')
    .action(async (options: { org: string; name: string; role: string }) => {
      const created = await withApp(cli.out, "creating the key", (app) =>
        app.tenancy.createApiKey({ organizationId: options.org, name: options.name, role: options.role }),
      );
      cli.out.result({ api_key: created.apiKey, id: created.id }, () => `API key (shown once): ${created.apiKey}\nid: ${created.id}\n`);
    });
  examples(create, [
    'gatehouse keys create --org "$ORG" --name "ci deploy" --role member',
    'gatehouse keys create --org "$ORG" --name admin-bot --role admin --json',
  ]);

  const list = keys
    .command("list")
    .description("list an organisation's API keys (names and prefixes, never the keys)")
    .requiredOption("--org <id>", "organisation id")
    .action(async (options: { org: string }) => {
      const rows = await withApp(cli.out, "reading keys", async (app) => {
        await requireOrganization(app, options.org);
        return (await createTenancyStore(app.database.client).listApiKeys(options.org)).map((k) => ({
          id: k.id,
          name: k.name,
          prefix: k.prefix,
          role: k.role,
          created_at: k.createdAt.toISOString(),
          last_used_at: k.lastUsedAt?.toISOString() ?? null,
          revoked_at: k.revokedAt?.toISOString() ?? null,
        }));
      });
      cli.out.result(rows, () =>
        formatTable(
          ["ID", "PREFIX", "ROLE", "STATUS", "NAME"],
          rows.map((r) => [r.id, r.prefix, r.role, r.revoked_at ? "revoked" : "active", r.name]),
        ),
      );
    });
  examples(list, ['gatehouse keys list --org "$ORG"', "gatehouse keys list --org \"$ORG\" --json | jq -r '.[].id'"]);

  const revoke = keys
    .command("revoke")
    .description("revoke an API key: it is refused (401) from then on, on every instance")
    .argument("<key-id>", "the key's id (see gatehouse keys list)")
    .action(async (id: string) => {
      const revoked = await withApp(cli.out, "revoking the key", async (app) => {
        const done = await createTenancyStore(app.database.client).revokeApiKey(id, new Date());
        if (done) await app.credentialsChanged();
        return done;
      });
      if (!revoked) throw notFound("api_key_not_found", `no active API key with id ${id} (see gatehouse keys list)`);
      cli.out.result({ id, revoked: true }, () => `revoked ${id}\n`);
    });
  examples(revoke, ["gatehouse keys revoke 3f1c0e9a-2b6d-4c1e-9a57-0d9b8f6e2c41"]);
};
