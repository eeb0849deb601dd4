import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

/**
 * The domain is the only writer (docs/development.md, "Layout and tools"):
 * stores are built in one place, the composition root (src/composition and
 * src/app.ts), from the implementations in src/storage; everything else
 * receives domain services. These rules make that structural: a file that
 * breaks them fails here, with the line to change.
 */
const root = process.cwd();
const src = join(root, "src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === "generated" ? [] : sourceFiles(path);
    return path.endsWith(".ts") ? [path] : [];
  });
}

interface ImportSite {
  file: string;
  line: number;
  /** The imported module, relative to the project (src/storage/...). */
  target: string;
}

/** Every relative import of a file: static, re-export, type-only and dynamic `import()`. */
function importsOf(file: string): ImportSite[] {
  const text = readFileSync(file, "utf8");
  const sites: ImportSite[] = [];
  const pattern = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)["'](\.{1,2}\/[^"']+)["']/gm;
  for (const match of text.matchAll(pattern)) {
    const specifier = match[1] as string;
    const line = text.slice(0, match.index).split("\n").length;
    const target = relative(root, resolve(dirname(file), specifier)).replace(/\.js$/, ".ts");
    sites.push({ file: relative(root, file), line, target });
  }
  return sites;
}

const sites = sourceFiles(src).flatMap(importsOf);
const where = (site: ImportSite) => `${site.file}:${site.line} imports ${site.target}`;
const isCompositionRoot = (file: string) => file.startsWith("src/composition/") || file === "src/app.ts";

describe("the composition root is the only place that builds stores", () => {
  test("no file outside src/composition, src/app.ts and src/storage imports src/storage (store factories and their types)", () => {
    const offending = sites.filter(
      (site) => site.target.startsWith("src/storage/") && !site.file.startsWith("src/storage/") && !isCompositionRoot(site.file),
    );
    expect(offending.map(where)).toEqual([]);
  });

  test("the domain imports neither src/storage nor src/server (nor the composition root, handlers or doors)", () => {
    const forbidden = /^src\/(storage|server|composition|handlers|interceptors|rest|dashboard|cli|app\.ts)/;
    const offending = sites.filter((site) => site.file.startsWith("src/domain/") && forbidden.test(site.target));
    expect(offending.map(where)).toEqual([]);
  });

  test("the rules see the imports they judge (a sample of known ones)", () => {
    expect(sites.some((s) => s.file === "src/composition/identity.ts" && s.target === "src/storage/identity-store.ts")).toBe(true);
    expect(sites.some((s) => s.file === "src/cli/with-app.ts" && s.target === "src/composition/platform.ts")).toBe(true);
  });
});
