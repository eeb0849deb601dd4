import { resourceKey, resourceKinds, type CanonicalResource, type ResourceKind, type RouteResource } from "./config-document.js";
import { namePattern } from "./config-checks.js";
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
    upstreams: new Map(),
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
    // The document's resources are used as they are (they are canonical resources already): no copy per resource.
    for (const resource of document[kind]) {
      inDocument.add(resource.name);
      resulting.push(resource);
      const old = before.get(resource.name);
      if (!old) {
        created.push(resource.name);
        plan.insert.push(resource);
      } else if (old.spec !== resource.spec) {
        updated.push(resource.name);
        plan.remove.push(old);
        plan.insert.push(resource);
      } else {
        plan.unchanged++;
      }
    }
    before.forEach((resource, name) => {
      if (inDocument.has(name)) return;
      if (strict) {
        deleted.push(name);
        plan.remove.push(resource);
      } else {
        resulting.push(resource);
      }
    });
    // Names are ASCII, so the default (UTF-16 code unit) order is byte order.
    addKeys(plan.created, kind, created.sort());
    addKeys(plan.updated, kind, updated.sort());
    addKeys(plan.deleted, kind, deleted.sort());
    resulting.sort(byName);
    for (let i = 0; i < resulting.length; i++) plan.resulting.push(resulting[i] as CanonicalResource);
  }
  return plan;
}

function addKeys(into: string[], kind: ResourceKind, names: readonly string[]): void {
  for (let i = 0; i < names.length; i++) into.push(resourceKey(kind, names[i] as string));
}

function byName(a: { name: string }, b: { name: string }): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

export function isEmptyPlan(plan: Pick<ConfigPlan, "created" | "updated" | "deleted">): boolean {
  return plan.created.length === 0 && plan.updated.length === 0 && plan.deleted.length === 0;
}

type ReferencedKind = "domains" | "upstreams" | "plugins" | "rules";

const referenced = [
  ["domains", "domains", "domain"],
  ["plugins", "plugins", "plugin"],
  ["rules", "rules", "rule"],
] as const;

/**
 * References of the document's routes (to domains, upstreams, plugins and
 * rules) that do not resolve in the resulting state. Routes outside the
 * document need no check: a merge deletes nothing, and a strict import keeps
 * no other route. `deleted` (the plan's "<kind>/<name>" list) lets a message
 * say that the import itself removes what a route still uses.
 */
export function checkReferences(
  document: ValidatedDocument,
  resulting: readonly CanonicalResource[],
  deleted: readonly string[] = [],
): PathViolation[] {
  const names: Record<ReferencedKind, Set<string>> = { domains: new Set(), upstreams: new Set(), plugins: new Set(), rules: new Set() };
  for (const resource of resulting) if (resource.kind !== "routes") names[resource.kind].add(resource.name);
  const removed = new Set(deleted);
  const hints = new Map<string, string>();
  const hintFor = (kind: ReferencedKind, word: string) => {
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
  const dangling = (path: PathViolation["path"], kind: ReferencedKind, word: string, name: string) => {
    violations.push({
      path,
      description: removed.has(resourceKey(kind, name))
        ? `${word} "${name}" does not exist once this strict import deletes it (the document leaves it out): keep it under ${kind}, or stop using it here`
        : `${word} "${name}" does not exist: ${hintFor(kind, word)}`,
      at: "value",
    });
  };
  for (const route of document.routes) {
    const value = route.value as RouteResource;
    // A name is an upstream's; anything else validation accepted is a URL.
    if (namePattern.test(value.upstream) && !names.upstreams.has(value.upstream)) {
      dangling(["routes", route.index, "upstream"], "upstreams", "upstream", value.upstream);
    }
    for (let r = 0; r < referenced.length; r++) {
      const reference = referenced[r] as (typeof referenced)[number];
      const field = reference[0];
      const kind = reference[1];
      const word = reference[2];
      const list = value[field];
      if (!list) continue;
      for (let i = 0; i < list.length; i++) {
        const name = list[i] as string;
        if (names[kind].has(name)) continue;
        dangling(["routes", route.index, field, i], kind, word, name);
      }
    }
  }
  return violations;
}
