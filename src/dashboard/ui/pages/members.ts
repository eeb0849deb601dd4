import { Role } from "../../../../gen/svc/v1/auth_pb.js";
import { MemberStatus, type MemberInfo } from "../../../../gen/svc/v1/dashboard_pb.js";
import { api, dateOf } from "../client.js";
import type { PageContext } from "../context.js";
import { button, confirmButton, field, h, input, pager, replace, secretReveal, select, statusRegion, table, time } from "../dom.js";
import { clearErrors, showProblem } from "../forms.js";

const roleOptions = [
  { value: String(Role.MEMBER), label: "member" },
  { value: String(Role.ADMIN), label: "admin" },
];

/** Operators of the organisation: invite by one-time link, change role, remove. */
export async function renderMembers(ctx: PageContext): Promise<void> {
  const { organizationId } = ctx;
  const status = statusRegion();
  const reveal = h("div", {});
  const list = h("div", {});
  const paging = { tokens: [""], next: "" };
  const me = ctx.session.operator?.accountId;

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
    const reissue =
      member.status === MemberStatus.PENDING
        ? button("New setup link", async () => {
            try {
              const link = await api.reissueSetupLink({ organizationId, accountId: member.accountId });
              replace(
                reveal,
                secretReveal(
                  `Setup link for ${member.email}`,
                  link.setupUrl,
                  "Give this link to the member. It works once, for 7 days; earlier links no longer work.",
                  "setup-link",
                ),
              );
            } catch (error) {
              showProblem(error, {}, status);
            }
          })
        : null;
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
    return h("span", { class: "row-actions" }, role, " ", save, " ", reissue, " ", remove);
  }

  async function load(token: string): Promise<void> {
    const page = await api.listMembers({ organizationId, pageToken: token });
    paging.next = page.nextPageToken;
    const rows = page.members.map((m) => [
      h("span", {}, m.email, m.accountId === me ? h("span", { class: "muted" }, " (you)") : null),
      m.displayName,
      m.role === Role.ADMIN ? "admin" : "member",
      m.status === MemberStatus.PENDING ? h("span", { class: "badge badge-muted" }, "invited") : h("span", { class: "badge" }, "active"),
      time(dateOf(m.createdAt)),
      actions(m),
    ]);
    replace(
      list,
      table("Members", ["E-mail", "Name", "Role", "Status", "Added", "Actions"], rows, "No members."),
      pager(paging, (next) => void load(next)),
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
        if (invited.setupUrl) {
          replace(
            reveal,
            secretReveal(
              `Setup link for ${invited.member?.email ?? ""}`,
              invited.setupUrl,
              "Give this link to the new member. It works once, for 7 days, and is shown only now.",
              "setup-link",
            ),
          );
        } else {
          replace(reveal);
          status.show(
            `${invited.member?.email ?? ""} already has an account: they can sign in now and choose this organisation.`,
            "success",
          );
        }
        email.control.value = "";
        displayName.control.value = "";
        await load(paging.tokens[paging.tokens.length - 1] ?? "");
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
    h("h2", {}, "Members"),
    list,
  );
  await load("");
}
