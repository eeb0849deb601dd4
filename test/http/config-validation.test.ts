import { applyOk, exportOk, putConfig, reasonOf, violationsOf, type ErrorJson } from "../support/config-documents.js";
import { connectCall } from "../support/credentials.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * Every kind of bad document is a 400 invalid_argument (reason invalid_config)
 * that lists every violation with its path, YAML line and column, and says
 * what is wrong and what is allowed; and a refused import changes nothing.
 */
let server: TestServer;
let key: string;
let before: { revision: number; yaml: string };

const existing = `version: 1
domains:
  - name: api.example.com
plugins:
  - name: rl
    type: rate-limit
    config: {requests: 10, window_seconds: 1}
rules:
  - name: deny-bots
    match: {header: user-agent, regex: bot}
    action: deny
`;

beforeAll(async () => {
  server = await startTestServer();
  key = server.credentials.api_key;
  await applyOk(server, key, existing);
  before = await exportOk(server, key);
});
afterEach(async () => {
  // A refused import changes nothing.
  expect(await exportOk(server, key)).toEqual(before);
});
afterAll(() => server.close());

interface Expected {
  field: string;
  description: RegExp;
  line?: number;
  column?: number;
}

async function refused(body: string, options: { strict?: boolean } = {}) {
  const response = await putConfig(server, key, body, options);
  const text = await response.text();
  expect({ status: response.status, text }).toMatchObject({ status: 400 });
  const json = JSON.parse(text) as ErrorJson;
  expect(json.code).toBe("invalid_argument");
  expect(reasonOf(json)).toBe("invalid_config");
  return { json, violations: violationsOf(json) };
}

async function expectViolations(body: string, expected: Expected[], options: { strict?: boolean } = {}) {
  const { json, violations } = await refused(body, options);
  expect(violations).toHaveLength(expected.length);
  expected.forEach((e, i) => {
    const v = violations[i];
    expect(v?.field).toBe(e.field);
    expect(v?.description).toMatch(e.description);
    if (e.line !== undefined) expect({ line: v?.line, column: v?.column }).toEqual({ line: e.line, column: e.column });
    else expect(v?.line).toBeGreaterThan(0);
  });
  // The message names the first problem with its place.
  expect(json.message).toContain(expected[0]?.field ?? "");
  return violations;
}

const route = (extra: string, name = "r") =>
  `version: 1\nroutes:\n  - name: ${name}\n    path: /r\n    upstream: http://127.0.0.1:8081\n${extra}`;

describe("YAML that cannot be read", () => {
  test("a syntax error gives its line and column", async () => {
    await expectViolations("version: 1\nroutes:\n  - name: a\n   path: /x\n", [
      { field: "document", description: /invalid YAML: Sequence item without - indicator/, line: 4, column: 1 },
    ]);
    await expectViolations("version: 1\nroutes:\n\t- name: a\n", [
      { field: "document", description: /Tabs are not allowed as indentation/, line: 3, column: 1 },
    ]);
  });

  test("a key given twice in one mapping", async () => {
    await expectViolations("version: 1\ndomains: []\ndomains: []\n", [{ field: "document", description: /unique/, line: 3, column: 1 }]);
  });

  test("more than one document", async () => {
    await expectViolations("version: 1\n---\nversion: 1\n", [{ field: "document", description: /more than one YAML document/ }]);
  });

  test("an empty body", async () => {
    const { violations } = await refused("  \n");
    expect(violations).toEqual([{ field: "document", description: expect.stringMatching(/empty.*version: 1/) }]);
  });

  test("a document that is not a mapping", async () => {
    await expectViolations("- name: x\n", [
      { field: "document", description: /must be a mapping that starts with "version: 1", got a list/, line: 1, column: 1 },
    ]);
  });

  test("anchors and aliases are resolved, with a bound on their expansion (no billion laughs)", async () => {
    const levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
    for (let i = 1; i < 10; i++) {
      const prev = String.fromCharCode(96 + i);
      levels.push(`${String.fromCharCode(97 + i)}: &${String.fromCharCode(97 + i)} [${Array(9).fill(`*${prev}`).join(",")}]`);
    }
    const bomb = `version: 1\nx:\n${levels.map((l) => `  ${l}`).join("\n")}\n`;
    const started = Date.now();
    const { violations } = await refused(bomb);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(violations).toEqual([{ field: "document", description: expect.stringMatching(/aliases expand too much/), line: 8, column: 10 }]);
  });

  test("aliases within the bound are fine", async () => {
    const doc = `version: 1\nroutes:\n  - name: a\n    path: /a\n    upstream: &up http://127.0.0.1:8081\n    methods: &rw [GET, PUT]\n  - name: b\n    path: /b\n    upstream: *up\n    methods: *rw\n`;
    const plan = await applyOk(server, key, doc, { dryRun: true });
    expect(plan.created).toEqual(["routes/a", "routes/b"]);
  });
});

describe("the document's shape", () => {
  test("version is required and must be 1", async () => {
    await expectViolations("domains: []\n", [{ field: "version", description: /required.*version: 1/, line: 1, column: 1 }]);
    await expectViolations("version: 2\n", [{ field: "version", description: /must be 1.*got the number 2/, line: 1, column: 10 }]);
    await expectViolations('version: "1"\n', [{ field: "version", description: /got "1"/, line: 1, column: 10 }]);
  });

  test("unknown keys are errors, at every level", async () => {
    await expectViolations(
      `version: 1
route: []
plugins:
  - name: p
    type: rate-limit
    config: {requests: 1, window_seconds: 1, burst: 5}
    enabled: true
routes:
  - name: r
    path: /r
    upstream: http://127.0.0.1:8081
    timeout: 5
`,
      [
        {
          field: "route",
          description: /unknown key "route": a version 1 document has version, domains, upstreams, plugins, rules and routes/,
          line: 2,
          column: 1,
        },
        {
          field: "plugins[0].config.burst",
          description: /unknown key "burst" for a rate-limit plugin: its config has requests .*window_seconds/,
          line: 6,
          column: 46,
        },
        { field: "plugins[0].enabled", description: /unknown key "enabled": a plugin has name, type, config/, line: 7, column: 5 },
        {
          field: "routes[0].timeout",
          description:
            /unknown key "timeout": a route has name, domains, path, methods, upstream, timeout_ms, max_body_bytes, plugins, rules/,
          line: 12,
          column: 5,
        },
      ],
    );
  });

  test("kinds are lists of mappings with a name", async () => {
    await expectViolations(
      "version: 1\ndomains: {name: a.example.com}\nroutes:\n  - just-a-string\n  - path: /x\n    upstream: http://127.0.0.1:1\n",
      [
        { field: "domains", description: /must be a list of domains/, line: 2, column: 10 },
        { field: "routes[0]", description: /each route is a mapping with a name/, line: 4, column: 5 },
        { field: "routes[1].name", description: /required: the route's name/, line: 5, column: 5 },
      ],
    );
  });

  test("names are unique per kind", async () => {
    await expectViolations("version: 1\ndomains:\n  - name: a.example.com\n  - name: a.example.com\n", [
      { field: "domains[1].name", description: /duplicate name "a.example.com": domains\[0\] already has it/, line: 4, column: 11 },
    ]);
    // Also when the duplicate has other problems; the same name in another kind is fine.
    await expectViolations(
      `${route("    methods: [FETCH]\n")}  - name: r\n    path: /r2\nrules:\n  - name: r\n    match: {path_prefix: /x}\n    action: allow\n`,
      [
        { field: "routes[0].methods[0]", description: /not a method/, line: 6, column: 15 },
        { field: "routes[1].upstream", description: /required/, line: 7, column: 5 },
        { field: "routes[1].name", description: /duplicate name "r": routes\[0\] already has it/, line: 7, column: 11 },
      ],
    );
  });

  test("names follow [a-z0-9][a-z0-9-]{0,62}", async () => {
    await expectViolations(route("", "Create_Plant"), [
      { field: "routes[0].name", description: /invalid name "Create_Plant".*lower-case.*e\.g\. "create-plant"/, line: 3, column: 11 },
    ]);
    await expectViolations(route("", "x".repeat(64)), [{ field: "routes[0].name", description: /invalid name/, line: 3, column: 11 }]);
  });
});

describe("domains", () => {
  test.each([
    ["API.example.com", /lower case: use "api.example.com"/],
    ["https://api.example.com", /not a hostname: write the host only/],
    ["api.example.com:8080", /not a hostname/],
    ["-bad-.example.com", /not a valid hostname/],
    ["a..b", /not a valid hostname/],
  ])("%s is not a hostname", async (name, description) => {
    await expectViolations(`version: 1\ndomains:\n  - name: "${name}"\n`, [{ field: "domains[0].name", description, line: 3, column: 11 }]);
  });
});

describe("routes", () => {
  test.each([
    ["plants", /not a path: it starts with "\/"/],
    ["/a/*/b", /only allowed as a trailing "\/\*"/],
    ["/a?x=1", /no query/],
    ["/a/../b", /"\.\." segments/],
    ["/a b", /percent-encode/],
    ["/a%zz", /percent-encoded byte/],
  ])("path %s is refused", async (path, description) => {
    await expectViolations(`version: 1\nroutes:\n  - name: r\n    path: "${path}"\n    upstream: http://127.0.0.1:1\n`, [
      { field: "routes[0].path", description, line: 4, column: 11 },
    ]);
  });

  test.each([
    ["ftp://example.com", /starts with http:\/\/ or https:\/\//],
    ["http://user:secret@example.com", /cannot carry credentials/],
    ["http://example.com/?q=1", /cannot carry a query/],
    ["http://exa mple.com", /spaces/],
    ["example.com", /not an upstream URL/],
    ["ftp://user:secret@example.com", /not an upstream URL/],
  ])("upstream %s is refused", async (upstream, description) => {
    const { violations } = await refused(`version: 1\nroutes:\n  - name: r\n    path: /r\n    upstream: "${upstream}"\n`);
    expect(violations).toEqual([{ field: "routes[0].upstream", description: expect.stringMatching(description), line: 5, column: 15 }]);
    // The password of a URL is never echoed.
    expect(JSON.stringify(violations)).not.toContain("secret");
  });

  test("methods are upper-case HTTP methods, each once; an empty list is refused", async () => {
    await expectViolations(route("    methods: [get, FETCH, GET, GET]\n"), [
      { field: "routes[0].methods[0]", description: /upper case: use "GET"/, line: 6, column: 15 },
      {
        field: "routes[0].methods[1]",
        description: /"FETCH" is not a method: use one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS/,
        line: 6,
        column: 20,
      },
      { field: "routes[0].methods[3]", description: /listed twice \(also at \[2\]\)/, line: 6, column: 32 },
    ]);
    await expectViolations(route("    methods: []\n"), [
      { field: "routes[0].methods", description: /omit methods to accept every method/, line: 6, column: 14 },
    ]);
    await expectViolations(route("    domains: []\n"), [{ field: "routes[0].domains", description: /omit domains/, line: 6, column: 14 }]);
  });

  test("references to domains, plugins and rules must exist", async () => {
    await expectViolations(
      route("    domains: [api.example.com, www.example.com]\n    plugins: [rl, nope]\n    rules: [deny-bots, missing]\n"),
      [
        {
          field: "routes[0].domains[1]",
          description: /domain "www.example.com" does not exist: add it under domains or use a defined one \(api.example.com\)/,
          line: 6,
          column: 32,
        },
        { field: "routes[0].plugins[1]", description: /plugin "nope" does not exist/, line: 7, column: 19 },
        { field: "routes[0].rules[1]", description: /rule "missing" does not exist/, line: 8, column: 24 },
      ],
    );
  });
});

describe("rules", () => {
  const rule = (match: string, action = "deny") => `version: 1\nrules:\n  - name: r\n    match: ${match}\n    action: ${action}\n`;

  test.each([
    ['{header: user-agent, regex: "("}', /not a valid RE2 regular expression: missing closing \)/, 40],
    ['{header: user-agent, regex: "/bot/i"}', /without \/delimiters\/ and flags/, 40],
    ['{header: user-agent, regex: "(?i)bot"}', /inline flags such as \(\?i\) are not JavaScript/, 40],
    ['{header: user-agent, regex: "(a)\\\\1"}', /backreferences such as \\1 cannot be matched in linear time: remove them/, 40],
    ["{header: user-agent, regex: '(?=a)'}", /lookahead \(\?= and \(\?! cannot be matched in linear time/, 40],
    ["{header: user-agent, ignore_case: true, regex: 'x(?<!a)'}", /lookbehind/, 59],
    [
      '{header: user-agent, regex: "a[ab]{200}"}',
      /too costly to run on every request: it compiles to \d+ RE2 instructions, at most 100/,
      40,
    ],
    ['{header: user-agent, regex: "\\\\Abot"}', /means one thing in RE2 and another in JavaScript: use \^ instead of \\A/, 40],
  ])("regex %s is refused at its line and column", async (match, description, column) => {
    await expectViolations(rule(match), [{ field: "rules[0].match.regex", description, line: 4, column }]);
  });

  test("a regex in block style is placed at its own line", async () => {
    await expectViolations("version: 1\nrules:\n  - name: r\n    match:\n      header: x-a\n      regex: (a)\\1\n    action: deny\n", [
      { field: "rules[0].match.regex", description: /backreferences/, line: 6, column: 14 },
    ]);
  });

  test("patterns that backtrack in JavaScript are accepted: the gateway matches them with RE2, in linear time", async () => {
    const plan = await applyOk(
      server,
      key,
      "version: 1\nrules:\n  - name: r1\n    match: {header: x-a, regex: '(a+)+$'}\n    action: deny\n  - name: r2\n    match: {header: x-b, regex: '(a|aa)+', ignore_case: true}\n    action: deny\n  - name: r3\n    match: {header: x-c, regex: '^/api/v[0-9]+/'}\n    action: allow\n",
      { dryRun: true },
    );
    expect(plan.created).toEqual(["rules/r1", "rules/r2", "rules/r3"]);
  });

  test.each([
    ["10.0.0.0/33", /prefix length must be a whole number from 0 to 32/],
    ["10.0.0.1/8", /host bits set: did you mean "10.0.0.0\/8"/],
    ["2001:db8::1/32", /host bits set: did you mean "2001:db8::\/32"/],
    ["not-an-ip/8", /not an IPv4 or IPv6 address/],
    ["10.0.0.0", /write address\/prefix-length/],
  ])("ip_cidr %s is refused", async (cidr, description) => {
    await expectViolations(rule(`{ip_cidr: "${cidr}"}`), [{ field: "rules[0].match.ip_cidr", description, line: 4, column: 22 }]);
  });

  test("a match has exactly one form, and an action of deny or allow", async () => {
    await expectViolations(rule("{header: x-a, regex: a, path_prefix: /admin}", "block"), [
      { field: "rules[0].match", description: /combines header and path_prefix/, line: 4, column: 12 },
      { field: "rules[0].action", description: /must be deny or allow, got "block"/, line: 5, column: 13 },
    ]);
    await expectViolations(rule("{}"), [{ field: "rules[0].match", description: /is empty: give one of/ }]);
    await expectViolations(rule("{regex: a}"), [{ field: "rules[0].match.header", description: /required: the request header/ }]);
  });
});

describe("plugins: config is validated per type", () => {
  const plugin = (type: string, config?: string) =>
    `version: 1\nplugins:\n  - name: p\n    type: ${type}\n${config === undefined ? "" : `    config: ${config}\n`}`;

  test("an unknown type lists the known ones", async () => {
    await expectViolations(plugin("jwt", "{}"), [
      {
        field: "plugins[0].type",
        description: /unknown plugin type "jwt": use one of rate-limit, cors, session-auth, api-key-auth, request-headers/,
        line: 4,
        column: 11,
      },
    ]);
  });

  test("rate-limit needs whole numbers within bounds", async () => {
    await expectViolations(plugin("rate-limit", "{window_seconds: 0}"), [
      { field: "plugins[0].config.requests", description: /required: requests allowed per window/ },
      { field: "plugins[0].config.window_seconds", description: /whole number from 1 to 86,400, got the number 0/, line: 5, column: 30 },
    ]);
    await expectViolations(plugin("rate-limit"), [
      {
        field: "plugins[0].config",
        description: /required for a rate-limit plugin: requests \(required: requests allowed per window, per client\); window_seconds/,
        line: 3,
        column: 5,
      },
    ]);
  });

  test("cors refuses a wildcard origin with credentials, and origins with a path", async () => {
    await expectViolations(plugin("cors", '{allowed_origins: ["*"], allow_credentials: true}'), [
      { field: "plugins[0].config.allow_credentials", description: /cannot be true when allowed_origins holds "\*"/ },
    ]);
    await expectViolations(plugin("cors", '{allowed_origins: ["https://app.example.com/"]}'), [
      { field: "plugins[0].config.allowed_origins[0]", description: /use "https:\/\/app.example.com"/ },
    ]);
  });

  test("request-headers refuses framing headers, unquoted numbers and an empty config", async () => {
    await expectViolations(plugin("request-headers", "{set: {content-length: '0', x-version: 2}}"), [
      { field: 'plugins[0].config.set["content-length"]', description: /cannot be changed by a plugin/, line: 5, column: 20 },
      { field: 'plugins[0].config.set["x-version"]', description: /must be a string: quote the value/ },
    ]);
    await expectViolations(plugin("request-headers", "{}"), [
      { field: "plugins[0].config", description: /needs at least one of set, add or remove/ },
    ]);
  });

  test("session-auth and api-key-auth may omit config but not add unknown keys", async () => {
    await expectViolations(plugin("session-auth", "{required: yes}"), [
      { field: "plugins[0].config.required", description: /must be true or false, got "yes"/ },
    ]);
    const plan = await applyOk(
      server,
      key,
      `${plugin("api-key-auth")}  - name: s\n    type: session-auth\n    config: {forward_identity_header: X-Identity}\n`,
      { dryRun: true },
    );
    expect(plan.created).toEqual(["plugins/p", "plugins/s"]);
  });
});

describe("reporting", () => {
  test("every violation of a document is reported at once, in document order", async () => {
    const violations = await expectViolations(
      `version: 1
routes:
  - name: A
    path: x
    upstream: ftp://x
  - name: b
    path: /b
    upstream: http://127.0.0.1:1
    plugins: [ghost]
  - name: c
`,
      [
        { field: "routes[0].name", description: /invalid name/, line: 3, column: 11 },
        { field: "routes[0].path", description: /not a path/, line: 4, column: 11 },
        { field: "routes[0].upstream", description: /not an upstream URL/, line: 5, column: 15 },
        { field: "routes[2].path", description: /required/, line: 10, column: 5 },
        { field: "routes[2].upstream", description: /required/, line: 10, column: 5 },
      ],
    );
    // References are checked once the document itself is valid.
    expect(violations.map((v) => v.field)).not.toContain("routes[1].plugins[0]");
  });

  test("the Connect path reports the same violations with line and column", async () => {
    const response = await connectCall(
      server,
      "/svc.v1.ConfigService/ApplyConfig",
      { organizationId: server.credentials.organization_id, yaml: "version: 3\n" },
      key,
    );
    expect(response.status).toBe(400);
    const json = (await response.json()) as ErrorJson;
    expect(json.code).toBe("invalid_argument");
    expect(violationsOf(json)).toEqual([{ field: "version", description: expect.stringMatching(/must be 1/), line: 1, column: 10 }]);
  });
});
