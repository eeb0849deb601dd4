/** Native ESM jest with swc: the same module graph the server runs. */
export default {
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
};
