import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";

/**
 * The repository stands on its own: code comments, test descriptions, scripts,
 * benchmarks and docs cite a section of docs/ (`docs/gateway.md, "Tracing"`) or
 * an RFC, never a document a newcomer does not have (a contract or
 * specification kept outside the repository, or a sibling folder of shared documents).
 */
const root = process.cwd();

// The names are put together here rather than written out, so that this file, scanned
// like every other, holds no citation itself.
const contract = "contract";
const specification = "specification";
const upper = (word: string) => word.toUpperCase();
const sharedFolder = ["..", "shared"].join("/");

/** What cites a document outside the repository. */
const outsideCitations: RegExp[] = [
  new RegExp(`${upper(contract)}\\.md`),
  new RegExp(`${upper(specification)}\\.md`),
  new RegExp(`\\b${upper(contract)}\\b`),
  new RegExp(`\\b${upper(specification)}\\b`),
  new RegExp(`${sharedFolder.replaceAll(".", "\\.")}\\b`),
  new RegExp(`\\b[Tt]he ${contract}\\b`),
  new RegExp(`\\b${contract}'s\\b`),
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
      ` * ${upper(contract)}.md "Gateway (data plane)", routing`,
      `// see ${upper(specification)}.md`,
      `/** (${upper(contract)}: 24 hours) and ${upper(contract)} "Keys that rotate" */`,
      `as ${sharedFolder}/README says`,
      `the answers the ${contract} gives`,
      `plugins, in the ${contract}'s order`,
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

  test("no tracked file, this one included, cites a document outside the repository (file:line)", () => {
    const files = trackedTextFiles();
    expect(files.length).toBeGreaterThan(100);
    const found: string[] = [];
    for (const { path, lines } of files) {
      lines.forEach((line, index) => {
        if (outsideCitationIn(line)) found.push(`${path}:${index + 1}: ${line.trim().slice(0, 160)}`);
      });
    }
    expect(found).toEqual([]);
  });
});
