import type { IdentitySettingsValues } from "../../../../gen/svc/v1/dashboard_pb.js";
import { api } from "../client.js";
import type { PageContext } from "../context.js";
import { field, h, input, replace, statusRegion, type Field } from "../dom.js";
import { clearErrors, showProblem } from "../forms.js";

type Numeric =
  | "sessionTtlSeconds"
  | "magicLinkTtlSeconds"
  | "lockoutThreshold"
  | "lockoutWindowSeconds"
  | "ipLimitPerMinute"
  | "magicLinkLimitPerHour";

const numbers: { key: Numeric; name: string; label: string; hint: string; min: number; max: number }[] = [
  {
    key: "sessionTtlSeconds",
    name: "session_ttl_seconds",
    label: "Session lifetime (seconds)",
    hint: "60 to 2592000 (30 days). Default 3600.",
    min: 60,
    max: 2592000,
  },
  {
    key: "magicLinkTtlSeconds",
    name: "magic_link_ttl_seconds",
    label: "Magic-link lifetime (seconds)",
    hint: "60 to 604800. Default 900.",
    min: 60,
    max: 604800,
  },
  {
    key: "lockoutThreshold",
    name: "lockout_threshold",
    label: "Failed password logins before lockout",
    hint: "1 to 1000. Default 5.",
    min: 1,
    max: 1000,
  },
  {
    key: "lockoutWindowSeconds",
    name: "lockout_window_seconds",
    label: "Lockout window (seconds)",
    hint: "60 to 604800. Default 900.",
    min: 60,
    max: 604800,
  },
  {
    key: "ipLimitPerMinute",
    name: "ip_limit_per_minute",
    label: "Client requests per IP address and minute",
    hint: "1 to 1000000. Default 300.",
    min: 1,
    max: 1000000,
  },
  {
    key: "magicLinkLimitPerHour",
    name: "magic_link_limit_per_hour",
    label: "Magic links per identifier and hour",
    hint: "1 to 100000. Default 10.",
    min: 1,
    max: 100000,
  },
];

export async function renderIdentitySettings(ctx: PageContext): Promise<void> {
  const { organizationId } = ctx;
  const current = await api.getIdentitySettings({ organizationId });
  const values = current.settings as IdentitySettingsValues;
  const status = statusRegion();
  const disabled = !ctx.isAdmin;

  const toggle = (label: string, name: string, checked: boolean, hint: string) =>
    field(label, input({ type: "checkbox", checked, disabled }), { name, hint });
  const passkeys = toggle("Passkeys", "passkeys", values.passkeys, "Sign-up and sign-in with passkeys (WebAuthn).");
  const magicLinks = toggle("Magic links", "magic_links", values.magicLinks, "One-time sign-in links your backend delivers.");
  const password = toggle("Password authentication", "password", values.password, "Sign-up, sign-in and reset with a password.");
  const rpId = field("Relying-party ID", input({ value: values.rpId, placeholder: current.defaultRpId, disabled }), {
    name: "rp_id",
    hint: `A host name. Empty: ${current.defaultRpId} (from PUBLIC_URL).`,
  });
  const origins = field("Allowed origins", h("textarea", { rows: 3, placeholder: current.defaultOrigins.join("\n"), disabled }), {
    name: "origins",
    hint: `One http(s) origin per line. Empty: ${current.defaultOrigins.join(", ")}.`,
  });
  origins.control.value = values.origins.join("\n");
  const numberFields = Object.fromEntries(
    numbers.map((n) => [
      n.name,
      field(n.label, input({ type: "number", inputmode: "numeric", min: n.min, max: n.max, step: 1, value: values[n.key], disabled }), {
        name: n.name,
        hint: n.hint,
      }),
    ]),
  ) as Record<string, Field>;
  const fields: Record<string, Field<HTMLInputElement | HTMLTextAreaElement>> = {
    passkeys,
    magic_links: magicLinks,
    password,
    rp_id: rpId,
    origins,
    ...numberFields,
  };

  const submit = h("button", { type: "submit", class: "primary", disabled }, "Save settings");
  const form = h(
    "form",
    { novalidate: true, "aria-label": "Identity settings" },
    h("fieldset", {}, h("legend", {}, "Sign-in methods"), passkeys.wrapper, magicLinks.wrapper, password.wrapper),
    h("fieldset", {}, h("legend", {}, "Passkeys (WebAuthn)"), rpId.wrapper, origins.wrapper),
    h("fieldset", {}, h("legend", {}, "Lifetimes and limits"), ...numbers.map((n) => (numberFields[n.name] as Field).wrapper)),
    submit,
    status.element,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(fields);
    status.clear();
    // Numbers are checked here first: a non-number cannot even be sent.
    let invalid: Field | undefined;
    const parsed = {} as Record<Numeric, number>;
    for (const n of numbers) {
      const f = numberFields[n.name] as Field;
      const text = f.control.value.trim();
      if (!/^\d{1,10}$/.test(text) || Number(text) > 2147483647) {
        f.setError(`must be a whole number from ${n.min} to ${n.max}`);
        invalid ??= f;
      } else {
        parsed[n.key] = Number(text);
      }
    }
    if (invalid) {
      status.show("Please correct the highlighted fields.", "error");
      invalid.control.focus();
      return;
    }
    submit.disabled = true;
    try {
      await api.updateIdentitySettings({
        organizationId,
        settings: {
          passkeys: passkeys.control.checked,
          magicLinks: magicLinks.control.checked,
          password: password.control.checked,
          rpId: rpId.control.value,
          origins: origins.control.value
            .split("\n")
            .map((o) => o.trim())
            .filter((o) => o !== ""),
          ...parsed,
        },
      });
      status.show("Settings saved. They apply to the next request.", "success");
    } catch (error) {
      showProblem(error, fields, status, "settings.");
    } finally {
      submit.disabled = false;
    }
  });

  replace(
    ctx.main,
    h("h1", { tabindex: "-1" }, "Identity settings"),
    ctx.isAdmin ? null : h("p", { class: "status status-info" }, "Only admins can change these settings."),
    form,
  );
}
