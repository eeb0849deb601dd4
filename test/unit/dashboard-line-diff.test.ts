import fc from "fast-check";
import { diffLines } from "../../src/dashboard/operators/line-diff.js";

const text = (lines: string[]) => lines.map((line) => `${line}\n`).join("");

function lcsLength(a: string[], b: string[]): number {
  const table = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      table[i]![j] = a[i - 1] === b[j - 1] ? table[i - 1]![j - 1]! + 1 : Math.max(table[i - 1]![j]!, table[i]![j - 1]!);
    }
  }
  return table[a.length]![b.length]!;
}

const lines = fc.array(fc.constantFrom("a", "b", "c", "d", "  - name: x", ""), { maxLength: 14 });

describe("the configuration diff", () => {
  test("identical documents have no hunks", () => {
    expect(diffLines("version: 1\nroutes: []\n", "version: 1\nroutes: []\n")).toEqual({ hunks: [], added: 0, removed: 0 });
  });

  test("with full context, the old lines and the new lines are each recovered in order, numbered from 1", () => {
    fc.assert(
      fc.property(lines, lines, (a, b) => {
        const diff = diffLines(text(a), text(b), 1e9);
        // Identical documents have no hunk at all.
        if (text(a) === text(b)) return expect(diff.hunks).toEqual([]);
        const all = diff.hunks.flat();
        expect(all.filter((l) => l.kind !== "added").map((l) => l.text)).toEqual(a);
        expect(all.filter((l) => l.kind !== "removed").map((l) => l.text)).toEqual(b);
        expect(all.filter((l) => l.kind !== "added").map((l) => l.oldLine)).toEqual(a.map((_, i) => i + 1));
        expect(all.filter((l) => l.kind !== "removed").map((l) => l.newLine)).toEqual(b.map((_, i) => i + 1));
      }),
    );
  });

  test("the edit is a shortest one: as many unchanged lines as the longest common subsequence", () => {
    fc.assert(
      fc.property(lines, lines, (a, b) => {
        const diff = diffLines(text(a), text(b));
        expect(diff.added + diff.removed).toBe(a.length + b.length - 2 * lcsLength(a, b));
      }),
    );
  });

  test("hunks keep up to 3 lines of context and every change appears in exactly one hunk", () => {
    const before = Array.from({ length: 40 }, (_, i) => `line ${i}`);
    const after = [...before];
    after[5] = "changed 5";
    after[30] = "changed 30";
    const diff = diffLines(text(before), text(after));
    expect(diff.hunks).toHaveLength(2);
    expect(diff.hunks[0]!.map((l) => l.oldLine || l.newLine)).toEqual([3, 4, 5, 6, 6, 7, 8, 9]);
    expect(diff.hunks.flat().filter((l) => l.kind !== "same")).toHaveLength(4);
  });
});
