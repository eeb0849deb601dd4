import { isAlias, isMap, isScalar, isSeq, type LineCounter, visit, type Document, type Node, type Pair, type YAMLMap } from "yaml";
import { DomainError, type Violation } from "../errors.js";
import { parseYamlDocument } from "./parse-yaml-document.js";
import { parseYamlSubset, type PositionNode } from "./parse-yaml-subset.js";
import { formatPath, type PathSegment, type PathViolation } from "./path-violations.js";
import { validateConfigDocument, type ValidatedDocument } from "./validate-config-document.js";

/** At most this many violations are listed; a last one says how many more there were. */
export const maxListedViolations = 1_000;

export interface Position {
  line: number;
  column: number;
}

/** Places a path of the document at its 1-based line and column. */
export type Locate = (path: readonly PathSegment[], at: "key" | "value") => Position | undefined;

export interface ReadDocument {
  document: ValidatedDocument;
  locate: Locate;
}

/**
 * Reads and validates a version 1 document. Documents in the usual plain
 * style take a fast path; anything else (anchors, block scalars, odd
 * spacing...) is read by the `yaml` package. Positions are computed only when
 * a violation needs them, from the same reader that read the document.
 * Throws invalid_argument (reason invalid_config) listing every violation.
 */
export function readConfigDocument(text: string): ReadDocument {
  if (text.trim() === "") {
    throw configError([{ field: "document", description: 'the document is empty: it starts with "version: 1"' }]);
  }
  const fast = parseYamlSubset(text);
  if (fast) {
    const { document, violations } = validateConfigDocument(fast.value);
    const locate = lazyLocator(text);
    if (violations.length > 0) throw configError(placeViolations(violations, locate));
    return { document, locate };
  }
  const parsed = parseYamlDocument(text);
  if (!parsed.ok) throw configError(parsed.problems.map((problem) => ({ field: "document", ...problem })));
  const locate = createLocator(parsed.document, parsed.lineCounter);
  const { document, violations } = validateConfigDocument(parsed.value);
  if (violations.length > 0) throw configError(placeViolations(violations, locate));
  return { document, locate };
}

/** Violations with their field path, line and column, in document order. */
export function placeViolations(violations: readonly PathViolation[], locate: Locate): Violation[] {
  const placed: Violation[] = violations.map((v) => {
    const position = locate(v.path, v.at);
    return { field: formatPath(v.path), description: v.description, ...(position ? { line: position.line, column: position.column } : {}) };
  });
  const rank = (v: Violation) => (v.line ?? Number.MAX_SAFE_INTEGER) * 1e6 + (v.column ?? 0);
  return placed.sort((a, b) => rank(a) - rank(b));
}

/** invalid_argument listing the violations (the first maxListedViolations of them). */
export function configError(violations: Violation[]): DomainError {
  const listed = violations.slice(0, maxListedViolations);
  if (violations.length > listed.length) {
    listed.push({
      field: "document",
      description: `and ${violations.length - listed.length} more problems (only the first ${maxListedViolations} are listed)`,
    });
  }
  const where = (v: Violation) => (v.line ? ` (line ${v.line}, column ${v.column})` : "");
  const first = violations[0];
  const message =
    violations.length === 1 && first
      ? `invalid configuration: ${first.field}${where(first)}: ${first.description}`
      : `invalid configuration, ${violations.length} problems: ${violations
          .slice(0, 5)
          .map((v) => `${v.field}${where(v)}: ${v.description}`)
          .join("; ")}${violations.length > 5 ? "; ..." : ""}`;
  return new DomainError("invalid_argument", "invalid_config", message, listed);
}

/** A locator built when first needed: from the fast reader's positions, else from the `yaml` package's nodes. */
function lazyLocator(text: string): Locate {
  let locate: Locate | undefined;
  return (path, at) => {
    locate ??= fastLocator(text) ?? yamlLocator(text);
    return locate(path, at);
  };
}

/**
 * Positions from the fast reader: the same places as the `yaml` package's
 * node ranges, at a fraction of the memory (a differential test holds them equal).
 */
export function fastLocator(text: string): Locate | undefined {
  const read = parseYamlSubset(text, { positions: true });
  if (!read) return undefined;
  let lineStarts: number[] | undefined;
  const positionOf = (offset: number): Position => {
    if (!lineStarts) {
      lineStarts = [0];
      for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) lineStarts.push(i + 1);
    }
    let low = 0;
    let high = lineStarts.length - 1;
    while (low < high) {
      const mid = (low + high + 1) >> 1;
      if ((lineStarts[mid] as number) <= offset) low = mid;
      else high = mid - 1;
    }
    return { line: low + 1, column: offset - (lineStarts[low] as number) + 1 };
  };
  return (path, at) => {
    let node: PositionNode = read.positions;
    let keyOffset: number | undefined;
    for (const segment of path) {
      const child = node.children?.get(segment);
      if (!child) return positionOf(node.offset);
      node = child.node;
      keyOffset = child.keyOffset;
    }
    return positionOf(at === "key" && keyOffset !== undefined ? keyOffset : node.offset);
  };
}

/** Positions from the `yaml` package's node ranges (none for a text it cannot read). */
export function yamlLocator(text: string): Locate {
  const parsed = parseYamlDocument(text);
  return parsed.ok ? createLocator(parsed.document, parsed.lineCounter) : () => undefined;
}

/** Finds a path in the document's node tree, following aliases; falls back to the deepest node found. */
function createLocator(document: Document, lineCounter: LineCounter): Locate {
  let aliasTargets: Map<Node, Node> | undefined;
  const resolve = (node: unknown): unknown => {
    if (!isAlias(node)) return node;
    if (!aliasTargets) {
      // An alias refers to the last anchor of its name before it, in document order.
      aliasTargets = new Map();
      const anchors = new Map<string, Node>();
      const targets = aliasTargets;
      visit(document, {
        Node(_key, node) {
          if (isAlias(node)) {
            const target = anchors.get(node.source);
            if (target) targets.set(node, target);
          } else if (node.anchor) anchors.set(node.anchor, node);
        },
      });
    }
    return aliasTargets.get(node) ?? node;
  };
  // A key index per mapping, built when first needed: a violation per key of a large mapping stays linear.
  const keyIndexes = new WeakMap<YAMLMap, Map<string, Pair>>();
  const pairOf = (map: YAMLMap, key: string): Pair | undefined => {
    let index = keyIndexes.get(map);
    if (!index) {
      index = new Map();
      for (const pair of map.items as Pair[]) {
        if (isScalar(pair.key)) {
          const name = String(pair.key.value);
          if (!index.has(name)) index.set(name, pair);
        }
      }
      keyIndexes.set(map, index);
    }
    return index.get(key);
  };
  const positionOf = (node: unknown): Position | undefined => {
    const range = (node as { range?: [number, number, number] } | null)?.range;
    if (!range) return undefined;
    const { line, col } = lineCounter.linePos(range[0]);
    return { line, column: col };
  };
  return (path, at) => {
    let node: unknown = document.contents;
    let deepest: unknown = node;
    let keyNode: unknown;
    for (const segment of path) {
      const current = resolve(node);
      keyNode = undefined;
      if (isMap(current)) {
        const pair = pairOf(current as YAMLMap, String(segment));
        if (!pair) return positionOf(deepest);
        keyNode = pair.key;
        node = pair.value ?? pair.key;
      } else if (isSeq(current) && typeof segment === "number" && current.items[segment] !== undefined) {
        node = current.items[segment];
      } else {
        return positionOf(deepest);
      }
      deepest = node;
    }
    return positionOf(at === "key" && keyNode ? keyNode : node);
  };
}
