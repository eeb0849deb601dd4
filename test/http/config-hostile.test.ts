import { applyOk, exportOk, putConfig, reasonOf, violationsOf, type ErrorJson } from "../support/config-documents.js";
import { connectCall } from "../support/credentials.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * Documents built to exhaust the server (deep nesting, alias bombs, huge
 * scalars) are refused on both doors with a 400 that says where, nothing is
 * applied, and the server keeps answering.
 */
let server: TestServer;
let key: string;
let before: { revision: number; yaml: string };

beforeAll(async () => {
  server = await startTestServer();
  key = server.credentials.api_key;
  await applyOk(server, key, "version: 1\ndomains:\n  - name: api.example.com\n");
  before = await exportOk(server, key);
});
afterEach(async () => {
  // Nothing was applied, and the server still answers.
  expect(await exportOk(server, key)).toEqual(before);
  expect((await server.call("/healthz")).status).toBe(200);
});
afterAll(() => server.close());

const bodyLimit = 5 * 1024 * 1024;

function billionLaughs(): string {
  const levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
  for (let i = 1; i < 10; i++) {
    const name = String.fromCharCode(97 + i);
    levels.push(
      `${name}: &${name} [${Array(9)
        .fill(`*${String.fromCharCode(96 + i)}`)
        .join(",")}]`,
    );
  }
  return `version: 1\nx:\n${levels.map((l) => `  ${l}`).join("\n")}\n`;
}

const hostile: [string, () => string, RegExp][] = [
  ["10,000 levels of flow lists", () => `version: 1\nx: ${"[".repeat(10_000)}${"]".repeat(10_000)}\n`, /nest deeper than 64 levels/],
  ["10,000 levels of flow mappings", () => `version: 1\nx: ${"{a: ".repeat(10_000)}1${"}".repeat(10_000)}\n`, /nest deeper than 64 levels/],
  ["10,000 levels of block lists", () => `version: 1\nx:\n  ${"- ".repeat(10_000)}1\n`, /nest deeper than 64 levels/],
  [
    "3,000 levels of indented block mappings (4.3 MiB)",
    () => `version: 1\n${Array.from({ length: 3_000 }, (_, i) => `${" ".repeat(i)}a:`).join("\n")} 1\n`,
    /nest deeper than 64 levels/,
  ],
  ["5 MiB of unclosed [", () => `version: 1\nx: ${"[".repeat(bodyLimit - 16)}`, /nest deeper than 64 levels/],
  ["a billion laughs", billionLaughs, /aliases expand too much/],
  ["a 5 MiB document of one scalar", () => "a".repeat(bodyLimit - 16), /must be a mapping/],
  ["a 5 MiB key", () => `version: 1\n${"k".repeat(bodyLimit - 32)}: 1\n`, /at most 1024 chars/],
];

function expectRefusal(status: number, json: ErrorJson, description: RegExp) {
  expect({ status, code: json.code, reason: reasonOf(json) }).toEqual({ status: 400, code: "invalid_argument", reason: "invalid_config" });
  const violations = violationsOf(json);
  expect(violations[0]).toEqual({
    field: "document",
    description: expect.stringMatching(description),
    line: expect.any(Number),
    column: expect.any(Number),
  });
  // The answer says where, never what: it does not repeat the document.
  expect(JSON.stringify(json).length).toBeLessThan(2_000);
}

describe("REST PUT /organization/{id}/config", () => {
  test.each(hostile)("%s is a 400 with a line and column", async (_name, make, description) => {
    const response = await putConfig(server, key, make());
    expectRefusal(response.status, (await response.json()) as ErrorJson, description);
  });

  test("the same documents sent at once are all refused while the server keeps answering", async () => {
    const health = server.call("/healthz");
    const answers = await Promise.all(hostile.slice(0, 4).map(([, make]) => putConfig(server, key, make())));
    expect(answers.map((a) => a.status)).toEqual([400, 400, 400, 400]);
    expect((await health).status).toBe(200);
  });
});

describe("Connect ApplyConfig", () => {
  test.each(hostile)("%s is a 400 with a line and column", async (_name, make, description) => {
    const response = await connectCall(
      server,
      "/svc.v1.ConfigService/ApplyConfig",
      { organizationId: server.credentials.organization_id, yaml: make() },
      key,
    );
    expectRefusal(response.status, (await response.json()) as ErrorJson, description);
  });
});
