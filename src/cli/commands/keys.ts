import { Option } from "commander";
import { notFound } from "../../domain/errors.js";
import { UsageError } from "../errors.js";
import { formatTable } from "../format.js";
import { type CommandGroup, examples, helpGroups } from "../program.js";
import { requireOrganization, tenancyOf, withStore } from "../with-app.js";
import { withGatewayCredentials } from "./consumers.js";

/** What a key is for: an API key (gk_, the platform API) or a gateway key (gw_, a data-plane gateway). */
type KeyKind = "api" | "gateway";

const kindOption = () =>
  new Option("--kind <kind>", "api: an API key (gk_) of the platform API; gateway: a data-plane gateway's key (gw_)")
    .choices(["api", "gateway"])
    .default("api");

/** `gatehouse keys create|list|revoke`: API keys and gateway keys, on the data store directly. */
export const registerKeys: CommandGroup = (program, cli) => {
  const keys = program.command("keys").helpGroup(helpGroups.operator).description("create, list and revoke API keys and gateway keys");

  const create = keys
    .command("create")
    .description("create an API key (or, with --kind gateway, a gateway key) for an organisation and print it, once")
    .requiredOption("--org <id>", "organisation id")
    .requiredOption("--name <name>", "a name that says what the key is for")
    .addOption(kindOption())
    .addOption(new Option("--role <role>", "the API key's role (API keys only, required for them)").choices(["admin", "member"]))
    .addHelpText(
      "after",
      '\nThe key is shown once and stored only as a hash.\nWith --json: {"api_key": "gk_...", "id": "..."}, or for --kind gateway {"gateway_key": "gw_...", "id": "..."}.\nGive a gateway key to the gateway as GATEHOUSE_GATEWAY_KEY.',
    )
    .action(async (options: { org: string; name: string; kind: KeyKind; role?: string }) => {
      if (options.kind === "gateway") {
        if (options.role !== undefined) throw new UsageError("a gateway key has no role: leave out --role", "conflicting_options");
        const created = await withStore(cli.out, "creating the gateway key", async (store) => {
          await requireOrganization(store, options.org);
          return withGatewayCredentials(store, (credentials) =>
            credentials.createGatewayKey({ organizationId: options.org, name: options.name }),
          );
        });
        const out = { gateway_key: created.gatewayKey, id: created.key.id };
        cli.out.result(out, () => `gateway key (shown once): ${out.gateway_key}\nid: ${out.id}\n`);
        return;
      }
      const role = options.role;
      if (role === undefined)
        throw new UsageError("required option '--role <role>' not specified (an API key needs one)", "missing_option");
      const created = await withStore(cli.out, "creating the key", async (store) =>
        (await tenancyOf(store)).createApiKey({ organizationId: options.org, name: options.name, role }),
      );
      cli.out.result({ api_key: created.apiKey, id: created.id }, () => `API key (shown once): ${created.apiKey}\nid: ${created.id}\n`);
    });
  examples(create, [
    'gatehouse keys create --org "$ORG" --name "ci deploy" --role member',
    'gatehouse keys create --org "$ORG" --name admin-bot --role admin --json',
    'gatehouse keys create --org "$ORG" --kind gateway --name edge-1 --json',
  ]);

  const list = keys
    .command("list")
    .description("list an organisation's API keys, or its gateway keys (names and prefixes, never the keys)")
    .requiredOption("--org <id>", "organisation id")
    .addOption(kindOption())
    .action(async (options: { org: string; kind: KeyKind }) => {
      if (options.kind === "gateway") {
        const rows = await withStore(cli.out, "reading gateway keys", async (store) => {
          await requireOrganization(store, options.org);
          const listed = await withGatewayCredentials(store, (credentials) =>
            credentials.listGatewayKeys(options.org, { includeRevoked: true }),
          );
          return listed.map((k) => ({
            id: k.id,
            name: k.name,
            prefix: k.prefix,
            created_at: k.createdAt.toISOString(),
            last_used_at: k.lastUsedAt?.toISOString() ?? null,
            revoked_at: k.revokedAt?.toISOString() ?? null,
          }));
        });
        cli.out.result(rows, () =>
          formatTable(
            ["ID", "PREFIX", "STATUS", "NAME"],
            rows.map((r) => [r.id, r.prefix, r.revoked_at ? "revoked" : "active", r.name]),
          ),
        );
        return;
      }
      const rows = await withStore(cli.out, "reading keys", async (store) => {
        await requireOrganization(store, options.org);
        return (await (await tenancyOf(store)).listApiKeys(options.org)).map((k) => ({
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
  examples(list, [
    'gatehouse keys list --org "$ORG"',
    "gatehouse keys list --org \"$ORG\" --json | jq -r '.[].id'",
    'gatehouse keys list --org "$ORG" --kind gateway',
  ]);

  const revoke = keys
    .command("revoke")
    .description("revoke an API key or a gateway key: it is refused (401) from then on, on every instance")
    .argument("<key-id>", "the key's id (see gatehouse keys list)")
    .addOption(kindOption())
    .addOption(new Option("--org <id>", "the key's organisation (required for a gateway key; for an API key, checked when given)"))
    .action(async (id: string, options: { kind: KeyKind; org?: string }) => {
      const organizationId = options.org;
      if (options.kind === "gateway") {
        if (organizationId === undefined) {
          throw new UsageError(
            "required option '--org <id>' not specified (a gateway key is revoked within its organisation)",
            "missing_option",
          );
        }
        await withStore(cli.out, "revoking the gateway key", async (store) => {
          await requireOrganization(store, organizationId);
          await withGatewayCredentials(store, async (credentials) => {
            // A key that is revoked already is an error, as for API keys: the command did nothing.
            const all = await credentials.listGatewayKeys(organizationId, { includeRevoked: true });
            if (all.find((k) => k.id === id.trim().toLowerCase())?.revokedAt) {
              throw notFound("gateway_key_not_found", `the gateway key ${id} is revoked already (see gatehouse keys list --kind gateway)`);
            }
            // An unknown id (or one of another organisation) is not_found, a malformed one invalid: the domain's words.
            await credentials.revokeGatewayKey(organizationId, id);
          });
        });
        cli.out.result({ id, revoked: true }, () => `revoked ${id}\n`);
        return;
      }
      const { revoked } = await withStore(cli.out, "revoking the key", async (store) => {
        if (organizationId !== undefined) await requireOrganization(store, organizationId);
        return (await tenancyOf(store)).revokeApiKey({ apiKeyId: id, ...(organizationId !== undefined ? { organizationId } : {}) });
      });
      if (!revoked) throw notFound("api_key_not_found", `no active API key with id ${id} (see gatehouse keys list)`);
      cli.out.result({ id, revoked: true }, () => `revoked ${id}\n`);
    });
  examples(revoke, [
    "gatehouse keys revoke 3f1c0e9a-2b6d-4c1e-9a57-0d9b8f6e2c41",
    'gatehouse keys revoke --kind gateway --org "$ORG" 8d2e4b10-7c3a-4f5e-b1d6-2a9c0e7f4b35',
  ]);
};
