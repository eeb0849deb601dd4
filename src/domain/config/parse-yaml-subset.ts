/**
 * A fast reader for the plain subset of YAML that configuration documents are
 * usually written in (and that renderConfigDocument writes): block mappings and
 * sequences indented with spaces, single-line plain and quoted scalars, and
 * single-line flow collections. It exists because the general `yaml` parser
 * reads about 1 MB/s and allocates a node per token, too slow and too large
 * for a 10,000-route import; this one reads the text in place.
 *
 * It answers `undefined` for anything outside that subset or anything it is
 * not certain about (anchors, tags, block scalars, multi-line scalars, tabs,
 * duplicate keys, non-string keys, unusual numbers...): the caller then parses
 * with the `yaml` package, which gives the same value for every document this
 * reader accepts (YAML 1.2 core schema). A differential test holds them equal.
 * It also leaves to the package any document nested deeper than
 * maxNestingDepth (which that reader refuses, with the place): so its own
 * recursion never goes deeper than that.
 */

import { maxNestingDepth } from "./parse-yaml-document.js";

/** Characters this reader does not handle: tabs, control characters, BOM, lone surrogates, Unicode line separators. */
const unsupportedCharacters = /[\x00-\x08\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]/;
/** A simple mapping key, then ":" and a space or the end of the line (sticky, multi-line: tried at a position). */
const keyPattern = /([A-Za-z0-9_][A-Za-z0-9_./-]{0,999}):(?: +|$)/my;
const flowKeyPattern = /([A-Za-z0-9_][A-Za-z0-9_./-]{0,999}): +/y;
const hex4 = /^[0-9a-fA-F]{4}$/;

// The YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution), as the `yaml` package spells it.
const nullPattern = /^(?:~|[Nn]ull|NULL)?$/;
const truePattern = /^(?:[Tt]rue|TRUE)$/;
const falsePattern = /^(?:[Ff]alse|FALSE)$/;
const intPattern = /^[-+]?[0-9]+$/;
const otherNumberPattern =
  /^(?:0o[0-7]+|0x[0-9a-fA-F]+|[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN|[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+|[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*))$/;

const SPACE = 32;
const HASH = 35;
const DASH = 45;

class Unsupported extends Error {}

const bail = (): never => {
  throw new Unsupported();
};

/**
 * Where a value starts in the text (as the `yaml` package's node ranges
 * start), with the positions of its entries and their keys.
 */
export interface PositionNode {
  offset: number;
  children?: Map<string | number, { keyOffset?: number; node: PositionNode }>;
}

/**
 * The document's value, or undefined when it is outside the subset. With
 * `positions`, also where each value starts (used only to report violations).
 */
export function parseYamlSubset(source: string): { value: unknown } | undefined;
export function parseYamlSubset(source: string, options: { positions: true }): { value: unknown; positions: PositionNode } | undefined;
export function parseYamlSubset(
  source: string,
  options: { positions?: boolean } = {},
): { value: unknown; positions?: PositionNode } | undefined {
  // CRLF becomes LF without moving any offset that matters: positions are only asked of LF texts.
  const text = source.includes("\r") ? source.replace(/\r\n/g, "\n") : source;
  if (unsupportedCharacters.test(text) || text.includes("\r")) return undefined;
  if (options.positions && text !== source) return undefined;
  try {
    const reader = new BlockReader(text, options.positions === true);
    if (reader.count === 0) return undefined;
    if (reader.indents[0] !== 0 || reader.isSequenceEntry(0)) return undefined;
    const value = reader.mapping(0);
    if (reader.position !== reader.count) return undefined;
    return reader.last ? { value, positions: reader.last } : { value };
  } catch (error) {
    if (error instanceof Unsupported) return undefined;
    throw error;
  }
}

/** The content lines of the text (blank and comment lines left out), as offsets into it. */
class BlockReader {
  position = 0;
  /** How many lists and mappings enclose the value being read. */
  depth = 0;
  count = 0;
  /** Position of the value read last (when tracking positions). */
  last: PositionNode | undefined;
  /** Column of the line's content (for "- key:" entries, of the key). */
  indents: Int32Array;
  /** Offset of the line's content, and of its end without trailing spaces. */
  starts: Int32Array;
  ends: Int32Array;

  constructor(
    private readonly src: string,
    private readonly track: boolean,
  ) {
    let lines = 1;
    for (let i = src.indexOf("\n"); i !== -1; i = src.indexOf("\n", i + 1)) lines++;
    this.indents = new Int32Array(lines);
    this.starts = new Int32Array(lines);
    this.ends = new Int32Array(lines);
    let sawContent = false;
    for (let lineStart = 0; lineStart <= src.length; ) {
      let lineEnd = src.indexOf("\n", lineStart);
      if (lineEnd === -1) lineEnd = src.length;
      let start = lineStart;
      while (src.charCodeAt(start) === SPACE) start++;
      let end = lineEnd;
      while (end > start && src.charCodeAt(end - 1) === SPACE) end--;
      const next = lineEnd + 1;
      if (start === end || src.charCodeAt(start) === HASH) {
        lineStart = next;
        continue;
      }
      if (start === lineStart) {
        const c = src.charCodeAt(start);
        if (c === DASH && src.startsWith("---", start)) {
          // Only a leading document start marker is understood.
          if (sawContent || !(end === start + 3 || src.startsWith("--- #", start))) bail();
          lineStart = next;
          continue;
        }
        if (src.startsWith("...", start) || c === 37 /* % */) bail();
      }
      sawContent = true;
      this.indents[this.count] = start - lineStart;
      this.starts[this.count] = start;
      this.ends[this.count] = end;
      this.count++;
      lineStart = next;
    }
  }

  isSequenceEntry(line: number): boolean {
    const start = this.starts[line] as number;
    return this.src.charCodeAt(start) === DASH && (start + 1 === this.ends[line] || this.src.charCodeAt(start + 1) === SPACE);
  }

  /** True when [from, end) is empty or a comment. */
  private isBlankRest(from: number, end: number): boolean {
    if (from >= end) return true;
    let i = from;
    while (i < end && this.src.charCodeAt(i) === SPACE) i++;
    return i === end || this.src.charCodeAt(i) === HASH;
  }

  /** Length of the "key: " at `from` (0: no simple key there). */
  private keyAt(from: number): number {
    // test() rather than exec(): no match array per line (a 10,000-route document has 70,000 keys).
    keyPattern.lastIndex = from;
    return keyPattern.test(this.src) ? keyPattern.lastIndex - from : 0;
  }

  /** A block mapping whose keys start at column `indent`. */
  mapping(indent: number): Record<string, unknown> {
    if (++this.depth > maxNestingDepth) bail();
    const result: Record<string, unknown> = {};
    const node: PositionNode | undefined = this.track ? { offset: this.starts[this.position] as number, children: new Map() } : undefined;
    while (this.position < this.count && (this.indents[this.position] as number) >= indent) {
      const line = this.position;
      if (this.indents[line] !== indent || this.isSequenceEntry(line)) bail();
      const start = this.starts[line] as number;
      const end = this.ends[line] as number;
      const length = this.keyAt(start);
      if (length === 0) bail();
      const key = keyText(this.src, start, this.src.indexOf(":", start));
      if (resolvePlain(key) !== key || key === "__proto__" || Object.hasOwn(result, key)) bail();
      const rest = Math.min(start + length, end);
      this.position++;
      // An empty value stands after the indicator and the spaces that follow it (as the yaml package places it).
      if (this.isBlankRest(rest, end)) result[key] = this.nestedValue(indent, true, start + length);
      else result[key] = this.inlineValue(rest, end, indent);
      node?.children?.set(key, { keyOffset: start, node: this.last as PositionNode });
    }
    this.depth--;
    this.last = node;
    return result;
  }

  /** A block sequence whose dashes stand at column `indent`. */
  sequence(indent: number): unknown[] {
    if (++this.depth > maxNestingDepth) bail();
    const result: unknown[] = [];
    const node: PositionNode | undefined = this.track ? { offset: this.starts[this.position] as number, children: new Map() } : undefined;
    while (this.position < this.count && this.indents[this.position] === indent && this.isSequenceEntry(this.position)) {
      const line = this.position;
      const start = this.starts[line] as number;
      const end = this.ends[line] as number;
      let rest = start + 1;
      while (rest < end && this.src.charCodeAt(rest) === SPACE) rest++;
      if (this.isBlankRest(rest, end)) {
        let empty = start + 1;
        while (this.src.charCodeAt(empty) === SPACE) empty++;
        this.position++;
        result.push(this.nestedValue(indent, false, empty));
      } else if (this.src.charCodeAt(rest) === DASH && (rest + 1 === end || this.src.charCodeAt(rest + 1) === SPACE)) {
        bail();
      } else if (this.keyAt(rest) > 0) {
        // "- key: value": a mapping whose keys start after the dash.
        this.indents[line] = indent + (rest - start);
        this.starts[line] = rest;
        result.push(this.mapping(this.indents[line] as number));
      } else {
        this.position++;
        result.push(this.inlineValue(rest, end, indent));
      }
      node?.children?.set(result.length - 1, { node: this.last as PositionNode });
    }
    // A line indented deeper than the dashes but not part of an entry is an error in YAML.
    if (this.position < this.count && (this.indents[this.position] as number) > indent) bail();
    this.depth--;
    this.last = node;
    return result;
  }

  /** The value of an entry whose line ends after the indicator: a nested block, or null. */
  private nestedValue(parentIndent: number, inMapping: boolean, emptyOffset: number): unknown {
    if (this.position < this.count) {
      const indent = this.indents[this.position] as number;
      if (indent > parentIndent) return this.isSequenceEntry(this.position) ? this.sequence(indent) : this.mapping(indent);
      // An indentless sequence: "key:" followed by "- item" at the key's column.
      if (inMapping && indent === parentIndent && this.isSequenceEntry(this.position)) return this.sequence(parentIndent);
    }
    this.last = this.track ? { offset: emptyOffset } : undefined;
    return null;
  }

  /** A value written on the same line as its key or dash. */
  private inlineValue(from: number, end: number, parentIndent: number): unknown {
    const scanner = new Scanner(this.src, from, end, this.track, this.depth);
    const value = scanner.blockValue();
    this.last = scanner.last;
    // A following line indented deeper would continue a multi-line scalar.
    if (this.position < this.count && (this.indents[this.position] as number) > parentIndent) bail();
    return value;
  }
}

/** Reads one value of one line: src[index, end). */
class Scanner {
  /** Position of the value read last (when tracking positions). */
  last: PositionNode | undefined;

  constructor(
    private readonly src: string,
    private index: number,
    private readonly end: number,
    private readonly track: boolean,
    /** How many lists and mappings enclose the value being read. */
    private depth: number,
  ) {}

  private mark(offset: number): void {
    if (this.track) this.last = { offset };
  }

  private at(i: number): string | undefined {
    return i < this.end ? this.src[i] : undefined;
  }

  blockValue(): unknown {
    const c = this.src[this.index];
    let value: unknown;
    if (c === '"' || c === "'") value = this.quoted();
    else if (c === "[" || c === "{") value = this.flow();
    else {
      this.mark(this.index);
      return resolvePlain(this.blockPlain());
    }
    this.expectEnd();
    return value;
  }

  /** A plain scalar that runs to the end of the line (or to a comment). */
  private blockPlain(): string {
    if ("-?:,[]{}#&*!|>'\"%@`".includes(this.src[this.index] as string)) bail();
    // The value ends at a " #" comment or at the end of the line (searched within the line only).
    let stop = this.index;
    while (stop < this.end && !(this.src.charCodeAt(stop) === HASH && this.src.charCodeAt(stop - 1) === SPACE)) stop++;
    while (stop > this.index && this.src.charCodeAt(stop - 1) === SPACE) stop--;
    const raw = this.src.slice(this.index, stop);
    if (raw.includes(": ") || raw.endsWith(":")) bail();
    return raw;
  }

  private expectEnd(): void {
    if (this.index === this.end) return;
    if (this.src.charCodeAt(this.index) !== SPACE) bail();
    while (this.index < this.end && this.src.charCodeAt(this.index) === SPACE) this.index++;
    if (this.index < this.end && this.src.charCodeAt(this.index) !== HASH) bail();
  }

  private skipSpaces(): void {
    while (this.index < this.end && this.src.charCodeAt(this.index) === SPACE) this.index++;
  }

  private quoted(): string {
    this.mark(this.index);
    const quote = this.src[this.index];
    const start = ++this.index;
    // Fast path: no escapes before the closing quote (searched within the line only).
    let close = start;
    while (close < this.end && this.src[close] !== quote) close++;
    if (close >= this.end) bail();
    const plainPart = this.src.slice(start, close);
    if (quote === '"' ? !plainPart.includes("\\") : this.src[close + 1] !== "'") {
      this.index = close + 1;
      return plainPart;
    }
    let out = "";
    for (;;) {
      const c = this.at(this.index);
      if (c === undefined) bail();
      if (quote === "'") {
        if (c === "'") {
          if (this.at(this.index + 1) === "'") {
            out += "'";
            this.index += 2;
            continue;
          }
          this.index++;
          return out;
        }
        out += c;
        this.index++;
        continue;
      }
      if (c === '"') {
        this.index++;
        return out;
      }
      if (c === "\\") {
        const e = this.at(this.index + 1);
        const simple = e === undefined ? undefined : jsonEscapes[e];
        if (simple !== undefined) {
          out += simple;
          this.index += 2;
          continue;
        }
        if (e === "u") {
          const hex = this.src.slice(this.index + 2, Math.min(this.index + 6, this.end));
          if (!hex4.test(hex)) bail();
          const code = parseInt(hex, 16);
          if (code >= 0xd800 && code <= 0xdfff) bail();
          out += String.fromCharCode(code);
          this.index += 6;
          continue;
        }
        bail();
      }
      out += c;
      this.index++;
    }
  }

  private flow(): unknown {
    if (++this.depth > maxNestingDepth) bail();
    const value = this.flowCollection();
    this.depth--;
    return value;
  }

  private flowCollection(): unknown {
    const node: PositionNode | undefined = this.track ? { offset: this.index, children: new Map() } : undefined;
    const open = this.src[this.index];
    this.index++;
    this.skipSpaces();
    if (open === "[") {
      const items: unknown[] = [];
      for (;;) {
        if (items.length === 0 && this.at(this.index) === "]") break;
        items.push(this.flowItem());
        node?.children?.set(items.length - 1, { node: this.last as PositionNode });
        this.skipSpaces();
        const c = this.at(this.index);
        this.index++;
        if (c === "]") {
          this.last = node;
          return items;
        }
        if (c !== ",") bail();
        this.skipSpaces();
        if (this.at(this.index) === "]") bail();
      }
      this.index++;
      this.last = node;
      return items;
    }
    const map: Record<string, unknown> = {};
    if (this.at(this.index) === "}") {
      this.index++;
      this.last = node;
      return map;
    }
    for (;;) {
      flowKeyPattern.lastIndex = this.index;
      if (!flowKeyPattern.test(this.src) || flowKeyPattern.lastIndex > this.end) bail();
      const key = keyText(this.src, this.index, this.src.indexOf(":", this.index));
      if (resolvePlain(key) !== key || key === "__proto__" || Object.hasOwn(map, key)) bail();
      const keyOffset = this.index;
      this.index = flowKeyPattern.lastIndex;
      map[key] = this.flowItem();
      node?.children?.set(key, { keyOffset, node: this.last as PositionNode });
      this.skipSpaces();
      const c = this.at(this.index);
      this.index++;
      if (c === "}") {
        this.last = node;
        return map;
      }
      if (c !== ",") bail();
      this.skipSpaces();
      if (this.at(this.index) === "}") bail();
    }
  }

  private flowItem(): unknown {
    const c = this.at(this.index);
    if (c === '"' || c === "'") return this.quoted();
    if (c === "[" || c === "{") return this.flow();
    if (c === undefined || "-?:,[]{}#&*!|>%@`".includes(c)) bail();
    const start = this.index;
    this.mark(start);
    while (this.index < this.end) {
      const ch = this.src[this.index] as string;
      if (ch === "," || ch === "]" || ch === "}" || ch === "[" || ch === "{") break;
      // In flow context ":" ends a plain scalar only before a space, an indicator or the end (YAML 1.2, ns-plain-char).
      if (ch === ":" && (this.index + 1 >= this.end || " ,[]{}".includes(this.src[this.index + 1] as string))) bail();
      if (ch === "#" && this.src.charCodeAt(this.index - 1) === SPACE) bail();
      this.index++;
    }
    let stop = this.index;
    while (stop > start && this.src.charCodeAt(stop - 1) === SPACE) stop--;
    return resolvePlain(this.src.slice(start, stop));
  }
}

/** The keys of the document format: read as these strings rather than as a new string per occurrence. */
const knownKeys = [
  "name",
  "type",
  "path",
  "match",
  "rules",
  "action",
  "config",
  "header",
  "regex",
  "domains",
  "methods",
  "plugins",
  "version",
  "ip_cidr",
  "upstream",
  "requests",
  "ignore_case",
  "path_prefix",
  "window_seconds",
];

/** The key src[start, end), as one of knownKeys when it is one. */
function keyText(src: string, start: number, end: number): string {
  const length = end - start;
  for (const known of knownKeys) if (known.length === length && src.startsWith(known, start)) return known;
  return src.slice(start, end);
}

const jsonEscapes: Record<string, string> = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };

/** The value of a plain scalar under the core schema; bails on numbers it does not reproduce exactly. */
function resolvePlain(raw: string): unknown {
  // Most scalars start with a letter that begins none of the special forms.
  const first = raw.charCodeAt(0);
  if ((first >= 97 && first <= 122 && first !== 110 && first !== 116 && first !== 102) || first === 47 || first === 95) return raw;
  if (nullPattern.test(raw)) return null;
  if (truePattern.test(raw)) return true;
  if (falsePattern.test(raw)) return false;
  if (intPattern.test(raw)) {
    if (raw.replace(/^[-+]/, "").length > 15) bail();
    return Number(raw);
  }
  if (otherNumberPattern.test(raw)) bail();
  return raw;
}
