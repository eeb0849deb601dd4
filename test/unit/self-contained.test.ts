import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";

/**
 * The repository stands on its own: code comments, test descriptions, scripts,
 * benchmarks and docs cite a section of docs/ (`docs/gateway.md, "Tracing"`) or
 * an RFC, never a document a newcomer does not have (a contract or
 * specification kept outside the repository, or a sibling `../shared` folder).
 */
const root = process.cwd();
const self = "test/unit/self-contained.test.ts";

/** What cites a document outside the repository. */
const outsideCitations: RegExp[] = [
  /CONTRACT\.md/,
  /SPECIFICATION\.md/,
  /\bCONTRACT\b/,
  /\bSPECIFICATION\b/,
  /\.\.\/shared\b/,
  /\b[Tt]he contract\b/,
  /\bcontract's\b/,
];

function outsideCitationIn(line: string): RegExp | undefined {
  return outsideCitations.find((pattern) => pattern.test(line));
}

/** Every tracked text file (as it is in the work tree), with its lines. */
function trackedTextFiles(): { path: string; lines: string[] }[] {
  const paths = execFileSync("git", ["ls-files", "-z"], { cwd: root, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 })
    .split("\0")
    .filter((path) => path !== "");
  const files: { path: string; lines: string[] }[] = [];
  for (const path of paths) {
    let bytes: Buffer;
    try {
      bytes = readFileSync(join(root, path));
    } catch {
      continue; // deleted in the work tree, not yet in the index
    }
    if (bytes.includes(0)) continue; // binary
    files.push({ path, lines: bytes.toString("utf8").split("\n") });
  }
  return files;
}

describe("the repository cites only itself and public standards", () => {
  test("the patterns catch the citations they are for, and not ordinary words", () => {
    for (const line of [
      ' * CONTRACT.md "Gateway (data plane)", routing',
      "// see SPECIFICATION.md",
      '/** (CONTRACT: 24 hours) and CONTRACT "Keys that rotate" */',
      "as ../shared/README says",
      "the answers the contract gives",
      "plugins, in the contract's order",
    ]) {
      expect({ line, caught: outsideCitationIn(line) !== undefined }).toEqual({ line, caught: true });
    }
    for (const line of [
      'docs/gateway.md, "The data plane: how the gateway enforces it"',
      "test/storage/ runs the stores' contract suite",
      "gateway-contract-processes.test.ts",
      "Standard Webhooks: per the specification, between 24 and 64 bytes",
    ]) {
      expect({ line, caught: outsideCitationIn(line) !== undefined }).toEqual({ line, caught: false });
    }
  });

  test("no tracked file cites CONTRACT.md, SPECIFICATION.md, ../shared or “the contract” (file:line)", () => {
    const files = trackedTextFiles();
    expect(files.length).toBeGreaterThan(100);
    const found: string[] = [];
    for (const { path, lines } of files) {
      if (path === self) continue;
      lines.forEach((line, index) => {
        if (outsideCitationIn(line)) found.push(`${path}:${index + 1}: ${line.trim().slice(0, 160)}`);
      });
    }
    expect(found).toEqual([]);
  });
});
