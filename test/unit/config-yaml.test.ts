import fc from "fast-check";
import { parse, parseDocument, stringify } from "yaml";
import { resourceKinds, type CanonicalResource } from "../../src/domain/config/config-document.js";
import { DomainError } from "../../src/domain/errors.js";
import { maxAliasExpansions, maxNestingDepth, parseYamlDocument } from "../../src/domain/config/parse-yaml-document.js";
import { parseYamlSubset } from "../../src/domain/config/parse-yaml-subset.js";
import { fastLocator, readConfigDocument, yamlLocator } from "../../src/domain/config/read-config-document.js";
import { renderConfigDocument } from "../../src/domain/config/render-config-document.js";
import { exported, kinds, stateArbitrary, type State } from "../support/config-arbitraries.js";
import { largeDocument } from "../support/config-documents.js";

/**
 * The fast reader of plain YAML must never disagree with the `yaml` package:
 * for every text it accepts, the value is the one `yaml` gives. And the
 * renderer's output must read back (with either reader) as what was rendered.
 */

function toCanonical(state: State): CanonicalResource[] {
  return kinds.flatMap((kind) => state[kind].map((r) => ({ kind, name: r.name, spec: JSON.stringify(r) })));
}

function expectAgreement(text: string, options: { positions?: boolean } = {}): boolean {
  const fast = parseYamlSubset(text);
  if (fast === undefined) return false;
  const document = parseDocument(text);
  expect(document.errors.map((e) => e.message)).toEqual([]);
  expect(fast.value).toEqual(document.toJS());
  // The bounded reader (what the server falls back to) reads the same value.
  const bounded = parseYamlDocument(text);
  expect(bounded.ok && bounded.value).toEqual(fast.value);
  if (options.positions !== false) expectSamePositions(text, fast.value);
  return true;
}

/** Every path of the value (and a missing one under each collection) is placed where the yaml package places it. */
function expectSamePositions(text: string, value: unknown): void {
  const fast = fastLocator(text);
  expect(fast).toBeDefined();
  const slow = yamlLocator(text);
  const fromFast: unknown[] = [];
  const fromYaml: unknown[] = [];
  const visit = (node: unknown, path: (string | number)[]) => {
    for (const at of ["key", "value"] as const) {
      fromFast.push({ path, at, position: fast?.(path, at) });
      fromYaml.push({ path, at, position: slow(path, at) });
    }
    if (Array.isArray(node)) {
      node.forEach((item, i) => {
        visit(item, [...path, i]);
      });
      visit(undefined, [...path, node.length]);
    } else if (node !== null && typeof node === "object") {
      for (const [k, v] of Object.entries(node)) visit(v, [...path, k]);
      visit(undefined, [...path, "missing-key"]);
    }
  };
  visit(value, []);
  expect(fromFast).toEqual(fromYaml);
}

describe("the fast YAML reader", () => {
  test.each([
    "version: 1\ndomains:\n  - name: a.example.com\n",
    "a: 1\nb: [x, 'y z', \"q\\n\"]\nc:\n- 1\n- two\nd: {k: v, n: [1, 2]}\n",
    "a: http://x:80/y\nb: [http://x:80, https://y]\n",
    "---\na: b # comment\n# full line\n  # indented comment\nc: 'it''s'\n",
    "list:\n  - name: a\n    x: [1]\n  -   name: b\n      y: 2\n  -\n    name: c\n",
    "a:\n  b:\n  c: 1\n",
    'a: x#c\nb: [x#c]\nc: "\\u00e9\\t"\n',
    "k: 007\nl: +5\nm: ~\nn: Null\no: TRUE\np: no\nq: 1.2.3\nr: 10.0.0.0/8\n",
  ])("agrees with the yaml package on %j", (text) => {
    expect(expectAgreement(text)).toBe(true);
  });

  test.each([
    "a: &x 1\nb: *x\n",
    "a: |\n  block\n",
    "a: b\n  c\n",
    "a: 1\na: 2\n",
    "a: {x: 1, x: 2}\n",
    "a: b: c\n",
    "a: [b, ]\n",
    "1: x\n",
    "a: 1.5\n",
    "a: 0x10\n",
    "a:\n\t- b\n",
    "a: !tag b\n",
    "? complex\n: key\n",
    "a: 12345678901234567890\n",
    "- top level list\n",
  ])("leaves %j to the yaml package", (text) => {
    expect(parseYamlSubset(text)).toBeUndefined();
  });

  test("reads in linear time: ten times the routes takes about ten times as long", () => {
    const small = largeDocument({ routes: 1_000, shared: 10 });
    const large = largeDocument({ routes: 10_000, shared: 10 });
    const median = (text: string) => {
      const times: number[] = [];
      for (let i = 0; i < 3; i++) {
        const started = performance.now();
        expect(parseYamlSubset(text)).toBeDefined();
        times.push(performance.now() - started);
      }
      return times.sort((a, b) => a - b)[1] as number;
    };
    // A quadratic step would make this about 100; the margin absorbs a busy machine.
    expect(median(large) / median(small)).toBeLessThan(40);
  });

  test("agrees with the yaml package on generated plain-style documents", () => {
    // Mostly scalars the fast reader takes, some it must leave to the yaml package.
    const scalar = fc.oneof(
      {
        weight: 12,
        arbitrary: fc.constantFrom(
          "plain",
          "with space",
          "a:b",
          "x#y",
          "ünï",
          "http://h:1/p",
          "/path/*",
          "10.0.0.0/8",
          "1.2.3",
          "no",
          "yes",
          "-",
        ),
      },
      { weight: 6, arbitrary: fc.integer({ min: -1000, max: 1000 }) },
      { weight: 3, arbitrary: fc.boolean() },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          "colon: inside",
          "hash # inside",
          "quote ' \"",
          "true",
          "False",
          "1e3",
          ".5",
          "null",
          "~",
          "",
          "- dash",
          "a,b",
          "[x]",
          "{y}",
          "*star",
          "&amp",
          "!bang",
          "@at",
          "%pct",
          "`tick",
        ),
      },
      { weight: 1, arbitrary: fc.string({ maxLength: 8 }) },
    );
    const key = fc.oneof(
      { weight: 10, arbitrary: fc.constantFrom("a", "b", "name", "x-y", "k.1", "_u", "path/to") },
      { weight: 1, arbitrary: fc.constantFrom("true", "1", "null", "a b", "é") },
    );
    const value: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: "small", withCrossShrink: true },
        scalar,
        fc.array(tie("node"), { maxLength: 3 }),
        fc.dictionary(key, tie("node"), { maxKeys: 3 }),
      ),
    })).node;
    const style = fc.record({
      indent: fc.integer({ min: 1, max: 4 }),
      flow: fc.boolean(),
      quote: fc.constantFrom("plain", "single", "double"),
      comments: fc.boolean(),
    });
    let accepted = 0;
    fc.assert(
      fc.property(fc.dictionary(key, value, { minKeys: 1, maxKeys: 4 }), style, (root, s) => {
        if (expectAgreement(writeLoosely(root, s))) accepted++;
        if (expectAgreement(stringify(root))) accepted++;
      }),
      { numRuns: 300 },
    );
    // The comparison means something only if the fast reader takes a good share of them.
    expect(accepted).toBeGreaterThan(150);
  });
});

describe("the renderer", () => {
  test("writes scalars that read back as the same strings", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 12 }), (s) => {
        const text = renderConfigDocument([
          { kind: "rules", name: "r", spec: JSON.stringify({ name: "r", match: { header: "x", regex: s }, action: "deny" }) },
        ]);
        const fromYaml = parse(text) as { rules: { match: { regex: string } }[] };
        expect(fromYaml.rules[0]?.match.regex).toBe(s);
        const fast = parseYamlSubset(text);
        if (fast) expect(fast.value).toEqual(fromYaml);
      }),
      { numRuns: 300 },
    );
  });

  test("export reads back as the same canonical resources, on the fast path", () => {
    let runs = 0;
    fc.assert(
      fc.property(stateArbitrary, (state) => {
        const resources = toCanonical(state);
        const text = renderConfigDocument(resources);
        expect(expectAgreement(text, { positions: runs++ % 10 === 0 })).toBe(true);
        expect(parse(text)).toEqual(exported(state));
        const { document } = readConfigDocument(text);
        const read = resourceKinds.flatMap((kind) => document[kind].map((r) => ({ kind, name: r.name, spec: r.spec })));
        const sorted = (list: CanonicalResource[]) => [...list].sort((a, b) => (`${a.kind}/${a.name}` < `${b.kind}/${b.name}` ? -1 : 1));
        expect(sorted(read)).toEqual(sorted(resources));
        expect(renderConfigDocument(read)).toBe(text);
      }),
      { numRuns: 100 },
    );
  });
});

/** YAML in varied hand-written styles (some of them outside the fast reader's subset). */
function writeLoosely(root: Record<string, unknown>, style: { indent: number; flow: boolean; quote: string; comments: boolean }): string {
  const pad = (n: number) => " ".repeat(n);
  const scalar = (v: unknown): string => {
    if (typeof v !== "string") return String(v);
    if (style.quote === "single") return `'${v.replace(/'/g, "''")}'`;
    if (style.quote === "double") return JSON.stringify(v);
    return v;
  };
  const flow = (v: unknown): string => {
    if (Array.isArray(v)) return `[${v.map(flow).join(", ")}]`;
    if (v !== null && typeof v === "object")
      return `{${Object.entries(v)
        .map(([k, x]) => `${k}: ${flow(x)}`)
        .join(", ")}}`;
    return scalar(v);
  };
  const lines: string[] = [];
  const block = (v: unknown, indent: number) => {
    if (Array.isArray(v)) {
      if (v.length === 0 || style.flow) return void lines.push(`${pad(indent)}${flow(v)}`);
      for (const item of v) {
        if (item !== null && typeof item === "object" && !style.flow) {
          lines.push(`${pad(indent)}-`);
          block(item, indent + style.indent);
        } else lines.push(`${pad(indent)}- ${flow(item)}`);
      }
      return;
    }
    if (v !== null && typeof v === "object") {
      const entries = Object.entries(v);
      if (entries.length === 0) return void lines.push(`${pad(indent)}{}`);
      for (const [k, x] of entries) {
        if (x !== null && typeof x === "object" && !style.flow && (Array.isArray(x) ? x.length > 0 : Object.keys(x).length > 0)) {
          lines.push(`${pad(indent)}${k}:${style.comments ? " # note" : ""}`);
          block(x, indent + style.indent);
        } else lines.push(`${pad(indent)}${k}: ${flow(x)}${style.comments ? "  # note" : ""}`);
      }
      return;
    }
    lines.push(`${pad(indent)}${scalar(v)}`);
  };
  block(root, 0);
  return `${lines.join("\n")}\n`;
}

/** A value nested `depth` levels deep (lists and mappings alternating by `shape`), with a leaf scalar. */
function nested(depth: number, shape: (level: number) => "map" | "seq"): unknown {
  let value: unknown = "leaf";
  for (let level = depth; level >= 1; level--) value = shape(level) === "map" ? { k: value } : [value];
  return value;
}

/** `value` written in block style, in flow style, or in compact "- - x" style, under a root key. */
function writeNested(value: unknown, style: "block" | "flow" | "compact"): string {
  if (style === "flow") return `version: 1\nx: ${JSON.stringify(value).replace(/"/g, "")}\n`;
  const lines: string[] = [];
  const block = (v: unknown, indent: number, prefix: string) => {
    const pad = " ".repeat(indent);
    if (Array.isArray(v)) {
      if (style === "compact") return block(v[0], indent + 2, `${prefix}- `);
      lines.push(`${pad}${prefix}-`);
      return block(v[0], indent + 1, "");
    }
    if (v !== null && typeof v === "object") {
      lines.push(`${pad}${prefix}k:`);
      return block((v as { k: unknown }).k, indent + prefix.length + 1, "");
    }
    lines.push(`${pad}${prefix}${String(v)}`);
  };
  block(value, 1, "");
  return `version: 1\nx:\n${lines.join("\n")}\n`;
}

/** The depth problem, or the value, the bounded reader gives. */
function boundedRead(text: string) {
  const read = parseYamlDocument(text);
  return read.ok ? { value: read.value } : { problems: read.problems };
}

describe("nesting: both readers stop at 64 levels", () => {
  test.each(["block", "flow", "compact"] as const)("%s style: 64 levels are read alike, 65 are refused where the 65th opens", (style) => {
    const shapes = [() => "map" as const, () => "seq" as const, (l: number) => (l % 2 ? "map" : "seq") as "map" | "seq"];
    for (const shape of shapes) {
      // The root mapping is level 1, so x's value may nest 63 levels.
      const fits = writeNested(nested(maxNestingDepth - 1, shape), style);
      const fast = parseYamlSubset(fits);
      expect(boundedRead(fits)).toEqual({ value: parse(fits) });
      if (fast) expect(fast.value).toEqual(parse(fits));
      const deeper = writeNested(nested(maxNestingDepth, shape), style);
      expect(parseYamlSubset(deeper)).toBeUndefined();
      const read = boundedRead(deeper);
      expect(read.problems).toEqual([
        { description: expect.stringMatching(/nest deeper than 64 levels here/), line: expect.any(Number), column: expect.any(Number) },
      ]);
    }
  });

  test("the place is where the 65th level opens", () => {
    expect(boundedRead(`version: 1\nx: ${"[".repeat(100)}${"]".repeat(100)}\n`).problems?.[0]).toMatchObject({ line: 2, column: 4 + 63 });
    const block = `version: 1\n${Array.from({ length: 100 }, (_, i) => `${" ".repeat(i)}a:`).join("\n")} 1\n`;
    expect(boundedRead(block).problems?.[0]).toMatchObject({ line: 66, column: 65 });
  });

  test("generated nestings: the fast reader agrees with the yaml package or leaves the text to the bounded reader, which refuses exactly what is too deep", () => {
    const arbitrary = fc.record({
      depth: fc.integer({ min: 1, max: 80 }),
      pattern: fc.array(fc.constantFrom("map", "seq"), { minLength: 1, maxLength: 4 }),
      style: fc.constantFrom("block", "flow", "compact"),
    });
    fc.assert(
      fc.property(arbitrary, ({ depth, pattern, style }) => {
        const value = nested(depth, (level) => pattern[level % pattern.length] as "map" | "seq");
        const text = writeNested(value, style);
        const fast = parseYamlSubset(text);
        const read = boundedRead(text);
        if (depth + 1 > maxNestingDepth) {
          expect(fast).toBeUndefined();
          expect(read.problems?.[0]?.description).toMatch(/nest deeper than 64 levels/);
        } else {
          expect(read).toEqual({ value: parse(text) });
          if (fast) expect(fast.value).toEqual(read.value);
        }
      }),
      { numRuns: 200 },
    );
  });
});

describe("hostile documents are refused with a place, in time linear in their size", () => {
  const refusal = (text: string) => {
    try {
      readConfigDocument(text);
    } catch (error) {
      expect(error).toBeInstanceOf(DomainError);
      return (error as DomainError).violations ?? [];
    }
    throw new Error("accepted");
  };

  test.each([
    [
      "3,000 levels of block mappings (about as many as 5 MiB holds)",
      `version: 1\n${Array.from({ length: 3_000 }, (_, i) => `${" ".repeat(i)}a:`).join("\n")} 1\n`,
    ],
    ["10,000 levels of flow lists", `version: 1\nx: ${"[".repeat(10_000)}${"]".repeat(10_000)}\n`],
    ["10,000 levels of flow mappings", `version: 1\nx: ${"{a: ".repeat(10_000)}1${"}".repeat(10_000)}\n`],
    ["10,000 levels of compact lists", `version: 1\nx:\n  ${"- ".repeat(10_000)}1\n`],
    ["5 MiB of unclosed [", `version: 1\nx: ${"[".repeat(5 * 1024 * 1024 - 20)}`],
    ["deep nesting behind an anchor", `version: 1\nx: &a ${"[".repeat(10_000)}${"]".repeat(10_000)}\n`],
  ])("%s", (_name, text) => {
    expect(refusal(text)).toEqual([
      {
        field: "document",
        description: expect.stringMatching(/nest deeper than 64 levels/),
        line: expect.any(Number),
        column: expect.any(Number),
      },
    ]);
  });

  test("a billion laughs, an alias inside its own anchor and a chain of aliases nesting too deep", () => {
    const levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
    for (let i = 1; i < 10; i++) {
      levels.push(
        `${String.fromCharCode(97 + i)}: &${String.fromCharCode(97 + i)} [${Array(9)
          .fill(`*${String.fromCharCode(96 + i)}`)
          .join(",")}]`,
      );
    }
    expect(refusal(`version: 1\nx:\n${levels.map((l) => `  ${l}`).join("\n")}\n`)).toEqual([
      {
        field: "document",
        description: expect.stringMatching(`aliases expand too much \\(to more than ${maxAliasExpansions} nodes\\)`),
        line: 8,
        column: 10,
      },
    ]);
    expect(refusal("version: 1\nx: &a [*a]\n")).toEqual([
      { field: "document", description: expect.stringMatching(/cannot refer to a list or mapping that contains it/), line: 2, column: 8 },
    ]);
    const chain = Array.from({ length: 100 }, (_, i) => (i === 0 ? "a0: &a0 [x]" : `a${i}: &a${i} [*a${i - 1}]`)).join("\n");
    expect(refusal(`version: 1\n${chain}\n`)).toEqual([
      {
        field: "document",
        description: expect.stringMatching(/this alias nests the document deeper than 64 levels/),
        line: 65,
        column: 12,
      },
    ]);
    expect(refusal("version: 1\nx: *nope\n")).toEqual([
      { field: "document", description: "invalid YAML: an alias refers to an anchor that is not defined before it", line: 2, column: 4 },
    ]);
  });

  test("a huge key or scalar is refused or read, never echoed", () => {
    const huge = "k".repeat(5 * 1024 * 1024 - 20);
    for (const text of [`version: 1\n${huge}: 1\n`, `version: 1\n"${huge}": 1\n`, `version: 1\nx: &a ${huge}\n`, huge]) {
      const violations = refusal(text);
      expect(violations[0]).toMatchObject({ line: expect.any(Number), column: expect.any(Number) });
      expect(JSON.stringify(violations).length).toBeLessThan(1_000);
    }
  });

  /** Median time of three reads of `text`, in milliseconds. */
  const timeOf = (text: string) => {
    const times: number[] = [];
    for (let i = 0; i < 3; i++) {
      const started = performance.now();
      expect(() => readConfigDocument(text)).toThrow(DomainError);
      times.push(performance.now() - started);
    }
    return times.sort((a, b) => a - b)[1] as number;
  };

  test.each([
    // The yaml package compares every key of a mapping with every other (uniqueKeys)...
    ["keys of one mapping", (n: number) => `version: 1\nx: &a 1\n${Array.from({ length: n }, (_, i) => `k${i}: 1`).join("\n")}\n`],
    // ...and its toJS walks the whole document for each alias.
    ["anchors and aliases", (n: number) => `version: 1\nb: [${Array.from({ length: n }, (_, i) => `&a${i} x, *a${i}`).join(", ")}]\n`],
  ])("ten times as many %s take about ten times as long", (_name, make) => {
    const small = make(1_500);
    const large = make(15_000);
    timeOf(small);
    // A quadratic step would make this about 100; the margin absorbs a busy machine.
    expect(timeOf(large) / timeOf(small)).toBeLessThan(40);
  });
});
