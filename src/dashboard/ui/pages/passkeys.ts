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
 * "Your passkeys": the signed-in operator's own passkeys for dashboard
 * sign-in (not the organisation's identities'): add one, see when each was
 * added and last used, remove one.
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
    browserSupportsWebAuthn() ? form : h("p", { class: "status status-info" }, "This browser does not support passkeys."),
    status.element,
    h("h2", {}, "Passkeys"),
    list,
  );
  await load();
}
