import { api, dateOf } from "../client.js";
import type { PageContext } from "../context.js";
import { confirmButton, field, h, input, pager, replace, statusRegion, table, time } from "../dom.js";
import { showProblem } from "../forms.js";

/** Search by identifier, page by page. */
export async function renderIdentities(ctx: PageContext): Promise<void> {
  const { organizationId } = ctx;
  const initial = new URLSearchParams(location.search).get("q") ?? "";
  const query = field("Identifier contains", input({ type: "search", value: initial, autocomplete: "off" }), {
    name: "query",
    hint: "An e-mail address or user name, or part of one. Empty lists everyone.",
  });
  const status = statusRegion();
  const results = h("div", { "aria-live": "polite" });
  const paging = { tokens: [""], next: "" };

  async function load(token: string): Promise<void> {
    const page = await api.searchIdentities({ organizationId, query: query.control.value, pageToken: token });
    paging.next = page.nextPageToken;
    const rows = page.identities.map((identity) => [
      h("a", { href: `/dashboard/identities/${identity.id}`, "data-link": true }, identity.identifier),
      time(dateOf(identity.createdAt)),
    ]);
    replace(
      results,
      table(
        "Identities",
        ["Identifier", "Created"],
        rows,
        query.control.value.trim() ? "No identity matches this search." : "No identities yet: they appear when users sign up.",
      ),
      pager(paging, (next) => void load(next)),
    );
  }

  const form = h(
    "form",
    { role: "search", class: "inline-form", "aria-label": "Search identities" },
    query.wrapper,
    h("button", { type: "submit", class: "primary" }, "Search"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    status.clear();
    paging.tokens = [""];
    history.replaceState(null, "", query.control.value ? `?q=${encodeURIComponent(query.control.value)}` : location.pathname);
    try {
      await load("");
    } catch (error) {
      showProblem(error, { query }, status);
    }
  });

  replace(ctx.main, h("h1", { tabindex: "-1" }, "Identities"), form, status.element, results);
  await load("");
}

/** One identity: credentials and sessions, with passkey removal and session revocation. */
export async function renderIdentity(ctx: PageContext): Promise<void> {
  const { organizationId } = ctx;
  const identityId = ctx.params.id ?? "";
  const status = statusRegion();
  const credentials = h("section", { "aria-labelledby": "credentials-title" });
  const sessions = h("section", { "aria-labelledby": "sessions-title" });
  const paging = { tokens: [""], next: "" };
  const details = await api.getIdentityDetails({ organizationId, identityId });
  const identity = details.identity;

  async function loadCredentials(): Promise<void> {
    const fresh = await api.getIdentityDetails({ organizationId, identityId });
    const rows = fresh.passkeys.map((p) => [
      p.name || h("span", { class: "muted" }, "unnamed"),
      h("code", { title: p.credentialId }, `${p.credentialId.slice(0, 12)}…`),
      time(dateOf(p.createdAt)),
      time(dateOf(p.lastUsedAt)),
      `${p.deviceType}${p.backedUp ? ", backed up" : ""}`,
      ctx.isAdmin
        ? confirmButton(
            "Remove",
            "Remove this passkey? It cannot sign in any more.",
            async () => {
              try {
                await api.removeIdentityPasskey({ organizationId, identityId, credentialId: p.credentialId });
                status.show("Passkey removed.", "success");
                await loadCredentials();
              } catch (error) {
                showProblem(error, {}, status);
              }
            },
            { "aria-label": `Remove passkey ${p.name || p.credentialId.slice(0, 12)}` },
          )
        : "",
    ]);
    replace(
      credentials,
      h("h2", { id: "credentials-title" }, "Credentials"),
      h("p", { "data-testid": "password-state" }, fresh.hasPassword ? "A password is set." : "No password is set."),
      h("h3", {}, "Passkeys"),
      table("Passkeys", ["Name", "Credential", "Created", "Last used", "Kind", "Actions"], rows, "No passkeys."),
    );
  }

  async function loadSessions(token: string): Promise<void> {
    const page = await api.listIdentitySessions({ organizationId, identityId, pageToken: token });
    paging.next = page.nextPageToken;
    const rows = page.sessions.map((s) => [
      s.method.replace("_", " "),
      time(dateOf(s.createdAt)),
      time(dateOf(s.expiresAt)),
      s.live ? h("span", { class: "badge" }, "live") : h("span", { class: "badge badge-muted" }, s.revokedAt ? "revoked" : "expired"),
      ctx.isAdmin && s.live
        ? confirmButton(
            "Revoke",
            "Revoke this session? Its token stops working at once.",
            async () => {
              try {
                await api.revokeIdentitySessions({ organizationId, identityId, sessionId: s.sessionId });
                status.show("Session revoked.", "success");
                await loadSessions(paging.tokens[paging.tokens.length - 1] ?? "");
              } catch (error) {
                showProblem(error, {}, status);
              }
            },
            { "aria-label": `Revoke session started ${dateOf(s.createdAt)?.toISOString() ?? ""}` },
          )
        : "",
    ]);
    replace(
      sessions,
      h("h2", { id: "sessions-title" }, "Sessions"),
      ctx.isAdmin
        ? confirmButton("Revoke all sessions", "Revoke every live session of this identity?", async () => {
            try {
              const done = await api.revokeIdentitySessions({ organizationId, identityId, sessionId: "" });
              status.show(`${done.revoked} session${done.revoked === 1 ? "" : "s"} revoked.`, "success");
              paging.tokens = [""];
              await loadSessions("");
            } catch (error) {
              showProblem(error, {}, status);
            }
          })
        : null,
      table("Sessions", ["Method", "Started", "Expires", "Status", "Actions"], rows, "No sessions."),
      pager(paging, (next) => void loadSessions(next)),
    );
  }

  replace(
    ctx.main,
    h("p", {}, h("a", { href: "/dashboard/identities", "data-link": true }, "← All identities")),
    h("h1", { tabindex: "-1" }, identity?.identifier ?? identityId),
    h(
      "dl",
      {},
      h("dt", {}, "Identity id"),
      h("dd", {}, h("code", {}, identityId)),
      h("dt", {}, "Created"),
      h("dd", {}, time(dateOf(identity?.createdAt))),
    ),
    status.element,
    credentials,
    sessions,
  );
  await Promise.all([loadCredentials(), loadSessions("")]);
}
