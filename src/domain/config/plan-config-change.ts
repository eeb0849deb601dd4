import { resourceKey, resourceKinds, type CanonicalResource, type ResourceKind, type RouteResource } from "./config-document.js";
import type { PathViolation } from "./path-violations.js";
import type { ValidatedDocument } from "./validate-config-document.js";

/** What an import changes, and the state it leads to. */
export interface ConfigPlan {
  /** "<kind>/<name>", in export order. */
  created: string[];
  updated: string[];
  deleted: string[];
  /** Resources of the document that are already identical. */
  unchanged: number;
  /** The whole configuration after the import, in export order. */
  resulting: CanonicalResource[];
  /** Stored resources to remove (deleted, or replaced by a new version). */
  remove: { kind: ResourceKind; name: string }[];
  /** Resources to store (created, or the new version of a replaced one). */
  insert: CanonicalResource[];
}

/**
 * Compares a document with the current state. Merge: resources of the
 * document are created or replaced whole, the others stay. Strict: the state
 * becomes the document, so resources absent from it are deleted.
 */
export function planConfigChange(existing: readonly CanonicalResource[], document: ValidatedDocument, strict: boolean): ConfigPlan {
  const current: Record<ResourceKind, Map<string, CanonicalResource>> = {
    domains: new Map(),
    plugins: new Map(),
    rules: new Map(),
    routes: new Map(),
  };
  for (const resource of existing) current[resource.kind].set(resource.name, resource);
  const plan: ConfigPlan = { created: [], updated: [], deleted: [], unchanged: 0, resulting: [], remove: [], insert: [] };
  // Kind by kind, names in byte order: the order of export and of the plan's lists.
  for (const kind of resourceKinds) {
    const before = current[kind];
    const created: string[] = [];
    const updated: string[] = [];
    const deleted: string[] = [];
    const resulting: CanonicalResource[] = [];
    const inDocument = new Set<string>();
    for (const resource of document[kind]) {
      inDocument.add(resource.name);
      const canonical: CanonicalResource = { kind, name: resource.name, spec: resource.spec, value: resource.value };
      resulting.push(canonical);
      const old = before.get(resource.name);
      if (!old) {
        created.push(resource.name);
        plan.insert.push(canonical);
      } else if (old.spec !== resource.spec) {
        updated.push(resource.name);
        plan.remove.push({ kind, name: resource.name });
        plan.insert.push(canonical);
      } else {
        plan.unchanged++;
      }
    }
    for (const [name, resource] of before) {
      if (inDocument.has(name)) continue;
      if (strict) {
        deleted.push(name);
        plan.remove.push({ kind, name });
      } else {
        resulting.push(resource);
      }
    }
    // Names are ASCII, so the default (UTF-16 code unit) order is byte order.
    for (const [names, into] of [
      [created, plan.created],
      [updated, plan.updated],
      [deleted, plan.deleted],
    ] as const) {
      for (const name of names.sort()) into.push(resourceKey(kind, name));
    }
    resulting.sort(byName);
    for (const resource of resulting) plan.resulting.push(resource);
  }
  return plan;
}

function byName(a: { name: string }, b: { name: string }): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

export function isEmptyPlan(plan: Pick<ConfigPlan, "created" | "updated" | "deleted">): boolean {
  return plan.created.length === 0 && plan.updated.length === 0 && plan.deleted.length === 0;
}

const referenced = [
  ["domains", "domains", "domain"],
  ["plugins", "plugins", "plugin"],
  ["rules", "rules", "rule"],
] as const;

/**
 * References of the document's routes (to domains, plugins and rules) that do
 * not resolve in the resulting state. Routes outside the document need no
 * check: a merge deletes nothing, and a strict import keeps no other route.
 */
export function checkReferences(document: ValidatedDocument, resulting: readonly CanonicalResource[]): PathViolation[] {
  const names: Record<"domains" | "plugins" | "rules", Set<string>> = { domains: new Set(), plugins: new Set(), rules: new Set() };
  for (const resource of resulting) if (resource.kind !== "routes") names[resource.kind].add(resource.name);
  const hints = new Map<string, string>();
  const hintFor = (kind: "domains" | "plugins" | "rules", word: string) => {
    let hint = hints.get(kind);
    if (hint === undefined) {
      const known = [...names[kind]].sort().slice(0, 10);
      hint =
        known.length === 0
          ? `no ${word} is defined: add it under ${kind}`
          : `add it under ${kind} or use a defined one (${known.join(", ")}${names[kind].size > known.length ? ", ..." : ""})`;
      hints.set(kind, hint);
    }
    return hint;
  };
  const violations: PathViolation[] = [];
  for (const route of document.routes) {
    const value = route.value as RouteResource;
    for (const [field, kind, word] of referenced) {
      (value[field] ?? []).forEach((name, i) => {
        if (names[kind].has(name)) return;
        violations.push({
          path: ["routes", route.index, field, i],
          description: `${word} "${name}" does not exist: ${hintFor(kind, word)}`,
          at: "value",
        });
      });
    }
  }
  return violations;
}
