import { InvalidArgumentError } from "commander";
import { type CommandGroup, examples, helpGroups } from "../program.js";
import { withApp } from "../with-app.js";

/** `gatehouse operators sign-in-link`: a one-time dashboard sign-in link for an operator locked out of password sign-in. */
export const registerOperators: CommandGroup = (program, cli) => {
  const operators = program.command("operators").helpGroup(helpGroups.operator).description("help dashboard operators sign in");
  const link = operators
    .command("sign-in-link")
    .description("issue a one-time dashboard sign-in link for an operator (for one locked out of password sign-in); shown once")
    .requiredOption("--email <address>", "the operator's e-mail address")
    .option("--ttl <seconds>", "how long the link works (60 to 86400; default 900)", (raw: string) => {
      const value = Number(raw);
      if (!/^\d+$/.test(raw) || value < 60 || value > 86_400) throw new InvalidArgumentError("a whole number of seconds from 60 to 86400");
      return value;
    })
    .addHelpText(
      "after",
      "\nThe link signs the operator in once, within its lifetime, whatever their password failures:\n" +
        "give it to them over a channel you trust. Only its hash is stored.",
    )
    .action(async (options: { email: string; ttl?: number }) => {
      const issued = await withApp(cli.out, "issuing the sign-in link", async (app) => {
        const { issueOperatorSignInLink } = await import("../../dashboard/operators/operator-sign-in-links.js");
        return issueOperatorSignInLink(app, { email: options.email, ...(options.ttl !== undefined ? { ttlSeconds: options.ttl } : {}) });
      });
      const out = { url: issued.url, account_id: issued.accountId, expires_at: issued.expiresAt.toISOString() };
      cli.out.result(out, () => `${out.url}\n(works once, until ${out.expires_at})`);
    });
  examples(link, [
    "gatehouse operators sign-in-link --email ops@example.com",
    "gatehouse operators sign-in-link --email ops@example.com --ttl 300 --json",
  ]);
};
