import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";

/** Generated code and schemas are committed; these checks keep them honest. */
const root = process.cwd();
const buf = join(root, "node_modules", ".bin", "buf");

function listFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? listFiles(path) : [path];
  });
}

describe("protobuf", () => {
  test("buf lint (STANDARD) is clean", () => {
    const result = spawnSync(buf, ["lint"], { cwd: root, encoding: "utf8" });
    expect(result.stdout + result.stderr).toBe("");
    expect(result.status).toBe(0);
  });

  test("the committed gen/ is exactly what buf generate makes", () => {
    const out = mkdtempSync(join(tmpdir(), "gatehouse-gen-"));
    try {
      execFileSync(buf, ["generate", "-o", out], { cwd: root, stdio: "pipe" });
      const fresh = join(out, "gen");
      const committed = listFiles(join(root, "gen"))
        .map((f) => relative(join(root, "gen"), f))
        .sort();
      const generated = listFiles(fresh)
        .map((f) => relative(fresh, f))
        .sort();
      expect(committed).toEqual(generated);
      for (const file of generated) {
        expect({ file, text: readFileSync(join(root, "gen", file), "utf8") }).toEqual({
          file,
          text: readFileSync(join(fresh, file), "utf8"),
        });
      }
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});

describe("Prisma schema", () => {
  test("both providers' schema files are generated from prisma/models.prisma", () => {
    const result = spawnSync(process.execPath, ["scripts/prisma-schemas.mjs", "--check"], { cwd: root, encoding: "utf8" });
    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
  });

  test("the committed migrations of both providers produce the current schema", () => {
    const providers = process.env.TEST_DATABASE_URL?.startsWith("postgres") ? [] : ["--provider", "sqlite"];
    const env = { ...process.env };
    if (process.env.TEST_DATABASE_URL?.startsWith("postgres")) {
      const url = new URL(process.env.TEST_DATABASE_URL);
      url.pathname = "/postgres";
      env.GATEHOUSE_MIGRATION_DATABASE_URL = url.toString();
    }
    const result = spawnSync(process.execPath, ["scripts/prisma-migration.mjs", "--check", ...providers], {
      cwd: root,
      encoding: "utf8",
      env,
    });
    expect({ status: result.status, out: result.stdout + result.stderr }).toMatchObject({ status: 0 });
  });
});
