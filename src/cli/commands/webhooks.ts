import { InvalidArgumentError, Option } from "commander";
import type { DeliveryRecord } from "../../domain/webhooks/webhook-store.js";
import type { EndpointView } from "../../domain/webhooks/webhooks.js";
import { formatRecord, formatTable } from "../format.js";
import { type CommandGroup, examples, helpGroups } from "../program.js";
import { type OperatorStore, requireOrganization, withStore } from "../with-app.js";

/** The webhooks domain over the command's store (what it changes reaches running instances' workers). */
async function webhooksOf(store: OperatorStore) {
  return (await import("../../composition/webhooks.js")).webhooksOf(store);
}

function endpointJson(endpoint: EndpointView) {
  return {
    endpoint_id: endpoint.id,
    url: endpoint.url,
    description: endpoint.description,
    event_types: endpoint.eventTypes,
    enabled: endpoint.enabled,
    disabled_reason: endpoint.disabledReason,
    previous_secret_expires_at: endpoint.previousSecretExpiresAt?.toISOString() ?? null,
    created_at: endpoint.createdAt.toISOString(),
  };
}

function deliveryJson(delivery: DeliveryRecord) {
  const last = delivery.lastAttempt;
  return {
    delivery_id: delivery.id,
    event_id: delivery.eventId,
    event_type: delivery.eventType,
    status: delivery.status,
    attempts: delivery.attempts,
    next_attempt_at: delivery.status === "pending" ? delivery.nextAttemptAt.toISOString() : null,
    created_at: delivery.createdAt.toISOString(),
    last_attempt: last
      ? {
          attempted_at: last.attemptedAt.toISOString(),
          status_code: last.statusCode,
          duration_ms: last.durationMs,
          error: last.error,
        }
      : null,
  };
}

const limitOption = (raw: string) => {
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value < 1 || value > 100) throw new InvalidArgumentError("a whole number from 1 to 100");
  return value;
};

/** `gatehouse webhooks create|list|rotate-secret|deliveries|redeliver`: webhook endpoints, on the data store directly. */
export const registerWebhooks: CommandGroup = (program, cli) => {
  const webhooks = program
    .command("webhooks")
    .helpGroup(helpGroups.operator)
    .description("create and list webhook endpoints, rotate their secrets, list deliveries and send one again");

  const create = webhooks
    .command("create")
    .description("register a webhook endpoint and print its signing secret, once")
    .requiredOption("--org <id>", "organisation id")
    .requiredOption("--url <url>", "the https URL events are POSTed to")
    .option("--description <text>", "what the endpoint is for", "")
    .addOption(
      new Option("--event-types <types>", "comma-separated event types it takes (docs/events.md); default: every type").argParser((raw) =>
        raw
          .split(",")
          .map((type) => type.trim())
          .filter((type) => type !== ""),
      ),
    )
    .addHelpText(
      "after",
      '\nThe secret (whsec_...) is shown once; receivers verify deliveries with it (Standard Webhooks).\nWith --json: {"endpoint_id", "secret", "url", "event_types"}.',
    )
    .action(async (options: { org: string; url: string; description: string; eventTypes?: string[] }) => {
      const created = await withStore(
        cli.out,
        "creating the webhook endpoint",
        async (store) => {
          await requireOrganization(store, options.org);
          return (await webhooksOf(store)).createEndpoint(options.org, {
            url: options.url,
            description: options.description,
            eventTypes: options.eventTypes ?? [],
          });
        },
        { masterKeys: true },
      );
      const out = {
        endpoint_id: created.endpoint.id,
        secret: created.secret,
        url: created.endpoint.url,
        event_types: created.endpoint.eventTypes,
      };
      cli.out.result(out, () => `webhook secret (shown once): ${out.secret}\nendpoint_id: ${out.endpoint_id}\n`);
    });
  examples(create, [
    'gatehouse webhooks create --org "$ORG" --url https://example.com/webhooks',
    'gatehouse webhooks create --org "$ORG" --url https://example.com/hooks --event-types session.created,session.revoked --json',
  ]);

  const list = webhooks
    .command("list")
    .description("list an organisation's webhook endpoints (never their secrets)")
    .requiredOption("--org <id>", "organisation id")
    .action(async (options: { org: string }) => {
      const rows = await withStore(cli.out, "reading webhook endpoints", async (store) => {
        await requireOrganization(store, options.org);
        return (await (await webhooksOf(store)).listEndpoints(options.org)).map(endpointJson);
      });
      cli.out.result(rows, () =>
        formatTable(
          ["ENDPOINT_ID", "STATUS", "EVENT_TYPES", "URL"],
          rows.map((r) => [
            r.endpoint_id,
            r.enabled ? "enabled" : `disabled${r.disabled_reason ? ` (${r.disabled_reason})` : ""}`,
            r.event_types.length === 0 ? "*" : r.event_types.join(","),
            r.url,
          ]),
        ),
      );
    });
  examples(list, ['gatehouse webhooks list --org "$ORG"', "gatehouse webhooks list --org \"$ORG\" --json | jq -r '.[].endpoint_id'"]);

  const rotate = webhooks
    .command("rotate-secret")
    .description("make a new signing secret current and print it, once; the previous one signs too for 24 hours")
    .requiredOption("--org <id>", "organisation id")
    .argument("<endpoint-id>", "the endpoint's id (see gatehouse webhooks list)")
    .addHelpText(
      "after",
      '\nFor 24 hours every delivery carries two signatures (new and previous): switch the receiver to the new\nsecret within that time. With --json: {"endpoint_id", "secret", "previous_secret_expires_at"}.',
    )
    .action(async (endpointId: string, options: { org: string }) => {
      const rotated = await withStore(
        cli.out,
        "rotating the webhook secret",
        async (store) => {
          await requireOrganization(store, options.org);
          return (await webhooksOf(store)).rotateSecret(options.org, endpointId);
        },
        { masterKeys: true },
      );
      const out = {
        endpoint_id: rotated.endpoint.id,
        secret: rotated.secret,
        previous_secret_expires_at: rotated.endpoint.previousSecretExpiresAt?.toISOString() ?? null,
      };
      cli.out.result(
        out,
        () => `webhook secret (shown once): ${out.secret}\nthe previous secret signs too until ${out.previous_secret_expires_at}\n`,
      );
    });
  examples(rotate, ['gatehouse webhooks rotate-secret --org "$ORG" 5b0e7f3a-1c2d-4e5f-8a9b-0c1d2e3f4a5b']);

  const deliveries = webhooks
    .command("deliveries")
    .description("list an endpoint's deliveries, newest first, with each one's last attempt (status, time, duration)")
    .requiredOption("--org <id>", "organisation id")
    .argument("<endpoint-id>", "the endpoint's id (see gatehouse webhooks list)")
    .option("--limit <n>", "how many, 1 to 100 (default 20)", limitOption, 20)
    .action(async (endpointId: string, options: { org: string; limit: number }) => {
      const rows = await withStore(cli.out, "reading webhook deliveries", async (store) => {
        await requireOrganization(store, options.org);
        const page = await (await webhooksOf(store)).listDeliveries(options.org, endpointId, { pageSize: options.limit, pageToken: "" });
        return page.deliveries.map(deliveryJson);
      });
      cli.out.result(rows, () =>
        formatTable(
          ["DELIVERY_ID", "STATUS", "ATTEMPTS", "LAST", "EVENT"],
          rows.map((r) => [
            r.delivery_id,
            r.status,
            String(r.attempts),
            r.last_attempt
              ? `${r.last_attempt.status_code ?? r.last_attempt.error ?? "no answer"} in ${r.last_attempt.duration_ms} ms`
              : "-",
            `${r.event_type} ${r.event_id}`,
          ]),
        ),
      );
    });
  examples(deliveries, [
    'gatehouse webhooks deliveries --org "$ORG" "$ENDPOINT"',
    'gatehouse webhooks deliveries --org "$ORG" "$ENDPOINT" --json | jq -r \'.[] | select(.status == "failed") | .delivery_id\'',
  ]);

  const redeliver = webhooks
    .command("redeliver")
    .description("send a delivered or failed event to its endpoint again (same webhook-id), now")
    .requiredOption("--org <id>", "organisation id")
    .argument("<delivery-id>", "the delivery's id (see gatehouse webhooks deliveries)")
    .addHelpText("after", '\nA running server delivers it at once. With --json: {"delivery_id", "status"}.')
    .action(async (deliveryId: string, options: { org: string }) => {
      const delivery = await withStore(cli.out, "queueing the delivery again", async (store) => {
        await requireOrganization(store, options.org);
        return (await webhooksOf(store)).redeliver(options.org, deliveryId);
      });
      const out = { delivery_id: delivery.id, status: delivery.status };
      cli.out.result(out, () => formatRecord({ delivery_id: out.delivery_id, status: out.status }));
    });
  examples(redeliver, ['gatehouse webhooks redeliver --org "$ORG" 9c8b7a6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d']);
};
