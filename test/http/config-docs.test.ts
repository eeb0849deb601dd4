import { readFileSync } from "node:fs";
import { join } from "node:path";
import { applyOk, exportOk } from "../support/config-documents.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * The YAML examples of docs/gateway.md are documents that apply: each ```yaml
 * block is PUT (strict) through the API, and where a ```yaml export block
 * follows it, that block is exactly what GET answers afterwards, and
 * re-importing it changes nothing. A docs example that does not apply fails
 * here.
 */
interface Example {
  /** 1-based line of the opening fence. */
  line: number;
  text: string;
  /** What export writes after the example applied, when the docs show it. */
  exported?: string;
}

function yamlExamples(markdown: string): Example[] {
  const examples: Example[] = [];
  const lines = markdown.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const open = /^```yaml(?:\s+(\S+))?\s*$/.exec(lines[i] ?? "");
    if (!open) continue;
    const body: string[] = [];
    let j = i + 1;
    while (j < lines.length && lines[j] !== "```") body.push(lines[j++] ?? "");
    const text = `${body.join("\n")}\n`;
    if (open[1] === "export") {
      const previous = examples[examples.length - 1];
      if (!previous || previous.exported !== undefined) throw new Error(`docs/gateway.md:${i + 1}: a yaml export block follows no example`);
      previous.exported = text;
    } else examples.push({ line: i + 1, text });
    i = j;
  }
  return examples;
}

const examples = yamlExamples(readFileSync(join(process.cwd(), "docs/gateway.md"), "utf8"));
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

test("docs/gateway.md has YAML examples, the upstreams example with its export among them", () => {
  expect(examples.length).toBeGreaterThanOrEqual(2);
  expect(examples.some((example) => example.exported?.includes("\nupstreams:\n  - name: plants\n"))).toBe(true);
});

describe.each(examples.map((example) => [example.line, example] as const))("the example at docs/gateway.md:%i", (_line, example) => {
  test("applies through the API, and exports as the docs show", async () => {
    const key = server.credentials.api_key;
    await applyOk(server, key, example.text, { strict: true });
    const exported = await exportOk(server, key);
    if (example.exported !== undefined) expect(exported.yaml).toBe(example.exported);
    const again = await applyOk(server, key, exported.yaml, { strict: true });
    expect(again).toMatchObject({ revision: exported.revision, created: [], updated: [], deleted: [] });
  });
});
