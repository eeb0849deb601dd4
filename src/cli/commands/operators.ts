import { InvalidArgumentError } from "commander";
import { type CommandGroup, examples, helpGroups } from "../program.js";
import { tenancyOf, withStore } from "../with-app.js";

/**
 * `gatehouse operators setup-link`: a new owner setup link for an organisation
 * nobody has set up yet (its earlier setup links stop working); and
 * `gatehouse operators sign-in-link`: the recovery of an operator account, a
 * one-time dashboard sign-in link that ends every other session of the account
 * and removes its password and passkeys (docs/dashboard.md, "One-time sign-in links").
 */
export const registerOperators: CommandGroup = (program, cli) => {
  const operators = program.command("operators").helpGroup(helpGroups.operator).description("help dashboard operators sign in");
  const link = operators
    .command("sign-in-link")
    .description(
      "recover an operator account: a one-time dashboard sign-in link that ends its other sessions and removes its password and passkeys; shown once",
    )
    .requiredOption("--email <address>", "the operator's e-mail address")
    .option("--ttl <seconds>", "how long the link works (60 to 86400; default 900)", (raw: string) => {
      const value = Number(raw);
      if (!/^\d+$/.test(raw) || value < 60 || value > 86_400) throw new InvalidArgumentError("a whole number of seconds from 60 to 86400");
      return value;
    })
    .addHelpText(
      "after",
      "\nThe link signs the operator in once, within its lifetime, whatever their password failures.\n" +
        "Signing in with it ends every other session of the account, removes its password and\n" +
        "passkeys and voids its other links: the person signing in then chooses their own password.\n" +
        "Give it only to the person of the address, over a channel you trust. Only its hash is stored.",
    )
    .action(async (options: { email: string; ttl?: number }) => {
      const issued = await withStore(cli.out, "issuing the sign-in link", async (store) => {
        const { issueOperatorSignInLink } = await import("../../composition/operator-links.js");
        return issueOperatorSignInLink(store, { email: options.email, ...(options.ttl !== undefined ? { ttlSeconds: options.ttl } : {}) });
      });
      const out = { url: issued.url, account_id: issued.accountId, expires_at: issued.expiresAt.toISOString() };
      cli.out.result(out, () => `${out.url}\n(works once, until ${out.expires_at})`);
    });
  examples(link, [
    "gatehouse operators sign-in-link --email ops@example.com",
    "gatehouse operators sign-in-link --email ops@example.com --ttl 300 --json",
  ]);

  const setup = operators
    .command("setup-link")
    .description("a new owner setup link for an organisation that has no operator yet (its earlier setup links stop working); shown once")
    .requiredOption("--org <id>", "the organisation's id")
    .addHelpText(
      "after",
      "\nThe link sets up the organisation's owner account, as the dashboard_setup_url that init and\n" +
        "orgs create print: for when that one was lost or has expired (after 7 days). Issuing it voids\n" +
        "every earlier setup link of the organisation. An organisation with an operator is refused\n" +
        "(exit 1): give the operator a one-time sign-in link instead (operators sign-in-link).\n" +
        "With --json: {organization_id, dashboard_setup_url, expires_at}. Only its hash is stored.",
    )
    .action(async (options: { org: string }) => {
      const issued = await withStore(cli.out, "issuing the setup link", async (store) =>
        (await tenancyOf(store)).issueOwnerSetupLink(options.org),
      );
      const out = { organization_id: options.org, dashboard_setup_url: issued.url, expires_at: issued.expiresAt.toISOString() };
      cli.out.result(out, () => `${out.dashboard_setup_url}\n(works once, until ${out.expires_at}; earlier setup links no longer work)`);
    });
  examples(setup, ['gatehouse operators setup-link --org "$ORG"', 'gatehouse operators setup-link --org "$ORG" --json']);
};
