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

/**
 * An invitation link (`/dashboard/invitation#token=...`). The invitee joins
 * as the account of the invited address, and only with this link's token: a
 * new person creates that account here; someone who has it signs in as it
 * (password or passkey) and accepts; someone signed in as another account is
 * asked to sign out first. The token travels in the fragment (never sent to a
 * server or in a Referer) and leaves the address bar at once.
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
  if ((await authApi.getSignInState({})).state === SignInState.SIGNED_IN) {
    try {
      signedInAs = (await api.getOperatorSession({})).operator?.email ?? null;
    } catch (error) {
      if (!isSignedOut(error)) throw error;
    }
  }

  const status = statusRegion();
  const joined = (organizationId: string) => {
    sessionStorage.removeItem(tokenKey);
    options.joined(organizationId);
  };
  async function accept(): Promise<void> {
    const answer = await api.acceptInvitation({ token });
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
    const acceptButton = button(
      `Join ${invitation.organizationName}`,
      async () => {
        acceptButton.disabled = true;
        status.show("Joining…");
        try {
          await accept();
        } catch (error) {
          showProblem(error, {}, status);
        } finally {
          acceptButton.disabled = false;
        }
      },
      { class: "primary" },
    );
    replace(root, standalone(title, summary, h("p", {}, `You are signed in as ${signedInAs}.`), acceptButton, status.element));
    acceptButton.focus();
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
    name: "sign_in_password",
  });
  const signInStatus = statusRegion();
  const signInSubmit = h("button", { type: "submit", class: "primary" }, "Sign in and join");
  const signInForm = h(
    "form",
    { novalidate: true, "aria-labelledby": "invitation-sign-in-title" },
    password.wrapper,
    signInSubmit,
    signInStatus.element,
  );
  /** Signs in as the invited address (by `signIn`), then accepts; a failed acceptance leaves the operator signed in. */
  async function signInAndAccept(signIn: () => Promise<boolean>, done: () => void): Promise<void> {
    clearErrors({ password });
    signInStatus.show("Signing in…");
    try {
      if (!(await signIn())) return;
      signInStatus.show("Joining…");
      await accept();
    } catch (error) {
      showProblem(error, { password }, signInStatus);
    } finally {
      done();
    }
  }
  signInForm.addEventListener("submit", (event) => {
    event.preventDefault();
    signInSubmit.disabled = true;
    void signInAndAccept(
      async () => {
        await authApi.signIn({ email: invitation.email, password: password.control.value });
        return true;
      },
      () => {
        signInSubmit.disabled = false;
        password.control.value = "";
      },
    );
  });
  const passkeyButton = button("Sign in with a passkey and join", () => {
    passkeyButton.disabled = true;
    void signInAndAccept(
      async () => {
        const begun = await authApi.beginPasskeySignIn({ email: invitation.email });
        let credential: JsonObject;
        try {
          const optionsJSON = (begun.options ?? {}) as unknown as PublicKeyCredentialRequestOptionsJSON;
          credential = (await startAuthentication({ optionsJSON })) as unknown as JsonObject;
        } catch (error) {
          signInStatus.show(passkeyPromptProblem(error), "error");
          return false;
        }
        await authApi.finishPasskeySignIn({ credential });
        return true;
      },
      () => {
        passkeyButton.disabled = false;
      },
    );
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
        signInForm,
        browserSupportsWebAuthn() ? passkeyButton : null,
      ),
    ),
  );
  name.control.focus();
}
