import type { SealingKey } from "../../../../gen/svc/v1/secrets_pb.js";
import { api, dateOf } from "../client.js";
import type { PageContext } from "../context.js";
import { confirmButton, field, h, pager, replace, select, statusRegion, table, time } from "../dom.js";
import { showProblem } from "../forms.js";

/** Secrets per environment: metadata only (the dashboard never sees a value). */
export async function renderSecrets(ctx: PageContext): Promise<void> {
  const { organizationId } = ctx;
  const status = statusRegion();
  if (!ctx.isAdmin) {
    replace(ctx.main, h("h1", { tabindex: "-1" }, "Secrets"), h("p", { class: "status status-info" }, "Only admins can see secrets."));
    return;
  }
  const sealing = h("div", {});

  /** The organisation's sealing keys (key ids only: the private halves never leave the server), and the rotation. */
  async function loadSealingKeys(): Promise<void> {
    const keys = await api.listSealingKeys({ organizationId });
    const row = (key: SealingKey) => [
      h("code", { "data-testid": key.retiredAt ? "previous-sealing-key" : "current-sealing-key" }, key.keyId),
      time(dateOf(key.createdAt)),
      key.retiredAt
        ? h(
            "span",
            {},
            (dateOf(key.acceptedUntil)?.getTime() ?? 0) > Date.now() ? "accepted until " : "refused since ",
            time(dateOf(key.acceptedUntil)),
          )
        : "current: clients seal to it",
    ];
    replace(
      sealing,
      h(
        "section",
        { class: "card", "aria-labelledby": "sealing-key-title" },
        h("h2", { id: "sealing-key-title" }, "Sealing key"),
        h(
          "p",
          {},
          "Clients seal values to this RSA-4096 public key (GET /organization/{id}/secrets/public-key). Rotating makes a new key " +
            "current; values sealed to the old one are accepted for 24 hours more. Stored values are not touched. ",
          keys.sealingKeyRotationDays > 0
            ? `Rotated every ${keys.sealingKeyRotationDays} days.`
            : "No scheduled rotation (gatehouse settings set --org <id> sealing_key_rotation_days=<days>).",
        ),
        table(
          "Sealing keys",
          ["Key id", "Created", "State"],
          [...(keys.current ? [keys.current] : []), ...keys.previousKeys].map(row),
          "No key yet: the first read of the public key creates one.",
        ),
        confirmButton(
          "Rotate sealing key",
          "Clients must fetch the new public key; values sealed to the old one are accepted for 24 hours.",
          async () => {
            try {
              const rotated = await api.rotateSealingKey({ organizationId });
              status.show(`Sealing key rotated: the current key_id is ${rotated.current?.keyId ?? "new"}.`, "success");
              await loadSealingKeys();
            } catch (error) {
              showProblem(error, {}, status);
            }
          },
        ),
      ),
    );
  }

  const { environments } = await api.listSecretEnvironments({ organizationId });
  if (environments.length === 0) {
    replace(
      ctx.main,
      h("h1", { tabindex: "-1" }, "Secrets"),
      h(
        "p",
        { class: "empty" },
        "No secrets yet. Store them sealed with PUT /organization/{id}/secrets or the gatehouse CLI; they appear here by environment.",
      ),
      status.element,
      sealing,
    );
    await loadSealingKeys();
    return;
  }
  const wanted = new URLSearchParams(location.search).get("env");
  const environment = field(
    "Environment",
    select(
      environments.map((e) => ({ value: e, label: e })),
      wanted && environments.includes(wanted) ? wanted : environments[0],
    ),
    { name: "environment" },
  );
  const list = h("div", { "aria-live": "polite" });
  const paging = { tokens: [""], next: "" };

  async function load(token: string): Promise<void> {
    const env = environment.control.value;
    const page = await api.listEnvironmentSecrets({ organizationId, environment: env, pageToken: token });
    paging.next = page.nextPageToken;
    const rows = page.secrets.map((secret) => [
      h("code", {}, secret.name),
      secret.tags.length
        ? h("span", {}, ...secret.tags.map((tag) => h("span", { class: "tag" }, tag)))
        : h("span", { class: "muted" }, "none"),
      String(secret.version),
      time(dateOf(secret.updatedAt)),
      confirmButton(
        "Delete",
        `Delete ${secret.name} from ${env} with all its versions?`,
        async () => {
          try {
            await api.deleteEnvironmentSecret({ organizationId, environment: env, name: secret.name });
            status.show(`Deleted ${secret.name} from ${env}.`, "success");
            await load(paging.tokens[paging.tokens.length - 1] ?? "");
          } catch (error) {
            showProblem(error, {}, status);
          }
        },
        { "aria-label": `Delete ${secret.name}` },
      ),
    ]);
    replace(
      list,
      table(`Secrets in ${env}`, ["Name", "Tags", "Version", "Updated", "Actions"], rows, `No secrets in ${env}.`),
      pager(paging, (next) => void load(next)),
    );
  }
  environment.control.addEventListener("change", () => {
    paging.tokens = [""];
    history.replaceState(null, "", `?env=${encodeURIComponent(environment.control.value)}`);
    void load("");
  });

  replace(
    ctx.main,
    h("h1", { tabindex: "-1" }, "Secrets"),
    h(
      "p",
      {},
      "Names, tags, versions and update times. Values are never shown here: they leave the platform only encrypted to a client's key.",
    ),
    environment.wrapper,
    status.element,
    list,
    sealing,
  );
  await Promise.all([load(""), loadSealingKeys()]);
}
