import { Composer, type Document, isAlias, isMap, isScalar, isSeq, Lexer, LineCounter, type Node, Parser } from "yaml";
import type { CST } from "yaml";

/**
 * The general YAML reader, for documents outside the fast reader's subset:
 * the `yaml` package, driven through its public stages (Lexer, Parser,
 * Composer) so that hostile input within the 5 MiB body limit costs time
 * linear in its size and never exhausts the stack or the heap:
 *
 * - Nesting is bounded while the text is parsed, before any recursive stage
 *   runs (docs/gateway.md, "Import: `PUT /organization/{id}/config`":
 *   nesting deeper than 64 levels is a 400). Measured
 *   without the bound: 5 MiB of "[" takes the parser 18 s and 2.8 GB, left
 *   unclosed it runs the process out of memory, and composing 10,000 levels
 *   overflows the stack.
 * - Duplicate keys are found here with a hash set: the package's `uniqueKeys`
 *   compares every key with every other (50,000 keys in one mapping: 35 s).
 * - Aliases are resolved here, once each, with a bound on the nodes they
 *   expand to ("billion laughs"): the package's toJS looks each alias up by
 *   walking the whole document (100,000 aliases: minutes).
 */

/** Deepest nesting of lists and mappings accepted (docs/gateway.md, "Import: `PUT /organization/{id}/config`"). */
export const maxNestingDepth = 64;

/**
 * How many nodes aliases may expand to, in all: enough for a shared anchor on
 * every route of a large document, far too few for a "billion laughs".
 */
export const maxAliasExpansions = 100_000;

/** A problem with the YAML text itself, at a place in it. */
export interface YamlProblem {
  description: string;
  line?: number;
  column?: number;
}

export type ParsedYaml =
  | { ok: true; value: unknown; document: Document.Parsed; lineCounter: LineCounter }
  | { ok: false; problems: YamlProblem[] };

const collectionTokens = new Set(["block-map", "block-seq", "flow-collection"]);

/** Parses one YAML document into its JavaScript value (YAML 1.2 core schema), or says why it cannot. */
export function parseYamlDocument(text: string): ParsedYaml {
  const lineCounter = new LineCounter();
  const at = (offset: number, description: string): YamlProblem => {
    const { line, col } = lineCounter.linePos(offset);
    return { description, line, column: col };
  };
  lineCounter.addNewLine(0);
  const parser = new Parser(lineCounter.addNewLine);
  const tokens: CST.Token[] = [];
  for (const lexeme of new Lexer().lex(text)) {
    for (const token of parser.next(lexeme)) tokens.push(token);
    // The parser's stack holds the collections being built (and a few other tokens): check it only when it could be too deep.
    if (parser.stack.length > maxNestingDepth) {
      let depth = 0;
      for (const token of parser.stack) {
        if (collectionTokens.has(token.type) && ++depth > maxNestingDepth) return { ok: false, problems: [at(token.offset, tooDeep)] };
      }
    }
  }
  for (const token of parser.end()) tokens.push(token);

  // uniqueKeys: false, because duplicates are found below in linear time.
  const composer = new Composer({ uniqueKeys: false });
  let document: Document.Parsed | undefined;
  const problems: YamlProblem[] = [];
  for (const composed of composer.compose(tokens, true, text.length)) {
    if (!document) document = composed;
    else {
      problems.push(at(composed.range[0], "the body holds more than one YAML document (---): send exactly one"));
      break;
    }
  }
  if (!document) return { ok: false, problems: [{ description: "the document is empty" }] };
  for (const error of document.errors) problems.unshift(at(error.pos[0], describeYamlError(error.code, error.message)));
  if (problems.length > 0) return { ok: false, problems: sortByPlace(problems) };

  const converted = toValue(document);
  if (converted.problems.length > 0)
    return { ok: false, problems: sortByPlace(converted.problems.map((p) => at(p.offset, p.description))) };
  return { ok: true, value: converted.value, document, lineCounter };
}

const tooDeep = `lists and mappings nest deeper than ${maxNestingDepth} levels here: a configuration document needs only a few; remove the extra nesting`;

function sortByPlace(problems: YamlProblem[]): YamlProblem[] {
  return problems.sort((a, b) => (a.line ?? 0) - (b.line ?? 0) || (a.column ?? 0) - (b.column ?? 0));
}

/** The package's message, without any text of the document (an error never repeats what the request carried). */
function describeYamlError(code: string, message: string): string {
  if (code === "MULTIPLE_DOCS") return "the body holds more than one YAML document (---): send exactly one";
  // A few messages end with the offending source (an alias name, a token): keep only what went wrong.
  const general = message.replace(/(\)|[a-z]): .*$/s, "$1").slice(0, 200);
  return `invalid YAML: ${general}`;
}

interface Conversion {
  value: unknown;
  problems: { offset: number; description: string }[];
}

/**
 * The document's value. Aliases refer to the last anchor of their name before
 * them; an anchored node is converted once and shared by its aliases (as the
 * package's toJS does), after checking how much the aliases would expand to.
 */
function toValue(document: Document.Parsed): Conversion {
  const problems: Conversion["problems"] = [];
  const anchors = new Map<string, Node>();
  const targets = new Map<Node, Node>();
  /** Nodes a value expands to, and its nesting height, per node (aliases included). */
  const sizes = new Map<Node, { size: number; height: number }>();
  let expansions = 0;
  let stop = false;

  // One pass in document order: resolve aliases, measure expansions. Recursion is bounded by maxNestingDepth.
  const measure = (node: unknown, depth: number): { size: number; height: number } => {
    if (stop || node === null || node === undefined) return { size: 1, height: 0 };
    const n = node as Node;
    if (isAlias(n)) {
      const target = anchors.get(n.source);
      const range = n.range ?? [0];
      if (!target) {
        problems.push({ offset: range[0], description: "invalid YAML: an alias refers to an anchor that is not defined before it" });
        return { size: 1, height: 0 };
      }
      targets.set(n, target);
      const measured = sizes.get(target);
      if (!measured) {
        stop = true;
        problems.push({ offset: range[0], description: "an alias cannot refer to a list or mapping that contains it" });
        return { size: 1, height: 0 };
      }
      expansions += measured.size;
      if (expansions > maxAliasExpansions) {
        stop = true;
        problems.push({
          offset: range[0],
          description: `aliases expand too much (to more than ${maxAliasExpansions} nodes): write the document without deeply nested anchors`,
        });
      } else if (depth + measured.height > maxNestingDepth) {
        stop = true;
        problems.push({ offset: range[0], description: `this alias nests the document deeper than ${maxNestingDepth} levels` });
      }
      return measured;
    }
    if (n.anchor) anchors.set(n.anchor, n);
    let result = { size: 1, height: 0 };
    if (isMap(n) || isSeq(n)) {
      let size = 1;
      let height = 0;
      for (const item of n.items as unknown[]) {
        const parts = isMap(n) ? [(item as { key: unknown }).key, (item as { value: unknown }).value] : [item];
        for (const part of parts) {
          const child = measure(part, depth + 1);
          size += child.size;
          height = Math.max(height, child.height);
        }
      }
      result = { size, height: height + 1 };
    }
    sizes.set(n, result);
    return result;
  };
  measure(document.contents, 0);
  if (problems.length > 0) return { value: undefined, problems };

  const converted = new Map<Node, unknown>();
  const convert = (node: unknown): unknown => {
    if (node === null || node === undefined) return null;
    let n = node as Node;
    if (isAlias(n)) n = targets.get(n) as Node;
    const done = converted.get(n);
    if (done !== undefined || converted.has(n)) return done;
    let value: unknown;
    if (isScalar(n)) value = n.value;
    else if (isSeq(n)) value = n.items.map(convert);
    else if (isMap(n)) {
      const map: Record<string, unknown> = {};
      for (const pair of n.items) {
        const keyNode = isAlias(pair.key) ? targets.get(pair.key as Node) : pair.key;
        const keyOffset = (pair.key as Node | null)?.range?.[0] ?? n.range?.[0] ?? 0;
        if (keyNode !== null && keyNode !== undefined && !isScalar(keyNode)) {
          problems.push({ offset: keyOffset, description: "invalid YAML: a mapping key must be a plain value, not a list or mapping" });
          continue;
        }
        const raw = isScalar(keyNode) ? keyNode.value : null;
        const key = raw === null || raw === undefined ? "" : String(raw);
        if (Object.hasOwn(map, key)) {
          problems.push({ offset: keyOffset, description: "invalid YAML: Map keys must be unique: each key may appear once per mapping" });
          continue;
        }
        // defineProperty: a "__proto__" key is data, not the object's prototype.
        Object.defineProperty(map, key, { value: convert(pair.value), enumerable: true, writable: true, configurable: true });
      }
      value = map;
    } else value = null;
    if (n.anchor) converted.set(n, value);
    return value;
  };
  const value = convert(document.contents);
  return { value, problems };
}
