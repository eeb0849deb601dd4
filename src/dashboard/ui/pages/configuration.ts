import type { ConfigRevision } from "../../../../gen/svc/v1/config_pb.js";
import { DiffLineKind } from "../../../../gen/svc/v1/dashboard_pb.js";
import { api, dateOf } from "../client.js";
import type { PageContext } from "../context.js";
import { button, confirmButton, field, h, replace, select, statusRegion, table, time } from "../dom.js";
import { showProblem } from "../forms.js";

function summary(revision: ConfigRevision): Node {
  const parts: Node[] = [];
  const add = (sign: string, cls: string, names: string[]) => {
    if (names.length === 0) return;
    parts.push(h("span", { class: cls, title: names.join(", ") }, `${sign}${names.length} `));
  };
  add("+", "added", revision.created);
  add("~", "changed", revision.updated);
  add("−", "removed", revision.deleted);
  const names = [...revision.created, ...revision.updated, ...revision.deleted];
  if (names.length === 0) return h("span", { class: "muted" }, "no changes");
  return h("span", {}, ...parts, h("span", { class: "muted" }, names.slice(0, 3).join(", ") + (names.length > 3 ? ", …" : "")));
}

/** The current YAML, the revision history, a diff between two revisions, and rollback. */
export async function renderConfiguration(ctx: PageContext): Promise<void> {
  const { organizationId } = ctx;
  const status = statusRegion();
  const current = h("section", { "aria-labelledby": "current-title" });
  const history = h("section", { "aria-labelledby": "history-title" });
  const diffOutput = h("div", { "aria-live": "polite" });
  const revisions: ConfigRevision[] = [];
  let nextToken = "";
  let currentRevision = 0;

  async function loadCurrent(): Promise<void> {
    const doc = await api.getConfigDocument({ organizationId });
    currentRevision = doc.revision;
    replace(
      current,
      h("h2", { id: "current-title" }, "Current configuration"),
      h(
        "p",
        {},
        doc.revision === 0
          ? "Nothing applied yet (revision 0)."
          : h("span", {}, "Revision ", h("strong", { "data-testid": "current-revision" }, String(doc.revision))),
      ),
      h("pre", { class: "yaml", tabindex: "0", "aria-label": "Current configuration YAML", "data-testid": "current-yaml" }, doc.yaml),
    );
  }

  function diffForm(): HTMLElement {
    const options = [
      { value: "0", label: "0 (empty)" },
      ...revisions.map((r) => ({ value: String(r.revision), label: String(r.revision) })),
    ];
    const newest = revisions[0]?.revision ?? 0;
    const from = field("From revision", select(options, String(Math.max(0, newest - 1))), { name: "from_revision" });
    const to = field("To revision", select(options, String(newest)), { name: "to_revision" });
    const form = h(
      "form",
      { class: "inline-form", "aria-label": "Compare revisions" },
      from.wrapper,
      to.wrapper,
      h("button", { type: "submit" }, "Show diff"),
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        const diff = await api.diffConfigRevisions({
          organizationId,
          fromRevision: Number(from.control.value),
          toRevision: Number(to.control.value),
        });
        if (diff.hunks.length === 0) {
          replace(diffOutput, h("p", { class: "empty" }, "The two revisions are identical."));
          return;
        }
        replace(
          diffOutput,
          h("p", {}, `${diff.added} line${diff.added === 1 ? "" : "s"} added, ${diff.removed} removed.`),
          ...diff.hunks.map((hunk) =>
            h(
              "pre",
              { class: "diff", tabindex: "0", "aria-label": "Changed lines" },
              ...hunk.lines.map((line) => {
                const kind = line.kind === DiffLineKind.ADDED ? "added" : line.kind === DiffLineKind.REMOVED ? "removed" : "same";
                const sign = kind === "added" ? "+" : kind === "removed" ? "-" : " ";
                return h("span", { class: `diff-line diff-${kind}` }, `${sign} ${line.text}\n`);
              }),
            ),
          ),
        );
      } catch (error) {
        showProblem(error, { from_revision: from, to_revision: to }, status);
      }
    });
    return form;
  }

  function renderHistory(): void {
    const rows = revisions.map((r) => [
      String(r.revision),
      time(dateOf(r.createdAt)),
      r.actor,
      r.source,
      summary(r),
      r.revision === currentRevision
        ? h("span", { class: "badge" }, "current")
        : confirmButton(
            "Roll back",
            `Make revision ${r.revision} current again (recorded as a new revision)?`,
            async () => {
              try {
                const done = await api.rollbackConfigRevision({ organizationId, revision: r.revision, expectedRevision: currentRevision });
                status.show(`Rolled back to revision ${r.revision}: now at revision ${done.result?.revision ?? "?"}.`, "success");
                await reload();
              } catch (error) {
                showProblem(error, {}, status);
              }
            },
            { "aria-label": `Roll back to revision ${r.revision}` },
          ),
    ]);
    replace(
      history,
      h("h2", { id: "history-title" }, "History"),
      table(
        "Configuration revisions",
        ["Revision", "Applied", "Actor", "Source", "Changes", "Actions"],
        rows,
        "No revisions yet: apply a configuration with PUT /organization/{id}/config.",
      ),
      nextToken ? button("Load older revisions", () => void loadMore()) : null,
      revisions.length > 0 ? h("h2", {}, "Compare revisions") : null,
      revisions.length > 0 ? diffForm() : null,
      diffOutput,
    );
  }

  async function loadMore(): Promise<void> {
    const page = await api.listConfigHistory({ organizationId, pageToken: nextToken });
    revisions.push(...page.revisions);
    nextToken = page.nextPageToken;
    renderHistory();
  }

  async function reload(): Promise<void> {
    revisions.length = 0;
    nextToken = "";
    await loadCurrent();
    await loadMore();
  }

  replace(ctx.main, h("h1", { tabindex: "-1" }, "Configuration"), status.element, current, history);
  await reload();
}
