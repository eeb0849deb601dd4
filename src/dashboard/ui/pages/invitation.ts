import type { JsonObject } from "@bufbuild/protobuf";
import { browserSupportsWebAuthn, startAuthentication, type PublicKeyCredentialRequestOptionsJSON } from "@simplewebauthn/browser";
import { Role } from "../../../../gen/svc/v1/auth_pb.js";
import { SignInState, type InspectInvitationResponse } from "../../../../gen/svc/v1/dashboard_auth_pb.js";
import { api, authApi, dateOf, isSignedOut, problemOf } from "../client.js";
import { button, field, h, input, replace, statusRegion, time } from "../dom.js";
import { clearErrors, showProblem } from "../forms.js";
import { passkeyPromptProblem } from "./passkeys.js";
import { standalone } from "./sign-in.js";

const tokenKey = "gatehouse-invitation-token";

/** Why joining asks for a new password: shown wherever an existing account joins. */
const replacesCredentials =
  "Joining gives your account a new password, signs it out of every other browser and removes its passkeys (add them again afterwards): " +
  "whoever made an account for this address before you may still hold a way into it, and afterwards only you do.";

/** The new-password fields of an acceptance by an existing account. */
function newPasswordFields() {
  const next = field("Choose a new password", input({ type: "password", autocomplete: "new-password", required: true }), {
    name: "new_password",
    hint: "8 to 128 characters; not a common password.",
  });
  const confirm = field("Repeat the new password", input({ type: "password", autocomplete: "new-password", required: true }), {
    name: "confirm",
  });
  return {
    next,
    confirm,
    /** False (and the error shown) when the two differ. */
    matches(): boolean {
      if (next.control.value === confirm.control.value) return true;
      confirm.setError("does not match the new password");
      confirm.control.focus();
      return false;
    },
  };
}

/**
 * An invitation link (`/dashboard/invitation#token=...`). The invitee joins
 * as the account of the invited address, and only with this link's token: a
 * new person creates that account here; someone who has it signs in as it
 * (password or passkey) and accepts, choosing a new password (joining
 * replaces the account's credentials); someone signed in as another account
 * is asked to sign out first. The token travels in the fragment (never sent
 * to a server or in a Referer) and leaves the address bar at once.
 */
export async function renderInvitation(root: HTMLElement, options: { joined(organizationId: string): void }): Promise<void> {
  const token = new URLSearchParams(location.hash.slice(1)).get("token") ?? sessionStorage.getItem(tokenKey) ?? "";
  if (location.hash) {
    sessionStorage.setItem(tokenKey, token);
    history.replaceState(null, "", location.pathname);
  }
  const title = "Accept your invitation";
  if (token === "") {
    replace(root, standalone(title, h("p", { role: "alert" }, "This page needs the invitation link that an admin gave you.")));
    return;
  }
  let invitation: InspectInvitationResponse;
  try {
    invitation = await authApi.inspectInvitation({ token });
  } catch (error) {
    replace(
      root,
      standalone(
        title,
        h("p", { role: "alert", class: "status status-error" }, problemOf(error).message),
        h("p", {}, h("a", { href: "/dashboard/sign-in" }, "Go to sign-in")),
      ),
    );
    return;
  }
  // Asked first, so that a visitor without a session makes no request that fails.
  let signedInAs: string | null = null;
  let hasPassword = true;
  if ((await authApi.getSignInState({})).state === SignInState.SIGNED_IN) {
    try {
      const operator = (await api.getOperatorSession({})).operator;
      signedInAs = operator?.email ?? null;
      hasPassword = operator?.hasPassword ?? true;
    } catch (error) {
      if (!isSignedOut(error)) throw error;
    }
  }

  const status = statusRegion();
  const joined = (organizationId: string) => {
    sessionStorage.removeItem(tokenKey);
    options.joined(organizationId);
  };
  async function accept(currentPassword: string, newPassword: string): Promise<void> {
    const answer = await api.acceptInvitation({ token, currentPassword, newPassword });
    joined(answer.organization?.organizationId ?? "");
  }

  const summary = h(
    "p",
    { "data-testid": "invitation-summary" },
    `${invitation.invitedBy || "An admin"} invited `,
    h("strong", {}, invitation.email),
    ` to ${invitation.organizationName} as ${invitation.role === Role.ADMIN ? "an admin" : "a member"}. The link works once, until `,
    time(dateOf(invitation.expiresAt)),
    ".",
  );

  if (signedInAs === invitation.email) {
    const current = field("Your current password", input({ type: "password", autocomplete: "current-password", required: true }), {
      name: "current_password",
    });
    const chosen = newPasswordFields();
    const fields = { current_password: current, new_password: chosen.next, confirm: chosen.confirm };
    const acceptButton = h("button", { type: "submit", class: "primary" }, `Join ${invitation.organizationName}`);
    const acceptForm = h(
      "form",
      { novalidate: true, "aria-label": `Join ${invitation.organizationName}` },
      hasPassword ? current.wrapper : null,
      chosen.next.wrapper,
      chosen.confirm.wrapper,
      acceptButton,
      status.element,
    );
    acceptForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      clearErrors(fields);
      if (!chosen.matches()) return;
      acceptButton.disabled = true;
      status.show("Joining…");
      try {
        await accept(hasPassword ? current.control.value : "", chosen.next.control.value);
      } catch (error) {
        showProblem(error, fields, status);
      } finally {
        acceptButton.disabled = false;
      }
    });
    replace(
      root,
      standalone(
        title,
        summary,
        h("p", {}, `You are signed in as ${signedInAs}.`),
        h("p", { class: "field-hint" }, replacesCredentials),
        acceptForm,
      ),
    );
    (hasPassword ? current.control : chosen.next.control).focus();
    return;
  }

  if (signedInAs !== null) {
    const signOut = button("Sign out", async () => {
      await authApi.signOut({}).catch(() => undefined);
      await renderInvitation(root, options);
    });
    replace(
      root,
      standalone(
        title,
        summary,
        h(
          "p",
          { role: "alert", class: "status status-info" },
          `You are signed in as ${signedInAs}, but this invitation is for ${invitation.email}. Sign out, then sign in as ${invitation.email} or create its account.`,
        ),
        signOut,
      ),
    );
    signOut.focus();
    return;
  }

  // Not signed in: a new person creates the invited address's account; someone who has it signs in.
  const name = field("Your name", input({ autocomplete: "name", required: true, maxlength: 100, value: invitation.displayName }), {
    name: "display_name",
    hint: "Shown in the dashboard and in audit trails.",
  });
  const newPassword = field("Choose a password", input({ type: "password", autocomplete: "new-password", required: true }), {
    name: "password",
    hint: "8 to 128 characters; not a common password.",
  });
  const confirm = field("Repeat the password", input({ type: "password", autocomplete: "new-password", required: true }), {
    name: "confirm",
  });
  const createFields = { display_name: name, password: newPassword, confirm };
  const createStatus = statusRegion();
  const createSubmit = h("button", { type: "submit", class: "primary" }, "Create account and join");
  const createForm = h(
    "form",
    { novalidate: true, "aria-labelledby": "invitation-create-title" },
    name.wrapper,
    newPassword.wrapper,
    confirm.wrapper,
    createSubmit,
    createStatus.element,
  );
  createForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(createFields);
    if (newPassword.control.value !== confirm.control.value) {
      confirm.setError("does not match the password");
      confirm.control.focus();
      return;
    }
    createSubmit.disabled = true;
    createStatus.show("Creating your account…");
    try {
      const created = await authApi.createInvitedAccount({ token, displayName: name.control.value, password: newPassword.control.value });
      joined(created.organizationId);
    } catch (error) {
      showProblem(error, createFields, createStatus);
    } finally {
      createSubmit.disabled = false;
    }
  });

  const password = field("Your password", input({ type: "password", autocomplete: "current-password", required: true }), {
    name: "current_password",
  });
  const chosen = newPasswordFields();
  const signInFields = { current_password: password, new_password: chosen.next, confirm: chosen.confirm };
  const signInStatus = statusRegion();
  const signInSubmit = h("button", { type: "submit", class: "primary" }, "Sign in and join");
  const signInForm = h(
    "form",
    { novalidate: true, "aria-labelledby": "invitation-sign-in-title" },
    password.wrapper,
    chosen.next.wrapper,
    chosen.confirm.wrapper,
    signInSubmit,
    signInStatus.element,
  );
  /** Signs in as the invited address, then accepts with a new password; a failed acceptance leaves the operator signed in. */
  signInForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearErrors(signInFields);
    if (!chosen.matches()) return;
    signInSubmit.disabled = true;
    signInStatus.show("Signing in…");
    try {
      await authApi.signIn({ email: invitation.email, password: password.control.value });
      signInStatus.show("Joining…");
      await accept(password.control.value, chosen.next.control.value);
    } catch (error) {
      showProblem(error, signInFields, signInStatus);
    } finally {
      signInSubmit.disabled = false;
      for (const f of Object.values(signInFields)) f.control.value = "";
    }
  });
  // A passkey signs in; the page then asks for the new password, as for anyone signed in.
  const passkeyButton = button("Sign in with a passkey", async () => {
    passkeyButton.disabled = true;
    signInStatus.show("Waiting for your passkey…");
    try {
      const begun = await authApi.beginPasskeySignIn({ email: invitation.email });
      let credential: JsonObject;
      try {
        const optionsJSON = (begun.options ?? {}) as unknown as PublicKeyCredentialRequestOptionsJSON;
        credential = (await startAuthentication({ optionsJSON })) as unknown as JsonObject;
      } catch (error) {
        signInStatus.show(passkeyPromptProblem(error), "error");
        return;
      }
      await authApi.finishPasskeySignIn({ credential });
      await renderInvitation(root, options);
    } catch (error) {
      showProblem(error, {}, signInStatus);
    } finally {
      passkeyButton.disabled = false;
    }
  });

  replace(
    root,
    standalone(
      title,
      summary,
      h(
        "section",
        { "aria-labelledby": "invitation-create-title" },
        h("h2", { id: "invitation-create-title" }, "New to Gatehouse? Create your account"),
        h("p", { class: "field-hint" }, `Your account's e-mail address is ${invitation.email}; you sign in with it.`),
        createForm,
      ),
      h(
        "section",
        { class: "sign-in-alternative", "aria-labelledby": "invitation-sign-in-title" },
        h("h2", { id: "invitation-sign-in-title" }, `Already have an account for ${invitation.email}? Sign in to join`),
        h("p", { class: "field-hint" }, replacesCredentials),
        signInForm,
        browserSupportsWebAuthn() ? passkeyButton : null,
        h(
          "p",
          { class: "field-hint" },
          "No password for it, or someone else made it? Ask your platform's operator for a one-time sign-in link (",
          h("code", {}, "gatehouse operators sign-in-link"),
          "): it signs you in and removes every other way into the account.",
        ),
      ),
    ),
  );
  name.control.focus();
}
