import { Role } from "../../../../gen/svc/v1/auth_pb.js";
import { api, dateOf } from "../client.js";
import type { PageContext } from "../context.js";
import { confirmButton, field, h, input, pager, replace, secretReveal, select, statusRegion, table, time } from "../dom.js";
import { clearErrors, showProblem } from "../forms.js";

export const roleLabel = (role: Role) => (role === Role.ADMIN ? "admin" : "member");

export async function renderApiKeys(ctx: PageContext): Promise<void> {
  const { organizationId } = ctx;
  const status = statusRegion();
  const reveal = h("div", {});
  const list = h("div", {});
  const paging = { tokens: [""], next: "" };
  const includeRevoked = input({ type: "checkbox", id: "include-revoked" });

  async function load(token: string): Promise<void> {
    const page = await api.listApiKeys({ organizationId, pageToken: token, includeRevoked: includeRevoked.checked });
    paging.next = page.nextPageToken;
    const rows = page.apiKeys.map((key) => [
      key.name,
      h("code", {}, `${key.prefix}…`),
      roleLabel(key.role),
      time(dateOf(key.createdAt)),
      time(dateOf(key.lastUsedAt)),
      key.revokedAt ? h("span", { class: "badge badge-muted" }, "revoked") : h("span", { class: "badge" }, "active"),
      ctx.isAdmin && !key.revokedAt
        ? confirmButton(
            "Revoke",
            `Revoke "${key.name}"? Programs using it stop working.`,
            async () => {
              try {
                await api.revokeApiKey({ organizationId, apiKeyId: key.id });
                status.show(`Revoked "${key.name}".`, "success");
                await load(paging.tokens[paging.tokens.length - 1] ?? "");
              } catch (error) {
                showProblem(error, {}, status);
              }
            },
            { "aria-label": `Revoke ${key.name}` },
          )
        : "",
    ]);
    replace(
      list,
      table(
        "API keys",
        ["Name", "Prefix", "Role", "Created", "Last used", "Status", "Actions"],
        rows,
        paging.tokens.length > 1 ? "No more keys." : "No API keys yet.",
      ),
      pager(paging, (next) => void load(next)),
    );
  }
  includeRevoked.addEventListener("change", () => {
    paging.tokens = [""];
    void load("");
  });

  let form: HTMLElement | null = null;
  if (ctx.isAdmin) {
    const name = field("Name", input({ required: true, maxlength: 100, placeholder: "ci-deploy" }), {
      name: "name",
      hint: "Say what uses the key, e.g. ci-deploy.",
    });
    const role = field(
      "Role",
      select(
        [
          { value: String(Role.MEMBER), label: "member" },
          { value: String(Role.ADMIN), label: "admin" },
        ],
        String(Role.MEMBER),
      ),
      {
        name: "role",
        hint: "Members read and change the configuration; admins also manage secrets.",
      },
    );
    const fields = { name, role };
    const submit = h("button", { type: "submit", class: "primary" }, "Create API key");
    form = h("form", { class: "inline-form", novalidate: true, "aria-label": "Create an API key" }, name.wrapper, role.wrapper, submit);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      clearErrors(fields);
      status.clear();
      submit.disabled = true;
      try {
        const created = await api.createApiKey({ organizationId, name: name.control.value, role: Number(role.control.value) as Role });
        replace(
          reveal,
          secretReveal(
            `New API key "${created.apiKey?.name ?? ""}"`,
            created.key,
            "Copy this key now: it is shown only this once and cannot be retrieved later (only its hash is stored).",
            "new-api-key",
          ),
        );
        name.control.value = "";
        paging.tokens = [""];
        await load("");
      } catch (error) {
        showProblem(error, fields, status);
      } finally {
        submit.disabled = false;
      }
    });
  }

  replace(
    ctx.main,
    h("h1", { tabindex: "-1" }, "API keys"),
    h("p", {}, "API keys call the configuration and secrets APIs as ", h("code", {}, "Authorization: Bearer gk_…"), "."),
    form,
    status.element,
    reveal,
    h("h2", {}, "Keys"),
    h("div", { class: "field field-checkbox" }, includeRevoked, h("label", { for: "include-revoked" }, "Show revoked keys")),
    list,
  );
  await load("");
}
