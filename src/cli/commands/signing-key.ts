import { type CommandGroup, examples, helpGroups } from "../program.js";
import { tenancyOf, withStore } from "../with-app.js";

/** `gatehouse signing-key rotate`: a new key signs an organisation's session tokens from now on. */
export const registerSigningKey: CommandGroup = (program, cli) => {
  const group = program.command("signing-key").helpGroup(helpGroups.operator).description("rotate an organisation's session signing key");
  const rotate = group
    .command("rotate")
    .description("make a new key sign the organisation's session tokens; the old key stays in the JWKS until its last token expires")
    .requiredOption("--org <id>", "the organisation id")
    .action(async (options: { org: string }) => {
      const out = await withStore(
        cli.out,
        "rotating the signing key",
        async (store) => {
          const { organizationId, key, retired } = await (await tenancyOf(store)).rotateSessionSigningKey(options.org);
          return {
            organization_id: organizationId,
            kid: key.kid,
            created_at: key.createdAt.toISOString(),
            retired: retired.map((r) => ({ kid: r.kid, published_until: r.publishedUntil?.toISOString() ?? null })),
          };
        },
        { masterKeys: true },
      );
      cli.out.result(out, () =>
        [
          `session signing key rotated: new sessions are signed by ${out.kid}`,
          ...out.retired.map((r) => `  ${r.kid} stays published until ${r.published_until}`),
        ].join("\n"),
      );
    });
  examples(rotate, ["gatehouse signing-key rotate --org $ORG", "gatehouse signing-key rotate --org $ORG --json"]);
};
