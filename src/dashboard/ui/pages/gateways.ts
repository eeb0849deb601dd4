import { api, dateOf } from "../client.js";
import type { PageContext } from "../context.js";
import { confirmButton, field, h, input, replace, secretReveal, statusRegion, table, time } from "../dom.js";
import { clearErrors, showProblem } from "../forms.js";

type Status = ReturnType<typeof statusRegion>;

const liveBadge = (revoked: boolean) =>
  revoked ? h("span", { class: "badge badge-muted" }, "revoked") : h("span", { class: "badge" }, "active");

/**
 * A create form of one field (a name) whose answer is a key shown once:
 * `create` makes it and answers what the reveal shows.
 */
function nameForm(options: {
  label: string;
  hint: string;
  placeholder: string;
  submit: string;
  status: Status;
  reveal: HTMLElement;
  create(name: string): Promise<{ title: string; key: string; note: string; testId: string }>;
  created(): Promise<void>;
}): HTMLElement {
  const name = field(options.label, input({ required: true, maxlength: 100, placeholder: options.placeholder }), {
    name: "name",
    hint: options.hint,
  });
  const fields = { name };
  const submit = h("button", { type: "submit", class: "primary" }, options.submit);
  const form = h("form", { class: "inline-form", novalidate: true, "aria-label": options.submit }, name.wrapper, submit);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(fields);
    options.status.clear();
    submit.disabled = true;
    try {
      const shown = await options.create(name.control.value);
      replace(options.reveal, secretReveal(shown.title, shown.key, shown.note, shown.testId));
      name.control.value = "";
      await options.created();
    } catch (error) {
      showProblem(error, fields, options.status);
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

/**
 * "Gateways": the organisation's data plane. Gateway keys (what a gateway
 * follows the control plane with; created once-shown, revoked), the gateways
 * that follow it now or did within the last day, and consumer keys (what the
 * gateways' api-key-auth plugin accepts). Admins create and revoke; members read.
 */
export async function renderGateways(ctx: PageContext): Promise<void> {
  const { organizationId } = ctx;

  const keyStatus = statusRegion();
  const keyReveal = h("div", {});
  const keyList = h("div", {});
  async function loadKeys(): Promise<void> {
    const { gatewayKeys } = await api.listGatewayKeys({ organizationId, includeRevoked: true });
    const rows = gatewayKeys.map((key) => [
      key.name,
      h("code", {}, `${key.prefix}…`),
      time(dateOf(key.createdAt)),
      time(dateOf(key.lastUsedAt)),
      liveBadge(key.revokedAt !== undefined),
      ctx.isAdmin && !key.revokedAt
        ? confirmButton(
            "Revoke",
            `Revoke "${key.name}"? Gateways using it stop following the configuration at once.`,
            async () => {
              try {
                await api.revokeGatewayKey({ organizationId, gatewayKeyId: key.id });
                keyStatus.show(`Revoked "${key.name}".`, "success");
                await loadKeys();
              } catch (error) {
                showProblem(error, {}, keyStatus);
              }
            },
            { "aria-label": `Revoke gateway key ${key.name}` },
          )
        : "",
    ]);
    replace(keyList, table("Gateway keys", ["Name", "Prefix", "Created", "Last used", "Status", "Actions"], rows, "No gateway keys yet."));
  }

  const connectedList = h("div", {});
  async function loadConnected(): Promise<void> {
    const { gateways } = await api.listConnectedGateways({ organizationId });
    const rows = gateways.map((gateway) => [
      h("code", {}, gateway.gatewayId),
      String(gateway.revision),
      time(dateOf(gateway.lastSeenAt)),
      gateway.connected ? h("span", { class: "badge" }, "connected") : h("span", { class: "badge badge-muted" }, "disconnected"),
    ]);
    replace(
      connectedList,
      table(
        "Connected gateways",
        ["Gateway", "Revision", "Last seen", "Status"],
        rows,
        "No gateway has followed this organisation in the last day.",
      ),
    );
  }

  const consumerStatus = statusRegion();
  const consumerReveal = h("div", {});
  const consumerList = h("div", {});
  async function loadConsumers(): Promise<void> {
    const { consumers } = await api.listConsumerKeys({ organizationId, includeRevoked: true });
    const rows = consumers.map((consumer) => [
      consumer.name,
      h("code", {}, `${consumer.prefix}…`),
      h("code", {}, consumer.consumerId),
      time(dateOf(consumer.createdAt)),
      liveBadge(consumer.revokedAt !== undefined),
      ctx.isAdmin && !consumer.revokedAt
        ? confirmButton(
            "Revoke",
            `Revoke "${consumer.name}"? Every gateway refuses its key at once.`,
            async () => {
              try {
                await api.revokeConsumerKey({ organizationId, consumerId: consumer.consumerId });
                consumerStatus.show(`Revoked "${consumer.name}".`, "success");
                await loadConsumers();
              } catch (error) {
                showProblem(error, {}, consumerStatus);
              }
            },
            { "aria-label": `Revoke consumer ${consumer.name}` },
          )
        : "",
    ]);
    replace(consumerList, table("Consumers", ["Name", "Prefix", "Consumer id", "Created", "Status", "Actions"], rows, "No consumers yet."));
  }

  const keyForm = ctx.isAdmin
    ? nameForm({
        label: "Gateway key name",
        hint: "Say which gateway uses it, e.g. edge-1.",
        placeholder: "edge-1",
        submit: "Create gateway key",
        status: keyStatus,
        reveal: keyReveal,
        async create(name) {
          const created = await api.createGatewayKey({ organizationId, name });
          return {
            title: `New gateway key "${created.gatewayKey?.name ?? ""}"`,
            key: created.key,
            note: "Copy this key now and give it to the gateway as GATEHOUSE_GATEWAY_KEY: it is shown only this once (only its hash is stored).",
            testId: "new-gateway-key",
          };
        },
        created: loadKeys,
      })
    : null;
  const consumerForm = ctx.isAdmin
    ? nameForm({
        label: "Consumer name",
        hint: "Who calls your API with it, e.g. partner-acme.",
        placeholder: "partner-acme",
        submit: "Create consumer key",
        status: consumerStatus,
        reveal: consumerReveal,
        async create(name) {
          const created = await api.createConsumerKey({ organizationId, name });
          return {
            title: `New consumer key "${created.consumer?.name ?? ""}"`,
            key: created.key,
            note: "Copy this key now and give it to the consumer: it is shown only this once (only its hash is stored).",
            testId: "new-consumer-key",
          };
        },
        created: loadConsumers,
      })
    : null;

  replace(
    ctx.main,
    h("h1", { tabindex: "-1" }, "Gateways"),
    h(
      "p",
      {},
      "Gateways enforce this organisation's configuration on live traffic. Each follows the control plane with a gateway key (",
      h("code", {}, "gw_…"),
      ").",
    ),
    h(
      "section",
      { "aria-labelledby": "gateway-keys-title" },
      h("h2", { id: "gateway-keys-title" }, "Gateway keys"),
      keyForm,
      keyStatus.element,
      keyReveal,
      keyList,
    ),
    h(
      "section",
      { "aria-labelledby": "connected-gateways-title" },
      h("h2", { id: "connected-gateways-title" }, "Connected gateways"),
      connectedList,
    ),
    h(
      "section",
      { "aria-labelledby": "consumers-title" },
      h("h2", { id: "consumers-title" }, "Consumers"),
      h(
        "p",
        {},
        "Consumer keys (",
        h("code", {}, "ck_…"),
        ") are what routes with the api-key-auth plugin accept; they are no credential of this platform's API.",
      ),
      consumerForm,
      consumerStatus.element,
      consumerReveal,
      consumerList,
    ),
  );
  await Promise.all([loadKeys(), loadConnected(), loadConsumers()]);
}
