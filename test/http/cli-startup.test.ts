import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { gatehouseBin } from "../support/cli.js";

/**
 * docs/cli.md, "Start-up": what a command loads is what it uses. These tests
 * record every module a run of the built CLI resolves (a module resolution hook,
 * Node's public module.register) and assert on the list, not on time: the
 * figures are bench/cli.mjs's.
 */
let scratch: string;

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), "gatehouse-cli-startup-"));
  // Each resolved file URL is appended to the file GATEHOUSE_TEST_MODULES names.
  const hooks = `
    import { appendFileSync } from "node:fs";
    export async function resolve(specifier, context, next) {
      const resolved = await next(specifier, context);
      if (resolved.url.startsWith("file:")) appendFileSync(process.env.GATEHOUSE_TEST_MODULES, resolved.url + "\\n");
      return resolved;
    }`;
  writeFileSync(join(scratch, "hooks.mjs"), hooks);
  writeFileSync(
    join(scratch, "register.mjs"),
    `import { register } from "node:module"; register(${JSON.stringify(`file://${join(scratch, "hooks.mjs")}`)});`,
  );
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Runs the CLI with args and returns the project files and packages it loaded, relative to the project. */
function modulesLoadedBy(args: string[], env: Record<string, string> = {}): { files: string[]; packages: string[]; status: number | null } {
  const list = join(scratch, `modules-${args.join("-")}.txt`);
  writeFileSync(list, "");
  const result = spawnSync(process.execPath, ["--import", join(scratch, "register.mjs"), gatehouseBin, ...args], {
    env: { ...process.env, GATEHOUSE_TEST_MODULES: list, GATEHOUSE_DATA_DIR: join(scratch, "data"), ...env },
    encoding: "utf8",
  });
  const loaded = [...new Set(readFileSync(list, "utf8").split("\n").filter(Boolean))].map((url) =>
    relative(process.cwd(), fileURLToPath(url)),
  );
  const packages = [...new Set(loaded.filter((path) => path.includes("node_modules/")).map((path) => packageOf(path)))].sort();
  return { files: loaded.filter((path) => !path.includes("node_modules/")), packages, status: result.status };
}

function packageOf(path: string): string {
  const parts = path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length).split("/");
  return parts[0]?.startsWith("@") ? `${parts[0]}/${parts[1]}` : (parts[0] as string);
}

/** Parts of the application that only a command's own work may load. */
const application = /^dist\/(gen\/|src\/(app|app-deps|storage|server|handlers|interceptors|crypto|gateway|dashboard|rest|plants)\b)/;

describe("the CLI loads only what a command uses", () => {
  test.each(["--version", "-V", "--help", "help keys create", "completion bash", "completion zsh"])(
    "gatehouse %s loads nothing of the application, and of the packages only commander",
    (command) => {
      const { files, packages, status } = modulesLoadedBy(command.split(" "));
      expect(status).toBe(0);
      expect(files.filter((path) => application.test(path))).toEqual([]);
      expect(packages).toEqual(["commander"]);
    },
  );

  test("keys list opens the database without loading the server, the services or the generated API", () => {
    const init = spawnSync(process.execPath, [gatehouseBin, "init", "--json"], {
      env: { ...process.env, GATEHOUSE_DATA_DIR: join(scratch, "data"), LOG_LEVEL: "warn" },
      encoding: "utf8",
    });
    expect(init.status).toBe(0);
    const organizationId = (JSON.parse(init.stdout) as { organization_id: string }).organization_id;
    const { files, packages, status } = modulesLoadedBy(["keys", "list", "--org", organizationId, "--json"]);
    expect(status).toBe(0);
    expect(files).toContain("dist/src/storage/database.js");
    // The configuration reads TRUSTED_PROXIES with the server's parser (server/client-address.js) and the gateway's settings
    // with their own reader (gateway-settings.js, edge-limits.js: plain data); nothing else of the server or the gateway loads.
    const server =
      /^dist\/(gen\/|src\/(app|server\/(?!client-address)|handlers|dashboard|rest|gateway\/(?!gateway-settings\.js|proxy\/edge-limits\.js))\b)/;
    expect(files.filter((path) => server.test(path))).toEqual([]);
    for (const heavy of ["@connectrpc/connect", "@bufbuild/protobuf", "@simplewebauthn/server", "jose", "pino"]) {
      expect(packages).not.toContain(heavy);
    }
  });
});
