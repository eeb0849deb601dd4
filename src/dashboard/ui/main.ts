import { Role } from "../../../gen/svc/v1/auth_pb.js";
import { SignInState } from "../../../gen/svc/v1/dashboard_auth_pb.js";
import type { GetOperatorSessionResponse } from "../../../gen/svc/v1/dashboard_pb.js";
import { api, authApi, isSignedOut, onSessionEnded, problemOf } from "./client.js";
import type { PageContext } from "./context.js";
import { button, h, replace, select } from "./dom.js";
import { renderApiKeys } from "./pages/api-keys.js";
import { renderConfiguration } from "./pages/configuration.js";
import { renderGateways } from "./pages/gateways.js";
import { renderIdentities, renderIdentity } from "./pages/identities.js";
import { renderIdentityKeys } from "./pages/identity-keys.js";
import { renderIdentitySettings } from "./pages/identity-settings.js";
import { renderInvitation } from "./pages/invitation.js";
import { renderMembers } from "./pages/members.js";
import { renderPasskeys } from "./pages/passkeys.js";
import { renderSecrets } from "./pages/secrets.js";
import { renderSetup, renderSignIn } from "./pages/sign-in.js";
import { renderWebhookEndpoint, renderWebhooks } from "./pages/webhooks.js";

interface Route {
  pattern: RegExp;
  title: string;
  /** The navigation entry it belongs to. */
  nav: string;
  render(ctx: PageContext): Promise<void>;
}

const navigation: { path: string; label: string }[] = [
  { path: "/dashboard/api-keys", label: "API keys" },
  { path: "/dashboard/identity-keys", label: "Identity keys" },
  { path: "/dashboard/identity-settings", label: "Identity settings" },
  { path: "/dashboard/identities", label: "Identities" },
  { path: "/dashboard/secrets", label: "Secrets" },
  { path: "/dashboard/configuration", label: "Configuration" },
  { path: "/dashboard/gateways", label: "Gateways" },
  { path: "/dashboard/webhooks", label: "Webhooks" },
  { path: "/dashboard/members", label: "Members" },
  { path: "/dashboard/passkeys", label: "Your passkeys" },
];

const routes: Route[] = [
  { pattern: /^\/dashboard\/api-keys$/, title: "API keys", nav: "/dashboard/api-keys", render: renderApiKeys },
  { pattern: /^\/dashboard\/identity-keys$/, title: "Identity keys", nav: "/dashboard/identity-keys", render: renderIdentityKeys },
  {
    pattern: /^\/dashboard\/identity-settings$/,
    title: "Identity settings",
    nav: "/dashboard/identity-settings",
    render: renderIdentitySettings,
  },
  { pattern: /^\/dashboard\/identities$/, title: "Identities", nav: "/dashboard/identities", render: renderIdentities },
  { pattern: /^\/dashboard\/identities\/(?<id>[0-9a-f-]{36})$/, title: "Identity", nav: "/dashboard/identities", render: renderIdentity },
  { pattern: /^\/dashboard\/secrets$/, title: "Secrets", nav: "/dashboard/secrets", render: renderSecrets },
  { pattern: /^\/dashboard\/configuration$/, title: "Configuration", nav: "/dashboard/configuration", render: renderConfiguration },
  { pattern: /^\/dashboard\/gateways$/, title: "Gateways", nav: "/dashboard/gateways", render: renderGateways },
  { pattern: /^\/dashboard\/webhooks$/, title: "Webhooks", nav: "/dashboard/webhooks", render: renderWebhooks },
  {
    pattern: /^\/dashboard\/webhooks\/(?<id>[0-9a-f-]{36})$/,
    title: "Webhook endpoint",
    nav: "/dashboard/webhooks",
    render: renderWebhookEndpoint,
  },
  { pattern: /^\/dashboard\/members$/, title: "Members", nav: "/dashboard/members", render: renderMembers },
  { pattern: /^\/dashboard\/passkeys$/, title: "Your passkeys", nav: "/dashboard/passkeys", render: renderPasskeys },
];

const organizationKey = "gatehouse-dashboard-organization";
const root = document.getElementById("app") as HTMLElement;
let session: GetOperatorSessionResponse | null = null;
let notice: string | null = null;

function navigate(path: string, options: { replace?: boolean } = {}): void {
  if (options.replace) history.replaceState(null, "", path);
  else history.pushState(null, "", path);
  void render();
}

const sessionEndedNotice = "Your dashboard session has ended: sign in again.";

/**
 * Sends the operator to sign in, and back to this page afterwards. `message`
 * greets them there: why they have to sign in again, or nothing on a first
 * visit (or after signing out), which is no news.
 */
function signedOut(message: string | null = sessionEndedNotice): void {
  // Pages that work without a session handle its absence themselves.
  if (["/dashboard/sign-in", "/dashboard/setup", "/dashboard/invitation"].some((p) => location.pathname.startsWith(p))) return;
  session = null;
  notice = message;
  // Back to the page asked for; the dashboard's front door needs no way back (sign-in leads there anyway).
  const next = location.pathname.replace(/\/+$/, "");
  const back = next.startsWith("/dashboard/") && !next.startsWith("/dashboard/sign-in");
  navigate(`/dashboard/sign-in${back ? `?next=${encodeURIComponent(next)}` : ""}`, { replace: true });
}

function currentOrganization(s: GetOperatorSessionResponse): string | undefined {
  const stored = localStorage.getItem(organizationKey);
  const found = s.organizations.find((o) => o.organizationId === stored) ?? s.organizations[0];
  return found?.organizationId;
}

function shell(s: GetOperatorSessionResponse, organizationId: string, active: string): HTMLElement {
  const organizations = s.organizations.map((o) => ({ value: o.organizationId, label: o.name }));
  const orgSelect = select(organizations, organizationId, { id: "organization-select" });
  orgSelect.addEventListener("change", () => {
    localStorage.setItem(organizationKey, orgSelect.value);
    void render();
  });
  const main = h("main", { id: "main", tabindex: "-1" });
  // After a recovery sign-in the account has no password until its owner sets one.
  const noPassword =
    s.operator && !s.operator.hasPassword
      ? h(
          "p",
          { class: "status status-info", role: "status", "data-testid": "no-password-notice" },
          "Your account has no password yet: ",
          h("a", { href: "/dashboard/passkeys", "data-link": true }, "choose one"),
          " before this session ends.",
        )
      : null;
  const signOut = button("Sign out", async () => {
    await authApi.signOut({}).catch(() => undefined);
    session = null;
    notice = "You have signed out.";
    navigate("/dashboard/sign-in", { replace: true });
  });
  const layout = h(
    "div",
    { class: "shell" },
    h("a", { class: "skip-link", href: "#main" }, "Skip to content"),
    h(
      "header",
      { class: "topbar" },
      h("span", { class: "brand" }, "Gatehouse"),
      organizations.length > 1
        ? h("span", { class: "org-picker" }, h("label", { for: "organization-select" }, "Organisation "), orgSelect)
        : h("span", { class: "org-name" }, organizations[0]?.label ?? ""),
      h("span", { class: "operator", title: s.operator?.email ?? "" }, s.operator?.displayName ?? ""),
      signOut,
    ),
    h(
      "div",
      { class: "layout" },
      h(
        "nav",
        { class: "sidebar", "aria-label": "Dashboard sections" },
        h(
          "ul",
          {},
          ...navigation.map((item) =>
            h(
              "li",
              {},
              h("a", { href: item.path, "data-link": true, "aria-current": item.path === active ? "page" : undefined }, item.label),
            ),
          ),
        ),
      ),
      noPassword ? h("div", { class: "content" }, noPassword, main) : main,
    ),
  );
  return layout;
}

async function render(): Promise<void> {
  const path = location.pathname.replace(/\/+$/, "") || "/dashboard";
  if (path === "/dashboard/setup") {
    document.title = "Set up your account · Gatehouse";
    return renderSetup(root, { navigate: (p) => navigate(p, { replace: true }) });
  }
  if (path === "/dashboard/invitation") {
    document.title = "Accept your invitation · Gatehouse";
    return renderInvitation(root, {
      joined(organizationId) {
        // The session's organisations have changed: read them again, and open the one just joined.
        session = null;
        if (organizationId !== "") localStorage.setItem(organizationKey, organizationId);
        navigate("/dashboard/api-keys", { replace: true });
      },
    });
  }
  if (path === "/dashboard/sign-in") {
    document.title = "Sign in · Gatehouse";
    const message = notice;
    notice = null;
    const next = new URLSearchParams(location.search).get("next");
    return renderSignIn(root, {
      notice: message,
      onSignedIn: () => navigate(next?.startsWith("/dashboard/") ? next : "/dashboard/api-keys", { replace: true }),
    });
  }
  if (!session) {
    try {
      // Asked first, so that a page load without a live session makes no request that fails (no 401 in the console)
      // and the sign-in page can tell a first visit from a session that has ended.
      const { state } = await authApi.getSignInState({});
      if (state === SignInState.SIGNED_OUT) return signedOut(null);
      if (state === SignInState.ENDED) return signedOut();
      session = await api.getOperatorSession({});
    } catch (error) {
      if (isSignedOut(error)) return signedOut();
      replace(
        root,
        h("main", { class: "standalone" }, h("h1", {}, "The dashboard cannot load"), h("p", { role: "alert" }, problemOf(error).message)),
      );
      return;
    }
  }
  if (path === "/dashboard") return navigate("/dashboard/api-keys", { replace: true });
  const route = routes.find((r) => r.pattern.test(path));
  const organizationId = currentOrganization(session);
  if (!organizationId) {
    replace(
      root,
      h("main", { class: "standalone" }, h("h1", {}, "No organisation"), h("p", {}, "Your account is not a member of any organisation.")),
    );
    return;
  }
  const access = session.organizations.find((o) => o.organizationId === organizationId);
  const layout = shell(session, organizationId, route?.nav ?? "");
  replace(root, layout);
  const main = layout.querySelector("main") as HTMLElement;
  if (!route) {
    document.title = "Not found · Gatehouse";
    replace(main, h("h1", { tabindex: "-1" }, "Page not found"), h("p", {}, "There is no dashboard page at this address."));
    return;
  }
  document.title = `${route.title} · Gatehouse`;
  const ctx: PageContext = {
    main,
    session,
    organizationId,
    isAdmin: access?.role === Role.ADMIN,
    params: (route.pattern.exec(path)?.groups ?? {}) as Record<string, string>,
    navigate,
    signedOut: () => signedOut(),
  };
  try {
    await route.render(ctx);
  } catch (error) {
    if (isSignedOut(error)) return signedOut();
    replace(
      main,
      h("h1", { tabindex: "-1" }, route.title),
      h("p", { role: "alert", class: "status status-error" }, problemOf(error).message),
    );
  }
  (main.querySelector("h1") as HTMLElement | null)?.focus({ preventScroll: true });
}

// In-app links navigate without reloading the page.
document.addEventListener("click", (event) => {
  const target = event.target instanceof Element ? event.target.closest("a[data-link]") : null;
  if (!target || !(target instanceof HTMLAnchorElement)) return;
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  event.preventDefault();
  navigate(target.pathname + target.search);
});
addEventListener("popstate", () => void render());
// A call anywhere that finds the session ended sends the operator to sign in.
onSessionEnded(() => signedOut());
// A failure no page handled (a page turn, for example) is shown at the top of the page.
addEventListener("unhandledrejection", (event) => {
  event.preventDefault();
  if (isSignedOut(event.reason)) return;
  const main = document.getElementById("main");
  if (!main) return;
  main.querySelector(".unhandled-error")?.remove();
  main.prepend(h("p", { role: "alert", class: "status status-error unhandled-error" }, problemOf(event.reason).message));
});
void render();
