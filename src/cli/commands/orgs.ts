import { formatRecord, formatTable } from "../format.js";
import { type CommandGroup, examples, helpGroups } from "../program.js";
import { tenancyOf, withStore } from "../with-app.js";

/** `gatehouse orgs create|list`: organisations, on the data store directly. */
export const registerOrgs: CommandGroup = (program, cli) => {
  const orgs = program.command("orgs").helpGroup(helpGroups.operator).description("create and list organisations");

  const create = orgs
    .command("create")
    .description("create an organisation with its publishable and secret keys and an owner setup link (shown once)")
    .requiredOption("--name <name>", "the organisation's display name")
    .action(async (options: { name: string }) => {
      const org = await withStore(cli.out, "creating the organisation", async (store) =>
        (await tenancyOf(store)).createOrganization(options.name),
      );
      const out = {
        organization_id: org.organizationId,
        publishable_key: org.publishableKey,
        secret_key: org.secretKey,
        dashboard_setup_url: org.dashboardSetupUrl,
      };
      cli.out.result(out, () => formatRecord(out));
    });
  examples(create, ['gatehouse orgs create --name "Acme"', 'gatehouse orgs create --name "Acme" --json']);

  const list = orgs
    .command("list")
    .description("list every organisation")
    .action(async () => {
      const rows = await withStore(cli.out, "reading organisations", async (store) => {
        return (await (await tenancyOf(store)).listOrganizations()).map((o) => ({
          organization_id: o.id,
          name: o.name,
          created_at: o.createdAt.toISOString(),
        }));
      });
      cli.out.result(rows, () =>
        formatTable(
          ["ORGANIZATION_ID", "CREATED", "NAME"],
          rows.map((r) => [r.organization_id, r.created_at, r.name]),
        ),
      );
    });
  examples(list, ["gatehouse orgs list", "gatehouse orgs list --json"]);
};
