import { Role } from "../../../../gen/svc/v1/auth_pb.js";
import { MemberStatus, type InvitationInfo, type MemberInfo } from "../../../../gen/svc/v1/dashboard_pb.js";
import { api, dateOf } from "../client.js";
import type { PageContext } from "../context.js";
import { button, confirmButton, field, h, input, pager, replace, secretReveal, select, statusRegion, table, time } from "../dom.js";
import { clearErrors, showProblem } from "../forms.js";

const roleOptions = [
  { value: String(Role.MEMBER), label: "member" },
  { value: String(Role.ADMIN), label: "admin" },
];

const roleName = (role: Role) => (role === Role.ADMIN ? "admin" : "member");

/**
 * Operators of the organisation: invite by a one-time invitation link, the
 * pending invitations (new link, revoke), change role, remove.
 */
export async function renderMembers(ctx: PageContext): Promise<void> {
  const { organizationId } = ctx;
  const status = statusRegion();
  const reveal = h("div", {});
  const list = h("div", {});
  const pending = h("div", {});
  const paging = { tokens: [""], next: "" };
  const invitationPaging = { tokens: [""], next: "" };
  const me = ctx.session.operator?.accountId;

  function showLink(email: string, url: string, note: string): void {
    replace(reveal, secretReveal(`Invitation link for ${email}`, url, note, "invitation-link"));
  }

  function actions(member: MemberInfo): Node | string {
    if (!ctx.isAdmin) return "";
    const role = select(roleOptions, String(member.role), { "aria-label": `Role of ${member.email}` });
    const save = button("Change role", async () => {
      try {
        await api.changeMemberRole({ organizationId, accountId: member.accountId, role: Number(role.value) as Role });
        status.show(`${member.email} is now ${Number(role.value) === Role.ADMIN ? "an admin" : "a member"}.`, "success");
        await load(paging.tokens[paging.tokens.length - 1] ?? "");
      } catch (error) {
        showProblem(error, {}, status);
        role.value = String(member.role);
      }
    });
    const remove = confirmButton(
      "Remove",
      `Remove ${member.email} from this organisation?`,
      async () => {
        try {
          await api.removeMember({ organizationId, accountId: member.accountId });
          status.show(`Removed ${member.email}.`, "success");
          await load(paging.tokens[paging.tokens.length - 1] ?? "");
        } catch (error) {
          showProblem(error, {}, status);
        }
      },
      { "aria-label": `Remove ${member.email}` },
    );
    return h("span", { class: "row-actions" }, role, " ", save, " ", remove);
  }

  function invitationActions(invitation: InvitationInfo): Node | string {
    if (!ctx.isAdmin) return "";
    const reissue = button(
      "New link",
      async () => {
        try {
          const issued = await api.reissueInvitation({ organizationId, invitationId: invitation.invitationId });
          showLink(
            invitation.email,
            issued.invitationUrl,
            `Give this link to ${invitation.email} only. It works once, for 7 days; earlier links of this invitation no longer work.`,
          );
          await loadInvitations(invitationPaging.tokens[invitationPaging.tokens.length - 1] ?? "");
        } catch (error) {
          showProblem(error, {}, status);
        }
      },
      { "aria-label": `New invitation link for ${invitation.email}` },
    );
    const revoke = confirmButton(
      "Revoke",
      `Revoke the invitation of ${invitation.email}?`,
      async () => {
        try {
          await api.revokeInvitation({ organizationId, invitationId: invitation.invitationId });
          status.show(`Revoked the invitation of ${invitation.email}.`, "success");
          replace(reveal);
          await loadInvitations(invitationPaging.tokens[invitationPaging.tokens.length - 1] ?? "");
        } catch (error) {
          showProblem(error, {}, status);
        }
      },
      { "aria-label": `Revoke the invitation of ${invitation.email}` },
    );
    return h("span", { class: "row-actions" }, reissue, " ", revoke);
  }

  async function load(token: string): Promise<void> {
    const page = await api.listMembers({ organizationId, pageToken: token });
    paging.next = page.nextPageToken;
    const rows = page.members.map((m) => [
      h("span", {}, m.email, m.accountId === me ? h("span", { class: "muted" }, " (you)") : null),
      m.displayName,
      roleName(m.role),
      m.status === MemberStatus.PENDING ? h("span", { class: "badge badge-muted" }, "not set up") : h("span", { class: "badge" }, "active"),
      time(dateOf(m.createdAt)),
      actions(m),
    ]);
    replace(
      list,
      table("Members", ["E-mail", "Name", "Role", "Status", "Added", "Actions"], rows, "No members."),
      pager(paging, (next) => void load(next)),
    );
  }

  async function loadInvitations(token: string): Promise<void> {
    const page = await api.listInvitations({ organizationId, pageToken: token });
    invitationPaging.next = page.nextPageToken;
    const now = Date.now();
    const rows = page.invitations.map((invitation) => {
      const expires = dateOf(invitation.expiresAt);
      const expired = expires !== undefined && expires.getTime() <= now;
      return [
        invitation.email,
        invitation.displayName,
        roleName(invitation.role),
        invitation.invitedBy || h("span", { class: "muted" }, "unknown"),
        expired ? h("span", { class: "badge badge-muted" }, "expired") : time(expires),
        invitationActions(invitation),
      ];
    });
    replace(
      pending,
      table("Pending invitations", ["E-mail", "Name", "Role", "Invited by", "Link expires", "Actions"], rows, "No pending invitations."),
      pager(invitationPaging, (next) => void loadInvitations(next)),
    );
  }

  let form: HTMLElement | null = null;
  if (ctx.isAdmin) {
    const email = field("E-mail address", input({ type: "email", required: true, autocomplete: "off" }), { name: "email" });
    const displayName = field("Name", input({ required: true, maxlength: 100 }), { name: "display_name" });
    const role = field("Role", select(roleOptions, String(Role.MEMBER)), { name: "role" });
    const fields = { email, display_name: displayName, role };
    const submit = h("button", { type: "submit", class: "primary" }, "Invite");
    form = h(
      "form",
      { class: "inline-form", novalidate: true, "aria-label": "Invite a member" },
      email.wrapper,
      displayName.wrapper,
      role.wrapper,
      submit,
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      clearErrors(fields);
      status.clear();
      submit.disabled = true;
      try {
        const invited = await api.inviteMember({
          organizationId,
          email: email.control.value,
          displayName: displayName.control.value,
          role: Number(role.control.value) as Role,
        });
        const address = invited.invitation?.email ?? "";
        showLink(
          address,
          invited.invitationUrl,
          `Give this link to ${address} only, and it is shown only now. It works once, for 7 days: they open it and either create their account or sign in as ${address} to join this organisation.`,
        );
        email.control.value = "";
        displayName.control.value = "";
        await loadInvitations("");
      } catch (error) {
        showProblem(error, fields, status);
      } finally {
        submit.disabled = false;
      }
    });
  }

  replace(
    ctx.main,
    h("h1", { tabindex: "-1" }, "Members"),
    h("p", {}, "People who operate this organisation in the dashboard. An organisation always keeps at least one admin."),
    form ? h("h2", {}, "Invite") : null,
    form,
    status.element,
    reveal,
    h("h2", {}, "Pending invitations"),
    pending,
    h("h2", {}, "Members"),
    list,
  );
  await Promise.all([load(""), loadInvitations("")]);
}
