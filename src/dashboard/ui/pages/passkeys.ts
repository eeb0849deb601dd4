import {
  browserSupportsWebAuthn,
  startRegistration,
  WebAuthnError,
  type PublicKeyCredentialCreationOptionsJSON,
} from "@simplewebauthn/browser";
import type { JsonObject } from "@bufbuild/protobuf";
import { api, dateOf } from "../client.js";
import type { PageContext } from "../context.js";
import { confirmButton, field, h, input, replace, statusRegion, table, time } from "../dom.js";
import { clearErrors, showProblem } from "../forms.js";

/** What to tell the operator when the browser's passkey prompt fails (cancelled, timed out, unsupported). */
export function passkeyPromptProblem(error: unknown): string {
  const name = error instanceof WebAuthnError ? error.cause instanceof Error && error.cause.name : error instanceof Error && error.name;
  if (name === "NotAllowedError") return "The passkey prompt was closed or timed out. Try again.";
  if (error instanceof WebAuthnError && error.code === "ERROR_AUTHENTICATOR_PREVIOUSLY_REGISTERED") {
    return "This authenticator already holds one of your passkeys.";
  }
  return `The browser could not use a passkey: ${error instanceof Error ? error.message : String(error)}`;
}

/**
 * The signed-in operator's password: set one after a recovery sign-in (which
 * removed it), or change it with the current one. Other sessions end.
 */
function passwordSection(ctx: PageContext): HTMLElement {
  const operator = ctx.session.operator;
  const hasPassword = operator?.hasPassword ?? false;
  const status = statusRegion();
  const current = field("Current password", input({ type: "password", autocomplete: "current-password", required: true }), {
    name: "current_password",
  });
  const next = field("New password", input({ type: "password", autocomplete: "new-password", required: true }), {
    name: "new_password",
    hint: "8 to 128 characters; not a common password.",
  });
  const confirm = field("Repeat the new password", input({ type: "password", autocomplete: "new-password", required: true }), {
    name: "confirm",
  });
  const fields = { current_password: current, new_password: next, confirm };
  const submit = h("button", { type: "submit", class: "primary" }, hasPassword ? "Change password" : "Set password");
  const form = h(
    "form",
    { novalidate: true, "aria-labelledby": "password-title" },
    hasPassword ? current.wrapper : null,
    next.wrapper,
    confirm.wrapper,
    submit,
    status.element,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(fields);
    if (next.control.value !== confirm.control.value) {
      confirm.setError("does not match the new password");
      confirm.control.focus();
      return;
    }
    submit.disabled = true;
    status.show("Saving…");
    try {
      await api.setOperatorPassword({ currentPassword: hasPassword ? current.control.value : "", newPassword: next.control.value });
      if (operator) operator.hasPassword = true;
      for (const f of Object.values(fields)) f.control.value = "";
      status.show("Your password is set. Your other dashboard sessions have ended.", "success");
    } catch (error) {
      showProblem(error, fields, status);
    } finally {
      submit.disabled = false;
    }
  });
  return h(
    "section",
    { "aria-labelledby": "password-title" },
    h("h2", { id: "password-title" }, "Password"),
    hasPassword
      ? h("p", {}, "Changing it signs you out of every other browser.")
      : h(
          "p",
          { class: "status status-info", role: "status" },
          "Your account has no password: a one-time sign-in link removed it, with your passkeys and other sessions. Choose one now, or you will need a new link once this session ends.",
        ),
    form,
  );
}

/**
 * "Your passkeys": the signed-in operator's own passkeys for dashboard
 * sign-in (not the organisation's identities'): add one, see when each was
 * added and last used, remove one; and their password.
 */
export async function renderPasskeys(ctx: PageContext): Promise<void> {
  const status = statusRegion();
  const list = h("div", { "aria-live": "polite" });

  async function load(): Promise<void> {
    const { passkeys } = await api.listOperatorPasskeys({});
    const rows = passkeys.map((passkey) => [
      passkey.name,
      time(dateOf(passkey.createdAt)),
      time(dateOf(passkey.lastUsedAt)),
      passkey.backedUp ? "yes" : "no",
      confirmButton(
        "Remove",
        `Remove "${passkey.name}"? It stops signing you in at once.`,
        async () => {
          try {
            await api.removeOperatorPasskey({ passkeyId: passkey.id });
            status.show(`Removed "${passkey.name}".`, "success");
            await load();
          } catch (error) {
            showProblem(error, {}, status);
          }
        },
        { "aria-label": `Remove passkey ${passkey.name}` },
      ),
    ]);
    replace(
      list,
      table("Your passkeys", ["Name", "Added", "Last used", "Synced", "Actions"], rows, "No passkeys yet: you sign in with your password."),
    );
  }

  const name = field("Passkey name", input({ maxlength: 64, placeholder: "Work laptop" }), {
    name: "name",
    hint: "To recognise it in this list, e.g. the device it lives on. Empty: Passkey.",
  });
  const fields = { name };
  const submit = h("button", { type: "submit", class: "primary" }, "Add a passkey");
  const form = h("form", { class: "inline-form", novalidate: true, "aria-label": "Add a passkey" }, name.wrapper, submit);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(fields);
    submit.disabled = true;
    status.show("Follow your browser's prompt to create the passkey…");
    try {
      const begun = await api.beginAddOperatorPasskey({});
      let credential: unknown;
      try {
        credential = await startRegistration({ optionsJSON: begun.options as unknown as PublicKeyCredentialCreationOptionsJSON });
      } catch (error) {
        status.show(passkeyPromptProblem(error), "error");
        return;
      }
      const added = await api.finishAddOperatorPasskey({
        ceremonyId: begun.ceremonyId,
        credential: credential as JsonObject,
        name: name.control.value,
      });
      name.control.value = "";
      status.show(`Added "${added.passkey?.name ?? "Passkey"}". You can now sign in with it.`, "success");
      await load();
    } catch (error) {
      showProblem(error, fields, status);
    } finally {
      submit.disabled = false;
    }
  });

  replace(
    ctx.main,
    h("h1", { tabindex: "-1" }, "Your passkeys"),
    h(
      "p",
      {},
      "Passkeys sign you in to this dashboard without a password: your device checks it is you (fingerprint, face or PIN). They belong to your account, ",
      h("code", {}, ctx.session.operator?.email ?? ""),
      ", in every organisation.",
    ),
    passwordSection(ctx),
    h("h2", {}, "Passkeys"),
    browserSupportsWebAuthn() ? form : h("p", { class: "status status-info" }, "This browser does not support passkeys."),
    status.element,
    list,
  );
  await load();
}
