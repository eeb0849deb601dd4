import fc from "fast-check";
import { parse, parseDocument, stringify } from "yaml";
import { resourceKinds, type CanonicalResource } from "../../src/domain/config/config-document.js";
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
