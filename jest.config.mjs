import { readdirSync, readFileSync } from "node:fs";

/**
 * On PostgreSQL (TEST_DATABASE_URL), the suite runs only what touches storage:
 * a file under test/gateway or test/unit that opens no store (none of the
 * support modules below) and does not read TEST_DATABASE_URL behaves the same on either database and has run on
 * SQLite already. test/http and test/storage always run; their files that do
 * not depend on the database skip themselves on PostgreSQL.
 */
const storageSupport = /from "\.\.\/support\/(server|database|dashboard-server|passkey-client)\.js"|TEST_DATABASE_URL/;
const storageFree = (dir) =>
  readdirSync(new URL(`./test/${dir}/`, import.meta.url))
    .filter((file) => file.endsWith(".test.ts"))
    .filter((file) => !storageSupport.test(readFileSync(new URL(`./test/${dir}/${file}`, import.meta.url), "utf8")))
    .map((file) => `<rootDir>/test/${dir}/${file}`);
const onPostgres = process.env.TEST_DATABASE_URL?.startsWith("postgres") ?? false;

/** Native ESM jest with swc: the same module graph the server runs. */
export default {
  testPathIgnorePatterns: ["/node_modules/", ...(onPostgres ? [...storageFree("gateway"), ...storageFree("unit")] : [])],
  testEnvironment: "node",
  extensionsToTreatAsEsm: [".ts"],
  transform: {
    "^.+\\.ts$": [
      "@swc/jest",
      {
        jsc: { parser: { syntax: "typescript" }, target: "es2022" },
        module: { type: "es6" },
        sourceMaps: "inline",
      },
    ],
  },
  moduleNameMapper: { "^(\\.{1,2}/.*)\\.js$": "$1" },
  testMatch: ["<rootDir>/test/**/*.test.ts"],
  testTimeout: 60_000,
  // Test files share one machine with 2 cores and start real servers.
  maxWorkers: 2,
  // A worker keeps some of every file's modules alive, and its heap grows file after file (to
  // gigabytes over the suite): each full collection then takes seconds, and the tests that
  // collect on purpose (gateway-streaming's memory samples) took minutes. A worker past this
  // after a file is replaced by a fresh one.
  workerIdleMemoryLimit: "512MB",
};
