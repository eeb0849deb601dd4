import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { makeCertificate } from "../support/certificates.js";
import { applyOk, exportOk } from "../support/config-documents.js";
import { secretsApi } from "../support/secrets-client.js";
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

const reference = /\$\{secret:([a-z0-9][a-z0-9_-]*)\/([A-Za-z_][A-Za-z0-9_.-]*)\}/g;

/**
 * The secrets an example references, made first as a reader would: a
 * domain's certificate and key are a real pair for its name (openssl), any
 * other reference a plain value.
 */
async function provideSecrets(example: Example): Promise<void> {
  const secrets = secretsApi(server, server.credentials.api_key);
  const provided = new Set<string>();
  const document = parse(example.text) as { domains?: { name: string; tls?: { certificate: string; private_key: string } }[] };
  for (const domain of document.domains ?? []) {
    if (domain.tls === undefined) continue;
    const pair = await makeCertificate([domain.name]);
    for (const [ref, value] of [
      [domain.tls.certificate, pair.cert],
      [domain.tls.private_key, pair.key],
    ] as const) {
      const [, environment, name] = /^\$\{secret:([^/]+)\/(.+)\}$/.exec(ref) ?? [];
      await secrets.put(name!, environment!, value);
      provided.add(ref);
    }
  }
  for (const match of example.text.matchAll(reference)) {
    if (provided.has(match[0])) continue;
    await secrets.put(match[2]!, match[1]!, "docs-example-value");
    provided.add(match[0]);
  }
}

describe.each(examples.map((example) => [example.line, example] as const))("the example at docs/gateway.md:%i", (_line, example) => {
  test("applies through the API, and exports as the docs show", async () => {
    const key = server.credentials.api_key;
    await provideSecrets(example);
    await applyOk(server, key, example.text, { strict: true });
    const exported = await exportOk(server, key);
    if (example.exported !== undefined) expect(exported.yaml).toBe(example.exported);
    const again = await applyOk(server, key, exported.yaml, { strict: true });
    expect(again).toMatchObject({ revision: exported.revision, created: [], updated: [], deleted: [] });
  });
});
