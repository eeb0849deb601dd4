import { DomainError } from "../../domain/errors.js";
import type { InitialCredentials } from "../../domain/tenancy/tenancy.js";
import { type CommandGroup, examples, helpGroups } from "../program.js";
import { tenancyOf, withStore } from "../with-app.js";

/** The first credentials, as `init` and the first `serve` print them (once). */
export function formatCredentials(credentials: InitialCredentials): string {
  return [
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
  ].join("\n");
}

/** `gatehouse init`: docs/cli.md, "`gatehouse init`". */
export const registerInit: CommandGroup = (program, cli) => {
  const init = program
    .command("init")
    .helpGroup(helpGroups.operator)
    .description("initialise an empty data store and print the first credentials, once")
    .addHelpText(
      "after",
      "\nCreates the default organisation, an admin API key, its publishable and secret keys and the\n" +
        "owner's one-time dashboard setup link. Exits 1 if the store is already initialised.\n" +
        "With --json: {organization_id, api_key, publishable_key, secret_key, dashboard_setup_url}.",
    )
    .action(async () => {
      const credentials = await withStore(
        cli.out,
        "initialising the data store",
        async (store) => {
          try {
            return await (await tenancyOf(store)).initialize();
          } catch (error) {
            if (error instanceof DomainError && error.reason === "already_initialized") return null;
            throw error;
          }
        },
        { masterKeys: true },
      );
      if (!credentials) {
        throw new DomainError(
          "already_exists",
          "already_initialized",
          "the data store is already initialised; its first credentials were shown once and cannot be shown again (create more with gatehouse keys create)",
        );
      }
      if (cli.out.json) cli.out.write(`${JSON.stringify(credentials, null, 2)}\n`);
      else cli.out.write(formatCredentials(credentials));
    });
  examples(init, [
    "gatehouse init",
    "gatehouse init --json > first-credentials.json",
    "DATABASE_URL=postgresql://localhost/gatehouse gatehouse init --json",
  ]);
};
