import { WebhookDeliveryStatus, type WebhookDelivery, type WebhookEndpoint } from "../../../../gen/svc/v1/webhooks_pb.js";
import { eventTypes } from "../../../domain/events/catalogue.js";
import { dateOf, webhooksApi } from "../client.js";
import type { PageContext } from "../context.js";
import { button, confirmButton, field, h, input, pager, replace, secretReveal, statusRegion, table, time } from "../dom.js";
import { clearErrors, showProblem } from "../forms.js";

const statusWords: Record<WebhookDeliveryStatus, string> = {
  [WebhookDeliveryStatus.UNSPECIFIED]: "unknown",
  [WebhookDeliveryStatus.PENDING]: "pending",
  [WebhookDeliveryStatus.DELIVERED]: "delivered",
  [WebhookDeliveryStatus.FAILED]: "failed",
};

function endpointBadge(endpoint: WebhookEndpoint): HTMLElement {
  if (endpoint.enabled) return h("span", { class: "badge" }, "enabled");
  return h("span", { class: "badge badge-muted" }, endpoint.disabledReason === "gone" ? "disabled (410 Gone)" : "disabled");
}

const adminsOnly = (ctx: PageContext, title: string) =>
  replace(
    ctx.main,
    h("h1", { tabindex: "-1" }, title),
    h("p", {}, "Webhooks are managed by the organisation's admins: ask one to add you as an admin."),
  );

/**
 * "Webhooks": where the organisation's events are delivered (docs/events.md).
 * Admins register endpoints (the signing secret is shown once), rotate secrets,
 * send a test event, enable, disable and delete; each endpoint's page lists its
 * deliveries and attempts.
 */
export async function renderWebhooks(ctx: PageContext): Promise<void> {
  const { organizationId } = ctx;
  if (!ctx.isAdmin) return adminsOnly(ctx, "Webhooks");
  const status = statusRegion();
  const reveal = h("div", {});
  const list = h("div", {});

  async function load(): Promise<void> {
    const { endpoints } = await webhooksApi.listWebhookEndpoints({ organizationId });
    const rows = endpoints.map((endpoint) => [
      h("a", { href: `/dashboard/webhooks/${endpoint.endpointId}`, "data-link": true }, endpoint.url),
      endpoint.description,
      endpoint.eventTypes.length === 0 ? "every type" : endpoint.eventTypes.join(", "),
      endpointBadge(endpoint),
      h(
        "span",
        { class: "actions" },
        button(
          "Send test event",
          async () => {
            try {
              const sent = await webhooksApi.sendWebhookTestEvent({ organizationId, endpointId: endpoint.endpointId });
              status.show(`Test event ${sent.eventId} queued for ${endpoint.url}.`, "success");
            } catch (error) {
              showProblem(error, {}, status);
            }
          },
          { "aria-label": `Send a test event to ${endpoint.url}`, disabled: !endpoint.enabled },
        ),
        " ",
        confirmButton(
          "Rotate secret",
          "Rotate its signing secret? The previous one keeps signing for 24 hours.",
          async () => {
            try {
              const rotated = await webhooksApi.rotateWebhookSecret({ organizationId, endpointId: endpoint.endpointId });
              replace(
                reveal,
                secretReveal(
                  `New signing secret of ${endpoint.url}`,
                  rotated.secret,
                  "Copy this secret now and give it to the receiver: it is shown only this once. For 24 hours deliveries carry a signature with the previous secret too.",
                  "new-webhook-secret",
                ),
              );
              await load();
            } catch (error) {
              showProblem(error, {}, status);
            }
          },
          { "aria-label": `Rotate the secret of ${endpoint.url}` },
        ),
        " ",
        button(
          endpoint.enabled ? "Disable" : "Enable",
          async () => {
            try {
              await webhooksApi.updateWebhookEndpoint({ organizationId, endpointId: endpoint.endpointId, enabled: !endpoint.enabled });
              status.show(`${endpoint.enabled ? "Disabled" : "Enabled"} ${endpoint.url}.`, "success");
              await load();
            } catch (error) {
              showProblem(error, {}, status);
            }
          },
          { "aria-label": `${endpoint.enabled ? "Disable" : "Enable"} ${endpoint.url}` },
        ),
        " ",
        confirmButton(
          "Delete",
          `Delete ${endpoint.url} with its deliveries?`,
          async () => {
            try {
              await webhooksApi.deleteWebhookEndpoint({ organizationId, endpointId: endpoint.endpointId });
              status.show(`Deleted ${endpoint.url}.`, "success");
              await load();
            } catch (error) {
              showProblem(error, {}, status);
            }
          },
          { "aria-label": `Delete ${endpoint.url}` },
        ),
      ),
    ]);
    replace(list, table("Webhook endpoints", ["URL", "Description", "Events", "Status", "Actions"], rows, "No webhook endpoints yet."));
  }

  const url = field("URL", input({ type: "url", required: true, placeholder: "https://example.com/webhooks", maxlength: 2048 }), {
    name: "url",
    hint: "Events are POSTed here, signed (Standard Webhooks).",
  });
  const description = field("Description", input({ maxlength: 500, placeholder: "billing sync" }), { name: "description" });
  const boxes = eventTypes.map((type) => ({ type, box: input({ type: "checkbox", value: type, name: "event_types" }) }));
  const types = h(
    "fieldset",
    { class: "checkboxes" },
    h("legend", {}, "Event types (none checked: every type)"),
    ...boxes.map(({ type, box }) => h("label", { class: "checkbox" }, box, " ", h("code", {}, type))),
  );
  const fields = { url, description };
  const submit = h("button", { type: "submit", class: "primary" }, "Add endpoint");
  const form = h(
    "form",
    { class: "stacked-form", novalidate: true, "aria-label": "Add a webhook endpoint" },
    url.wrapper,
    description.wrapper,
    types,
    submit,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(fields);
    status.clear();
    submit.disabled = true;
    try {
      const created = await webhooksApi.createWebhookEndpoint({
        organizationId,
        url: url.control.value,
        description: description.control.value,
        eventTypes: boxes.filter(({ box }) => box.checked).map(({ type }) => type),
      });
      replace(
        reveal,
        secretReveal(
          `Signing secret of ${created.endpoint?.url ?? ""}`,
          created.secret,
          "Copy this secret now and give it to the receiver, which verifies every delivery with it: it is shown only this once.",
          "new-webhook-secret",
        ),
      );
      url.control.value = "";
      description.control.value = "";
      for (const { box } of boxes) box.checked = false;
      await load();
    } catch (error) {
      showProblem(error, fields, status);
    } finally {
      submit.disabled = false;
    }
  });

  replace(
    ctx.main,
    h("h1", { tabindex: "-1" }, "Webhooks"),
    h(
      "p",
      {},
      "The platform POSTs this organisation's events to these endpoints, signed with each endpoint's secret (Standard Webhooks: the ",
      h("code", {}, "webhook-id"),
      ", ",
      h("code", {}, "webhook-timestamp"),
      " and ",
      h("code", {}, "webhook-signature"),
      " headers).",
    ),
    h("section", { "aria-labelledby": "webhooks-add-title" }, h("h2", { id: "webhooks-add-title" }, "Add an endpoint"), form),
    status.element,
    reveal,
    h("section", { "aria-labelledby": "webhooks-list-title" }, h("h2", { id: "webhooks-list-title" }, "Endpoints"), list),
  );
  await load();
}

/** One endpoint: its deliveries (status, attempts, the last answer and how long it took), each sent again on request. */
export async function renderWebhookEndpoint(ctx: PageContext): Promise<void> {
  const { organizationId } = ctx;
  const endpointId = ctx.params.id ?? "";
  if (!ctx.isAdmin) return adminsOnly(ctx, "Webhook endpoint");
  const { endpoint } = await webhooksApi.getWebhookEndpoint({ organizationId, endpointId });
  const status = statusRegion();
  const list = h("div", {});
  const attempts = h("div", {});
  const paging = { tokens: [""], next: "" };

  async function showAttempts(delivery: WebhookDelivery): Promise<void> {
    const found = await webhooksApi.listWebhookAttempts({ organizationId, endpointId, deliveryId: delivery.deliveryId });
    const rows = found.attempts.map((attempt) => [
      String(attempt.number),
      time(dateOf(attempt.attemptedAt)),
      attempt.statusCode !== undefined ? String(attempt.statusCode) : "no answer",
      `${attempt.durationMs} ms`,
      attempt.error,
    ]);
    replace(
      attempts,
      h("h2", { id: "webhook-attempts-title" }, `Attempts of ${delivery.eventType} ${delivery.eventId}`),
      table("Attempts", ["#", "When", "Status", "Took", "Error"], rows, "No attempt yet."),
    );
  }

  async function load(token: string): Promise<void> {
    const page = await webhooksApi.listWebhookDeliveries({ organizationId, endpointId, pageSize: 20, pageToken: token });
    paging.next = page.nextPageToken;
    const rows = page.deliveries.map((delivery) => {
      const last = delivery.lastAttempt;
      const finished = delivery.status === WebhookDeliveryStatus.DELIVERED || delivery.status === WebhookDeliveryStatus.FAILED;
      return [
        h("code", {}, delivery.eventType),
        h(
          "span",
          { class: delivery.status === WebhookDeliveryStatus.FAILED ? "badge badge-muted" : "badge" },
          statusWords[delivery.status],
        ),
        String(delivery.attempts),
        last ? `${last.statusCode ?? last.error} in ${last.durationMs} ms` : "-",
        last
          ? time(dateOf(last.attemptedAt))
          : delivery.status === WebhookDeliveryStatus.PENDING
            ? time(dateOf(delivery.nextAttemptAt))
            : "-",
        h(
          "span",
          { class: "actions" },
          button("Attempts", () => void showAttempts(delivery), { "aria-label": `Attempts of ${delivery.eventId}` }),
          " ",
          finished
            ? button(
                "Send again",
                async () => {
                  try {
                    await webhooksApi.redeliverWebhook({ organizationId, endpointId, deliveryId: delivery.deliveryId });
                    status.show(`${delivery.eventType} ${delivery.eventId} is being sent again.`, "success");
                    await load(paging.tokens[paging.tokens.length - 1] ?? "");
                  } catch (error) {
                    showProblem(error, {}, status);
                  }
                },
                { "aria-label": `Send ${delivery.eventId} again` },
              )
            : "",
        ),
      ];
    });
    replace(
      list,
      table("Deliveries", ["Event", "Status", "Attempts", "Last answer", "When", "Actions"], rows, "No deliveries yet."),
      pager(paging, (next) => void load(next)),
    );
  }

  replace(
    ctx.main,
    h("h1", { tabindex: "-1" }, "Webhook endpoint"),
    h("p", {}, h("a", { href: "/dashboard/webhooks", "data-link": true }, "All endpoints")),
    h("p", {}, h("code", {}, endpoint?.url ?? ""), " ", endpoint ? endpointBadge(endpoint) : ""),
    button(
      "Send test event",
      async () => {
        try {
          await webhooksApi.sendWebhookTestEvent({ organizationId, endpointId });
          status.show("Test event queued.", "success");
          await load("");
        } catch (error) {
          showProblem(error, {}, status);
        }
      },
      { disabled: !endpoint?.enabled },
    ),
    status.element,
    h("section", { "aria-labelledby": "webhook-deliveries-title" }, h("h2", { id: "webhook-deliveries-title" }, "Deliveries"), list),
    h("section", { "aria-labelledby": "webhook-attempts-title" }, attempts),
  );
  await load("");
}
