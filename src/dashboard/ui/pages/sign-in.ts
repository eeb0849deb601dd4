import type { JsonObject } from "@bufbuild/protobuf";
import { browserSupportsWebAuthn, startAuthentication, type PublicKeyCredentialRequestOptionsJSON } from "@simplewebauthn/browser";
import { authApi } from "../client.js";
import { button, field, h, input, replace, statusRegion } from "../dom.js";
import { clearErrors, showProblem } from "../forms.js";
import { passkeyPromptProblem } from "./passkeys.js";

export function standalone(title: string, ...content: (Node | null)[]): HTMLElement {
  return h(
    "main",
    { class: "standalone", id: "main" },
    h("p", { class: "brand" }, "Gatehouse"),
    h("h1", { tabindex: "-1" }, title),
    ...content,
  );
}

/**
 * Sign-in of an operator: by password, or by a passkey added under "Your
 * passkeys" (no e-mail needed: the passkey names its account; if one was typed,
 * only that account's passkey is accepted), or by a one-time sign-in link
 * (`/dashboard/sign-in#link=...`, from the operator command), which is spent
 * at once; its token travels in the fragment and leaves the address bar.
 */
export function renderSignIn(root: HTMLElement, options: { notice: string | null; onSignedIn(): void }): void {
  const link = new URLSearchParams(location.hash.slice(1)).get("link");
  if (location.hash) history.replaceState(null, "", location.pathname + location.search);
  const status = statusRegion();
  const email = field("E-mail address", input({ type: "email", autocomplete: "username", required: true }), { name: "email" });
  const password = field("Password", input({ type: "password", autocomplete: "current-password", required: true }), { name: "password" });
  const fields = { email, password };
  const submit = h("button", { type: "submit", class: "primary" }, "Sign in");
  const form = h("form", { novalidate: true }, email.wrapper, password.wrapper, submit, status.element);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(fields);
    status.show("Signing in…");
    submit.disabled = true;
    try {
      await authApi.signIn({ email: email.control.value, password: password.control.value });
      options.onSignedIn();
    } catch (error) {
      showProblem(error, fields, status);
      password.control.value = "";
    } finally {
      submit.disabled = false;
    }
  });
  const passkeyStatus = statusRegion();
  const passkeyButton = button("Sign in with a passkey", async () => {
    clearErrors(fields);
    passkeyButton.disabled = true;
    passkeyStatus.show("Waiting for your passkey…");
    try {
      const begun = await authApi.beginPasskeySignIn({ email: email.control.value });
      let credential: JsonObject;
      try {
        const optionsJSON = (begun.options ?? {}) as unknown as PublicKeyCredentialRequestOptionsJSON;
        credential = (await startAuthentication({ optionsJSON })) as unknown as JsonObject;
      } catch (error) {
        passkeyStatus.show(passkeyPromptProblem(error), "error");
        return;
      }
      passkeyStatus.show("Signing in…");
      await authApi.finishPasskeySignIn({ credential });
      options.onSignedIn();
    } catch (error) {
      showProblem(error, fields, passkeyStatus);
    } finally {
      passkeyButton.disabled = false;
    }
  });
  const passkeySection = browserSupportsWebAuthn()
    ? h(
        "section",
        { class: "sign-in-alternative", "aria-labelledby": "passkey-sign-in-title" },
        h("h2", { id: "passkey-sign-in-title" }, "Or use a passkey"),
        h(
          "p",
          { class: "field-hint" },
          'Passkeys you added under "Your passkeys" sign you in without a password. If you typed your e-mail address above, only that account\'s passkey is accepted.',
        ),
        passkeyButton,
        passkeyStatus.element,
      )
    : null;
  replace(
    root,
    standalone(
      "Sign in to the dashboard",
      options.notice ? h("p", { class: "status status-info", role: "status" }, options.notice) : null,
      form,
      passkeySection,
    ),
  );
  email.control.focus();
  if (link) {
    status.show("Signing in with your one-time link…");
    authApi.signInWithLink({ token: link }).then(
      () => options.onSignedIn(),
      (error: unknown) => showProblem(error, {}, status),
    );
  }
}

/**
 * The one-time setup link (`/dashboard/setup#token=...`): the operator chooses
 * their e-mail address, name and password and is signed in. The token travels
 * in the fragment, which browsers never send to servers or in Referer headers,
 * and is removed from the address bar at once.
 */
export async function renderSetup(root: HTMLElement, options: { navigate(path: string): void }): Promise<void> {
  const token = new URLSearchParams(location.hash.slice(1)).get("token") ?? sessionStorage.getItem("gatehouse-setup-token") ?? "";
  if (location.hash) {
    sessionStorage.setItem("gatehouse-setup-token", token);
    history.replaceState(null, "", location.pathname);
  }
  const status = statusRegion();
  if (token === "") {
    replace(
      root,
      standalone(
        "Set up your account",
        h(
          "p",
          { role: "alert" },
          "This page needs an organisation owner's one-time setup link, which ",
          h("code", {}, "gatehouse init"),
          " or ",
          h("code", {}, "gatehouse orgs create"),
          " printed. Invited by an admin? Open the invitation link they gave you instead.",
        ),
      ),
    );
    return;
  }
  let invited = { email: "", displayName: "" };
  try {
    invited = await authApi.inspectSetupLink({ token });
  } catch (error) {
    const problem = showProblem(error, {}, status);
    replace(
      root,
      standalone(
        "Set up your account",
        h("p", { role: "alert", class: "status status-error" }, problem.message),
        h("p", {}, h("a", { href: "/dashboard/sign-in" }, "Go to sign-in")),
      ),
    );
    return;
  }
  const email = field("E-mail address", input({ type: "email", autocomplete: "username", required: true, value: invited.email }), {
    name: "email",
    hint: "You sign in with it.",
  });
  const displayName = field(
    "Your name",
    input({ autocomplete: "name", required: true, value: invited.displayName === "Owner" ? "" : invited.displayName }),
    {
      name: "display_name",
      hint: "Shown in the dashboard and in audit trails.",
    },
  );
  const password = field("Password", input({ type: "password", autocomplete: "new-password", required: true }), {
    name: "password",
    hint: "8 to 128 characters; not a common password.",
  });
  const confirm = field("Repeat the password", input({ type: "password", autocomplete: "new-password", required: true }), {
    name: "confirm",
  });
  const fields = { email, display_name: displayName, password, confirm };
  const submit = h("button", { type: "submit", class: "primary" }, "Set up and sign in");
  const form = h(
    "form",
    { novalidate: true },
    email.wrapper,
    displayName.wrapper,
    password.wrapper,
    confirm.wrapper,
    submit,
    status.element,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(fields);
    if (password.control.value !== confirm.control.value) {
      confirm.setError("does not match the password");
      confirm.control.focus();
      return;
    }
    submit.disabled = true;
    status.show("Setting up…");
    try {
      await authApi.setUpAccount({
        token,
        email: email.control.value,
        displayName: displayName.control.value,
        password: password.control.value,
      });
      sessionStorage.removeItem("gatehouse-setup-token");
      options.navigate("/dashboard/api-keys");
    } catch (error) {
      showProblem(error, fields, status);
    } finally {
      submit.disabled = false;
    }
  });
  replace(
    root,
    standalone("Set up your account", h("p", {}, "This link works once. Choose how you sign in to the Gatehouse dashboard."), form),
  );
  (email.control.value ? displayName.control : email.control).focus();
}
