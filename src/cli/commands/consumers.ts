import { notFound } from "../../domain/errors.js";
import type { GatewayCredentials } from "../../domain/gateway/gateway-credentials.js";
import { formatTable } from "../format.js";
import { type CommandGroup, examples, helpGroups } from "../program.js";
import { type OperatorStore, requireOrganization, withStore } from "../with-app.js";

/**
 * The gateway-key and consumer-key functions the dashboard uses, over the
 * command's store, with its change feed: on PostgreSQL what they change is
 * announced through the database (NOTIFY), on SQLite through the notice file
 * beside it, so running instances and their gateways learn of it at once.
 */
export async function withGatewayCredentials<T>(store: OperatorStore, fn: (credentials: GatewayCredentials) => Promise<T>): Promise<T> {
  const { gatewayCredentialsOf } = await import("../../composition/gateway.js");
  return fn(gatewayCredentialsOf(store));
}

/** `gatehouse consumers create|list|revoke`: consumer keys (ck_) of the gateways' api-key-auth, on the data store directly. */
export const registerConsumers: CommandGroup = (program, cli) => {
  const consumers = program
    .command("consumers")
    .helpGroup(helpGroups.operator)
    .description("create, list and revoke consumer keys (what gateways' api-key-auth accepts)");

  const create = consumers
    .command("create")
    .description("create a consumer key for an organisation and print it, once")
    .requiredOption("--org <id>", "organisation id")
    .requiredOption("--name <name>", "who the key is for (a partner, an app)")
    .addHelpText(
      "after",
      '\nThe key is shown once and stored only as a hash; every gateway of the organisation accepts it at once.\nWith --json: {"consumer_key": "ck_...", "consumer_id": "..."}.',
    )
    .action(async (options: { org: string; name: string }) => {
      const created = await withStore(cli.out, "creating the consumer key", async (store) => {
        await requireOrganization(store, options.org);
        return withGatewayCredentials(store, (credentials) =>
          credentials.createConsumerKey({ organizationId: options.org, name: options.name }),
        );
      });
      const out = { consumer_key: created.consumerKey, consumer_id: created.consumer.id };
      cli.out.result(out, () => `consumer key (shown once): ${out.consumer_key}\nconsumer_id: ${out.consumer_id}\n`);
    });
  examples(create, [
    'gatehouse consumers create --org "$ORG" --name partner-acme',
    'gatehouse consumers create --org "$ORG" --name mobile-app --json | jq -r .consumer_key',
  ]);

  const list = consumers
    .command("list")
    .description("list an organisation's consumer keys, newest first (names and prefixes, never the keys)")
    .requiredOption("--org <id>", "organisation id")
    .action(async (options: { org: string }) => {
      const rows = await withStore(cli.out, "reading consumer keys", async (store) => {
        await requireOrganization(store, options.org);
        const listed = await withGatewayCredentials(store, (credentials) =>
          credentials.listConsumerKeys(options.org, { includeRevoked: true }),
        );
        return listed.map((c) => ({
          consumer_id: c.id,
          name: c.name,
          prefix: c.prefix,
          created_at: c.createdAt.toISOString(),
          revoked_at: c.revokedAt?.toISOString() ?? null,
        }));
      });
      cli.out.result(rows, () =>
        formatTable(
          ["CONSUMER_ID", "PREFIX", "STATUS", "NAME"],
          rows.map((r) => [r.consumer_id, r.prefix, r.revoked_at ? "revoked" : "active", r.name]),
        ),
      );
    });
  examples(list, ['gatehouse consumers list --org "$ORG"', "gatehouse consumers list --org \"$ORG\" --json | jq -r '.[].consumer_id'"]);

  const revoke = consumers
    .command("revoke")
    .description("revoke a consumer key: every gateway refuses it at once")
    .requiredOption("--org <id>", "organisation id")
    .argument("<consumer-id>", "the consumer's id (see gatehouse consumers list)")
    .action(async (consumerId: string, options: { org: string }) => {
      await withStore(cli.out, "revoking the consumer key", async (store) => {
        await requireOrganization(store, options.org);
        await withGatewayCredentials(store, async (credentials) => {
          // Like `keys revoke`, a key that is revoked already is an error: the command did nothing.
          const all = await credentials.listConsumerKeys(options.org, { includeRevoked: true });
          if (all.find((c) => c.id === consumerId.trim().toLowerCase())?.revokedAt) {
            throw notFound("consumer_not_found", `the consumer key ${consumerId} is revoked already (see gatehouse consumers list)`);
          }
          // An unknown id (or one of another organisation) is not_found, a malformed one invalid: the domain's words.
          await credentials.revokeConsumerKey(options.org, consumerId);
        });
      });
      cli.out.result({ consumer_id: consumerId, revoked: true }, () => `revoked ${consumerId}\n`);
    });
  examples(revoke, ['gatehouse consumers revoke --org "$ORG" 3f1c0e9a-2b6d-4c1e-9a57-0d9b8f6e2c41']);
};
