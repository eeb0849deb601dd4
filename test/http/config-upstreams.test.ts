import { applyOk, exportOk, putConfig, reasonOf, violationsOf, type ErrorJson } from "../support/config-documents.js";
import { connectCall } from "../support/credentials.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * The `upstreams` kind (docs/gateway.md, "Upstreams"): a named pool of
 * targets that a route names as its `upstream`. Every field is validated with
 * its line and column; the kind merges, applies strictly, is referenced by
 * routes and cannot be deleted while a route uses it; export writes it in one
 * canonical form that re-imports unchanged; history and rollback carry it.
 */
let server: TestServer;
let key: string;
let org: string;

beforeAll(async () => {
  server = await startTestServer();
  key = server.credentials.api_key;
  org = server.credentials.organization_id;
});
afterAll(() => server.close());

/** Every test starts from an empty configuration. */
beforeEach(async () => {
  await applyOk(server, key, "version: 1\n", { strict: true });
});

interface Expected {
  field: string;
  description: RegExp;
  /** 1-based line of the document, and the text on that line the violation points at. */
  line: number;
  at: string;
}

async function refused(body: string, options: { strict?: boolean } = {}) {
  const before = await exportOk(server, key);
  const response = await putConfig(server, key, body, options);
  const text = await response.text();
  expect({ status: response.status, text }).toMatchObject({ status: 400 });
  const json = JSON.parse(text) as ErrorJson;
  expect({ code: json.code, reason: reasonOf(json) }).toEqual({ code: "invalid_argument", reason: "invalid_config" });
  // A refused import changes nothing.
  expect(await exportOk(server, key)).toEqual(before);
  return violationsOf(json);
}

/** Expects exactly these violations, each at the column where `at` starts on its line. */
async function expectViolations(body: string, expected: Expected[], options: { strict?: boolean } = {}) {
  const violations = await refused(body, options);
  const lines = body.split("\n");
  expect(violations.map((v) => ({ field: v.field, description: v.description, line: v.line, column: v.column }))).toEqual(
    expected.map((e) => {
      const column = (lines[e.line - 1] ?? "").indexOf(e.at) + 1;
      if (column === 0) throw new Error(`"${e.at}" is not on line ${e.line} of the test document`);
      return { field: e.field, description: expect.stringMatching(e.description), line: e.line, column };
    }),
  );
}

/** An upstream "pool" with one target; `extra` lines start at line 6. */
const upstream = (extra: string, targets = "      - {url: http://10.0.0.1:8081}\n") =>
  `version: 1\nupstreams:\n  - name: pool\n    targets:\n${targets}${extra}`;

describe("upstreams: every field is validated, with its line and column", () => {
  test("targets are required: 1 to 64 mappings with an http or https url", async () => {
    await expectViolations("version: 1\nupstreams:\n  - name: pool\n    retries: 1\n", [
      { field: "upstreams[0].targets", description: /^required: the targets requests are balanced over, 1 to 64/, line: 3, at: "name" },
    ]);
    await expectViolations("version: 1\nupstreams:\n  - name: pool\n    targets: []\n", [
      { field: "upstreams[0].targets", description: /is empty: an upstream needs at least one target/, line: 4, at: "[]" },
    ]);
    await expectViolations("version: 1\nupstreams:\n  - name: pool\n    targets: http://10.0.0.1\n", [
      { field: "upstreams[0].targets", description: /must be a list of targets .*got "http:\/\/10.0.0.1"/, line: 4, at: "http" },
    ]);
    const many = Array.from({ length: 65 }, (_, i) => `      - {url: http://10.0.${i}.1:8081}\n`).join("");
    await expectViolations(upstream("", many), [
      { field: "upstreams[0].targets", description: /holds 65 targets; at most 64 are allowed/, line: 5, at: "-" },
    ]);
    // 64 targets are fine.
    const plan = await applyOk(server, key, upstream("", many.split("\n").slice(1).join("\n")), { dryRun: true });
    expect(plan.created).toEqual(["upstreams/pool"]);
  });

  test("each target is a mapping of url and weight, and nothing else", async () => {
    await expectViolations(
      upstream(
        "",
        "      - http://10.0.0.1:8081\n      - {url: http://10.0.0.2:8081, port: 80}\n      - {weight: 5}\n      - {url: 8081}\n",
      ),
      [
        {
          field: "upstreams[0].targets[0]",
          description: /a target is a mapping with a url: write \{url: "http:\/\/10.0.0.1:8081"\}/,
          line: 5,
          at: "http",
        },
        { field: "upstreams[0].targets[1].port", description: /unknown key "port": a target has url, weight/, line: 6, at: "port" },
        { field: "upstreams[0].targets[2].url", description: /required: the http or https URL of the target/, line: 7, at: "{" },
        {
          field: "upstreams[0].targets[3].url",
          description: /must be a string \(an http or https URL\), got the number 8081/,
          line: 8,
          at: "8081",
        },
      ],
    );
  });

  test.each([
    ["ftp://10.0.0.1", /"ftp:\/\/10.0.0.1" is not an upstream URL: it starts with http:\/\/ or https:\/\//],
    ["http://user:secret@10.0.0.1", /cannot carry credentials/],
    ["http://10.0.0.1/?x=1", /cannot carry a query/],
    ["http://10.0.0.1/#top", /cannot carry a fragment/],
    ["pool-b", /not an upstream URL/],
  ])("a target url %s is checked as a route's upstream URL is", async (url, description) => {
    const violations = await refused(upstream("", `      - {url: "${url}"}\n`));
    expect(violations).toEqual([
      { field: "upstreams[0].targets[0].url", description: expect.stringMatching(description), line: 5, column: 15 },
    ]);
    // The password of a URL is never echoed.
    expect(JSON.stringify(violations)).not.toContain("secret");
  });

  test("a target is listed once, also when spelled differently", async () => {
    await expectViolations(upstream("", '      - {url: http://backend.internal}\n      - {url: "http://Backend.Internal:80/"}\n'), [
      {
        field: "upstreams[0].targets[1].url",
        description: /the same target as targets\[0\]: list each target once/,
        line: 6,
        at: '"http',
      },
    ]);
  });

  test("weight is a whole number from 0 to 1000, and one target at least takes traffic", async () => {
    for (const weight of ["1001", "-1", "1.5", '"100"']) {
      await expectViolations(upstream("", `      - {url: http://10.0.0.1:8081, weight: ${weight}}\n`), [
        {
          field: "upstreams[0].targets[0].weight",
          description: /must be a whole number from 0 to 1,000 \(0 drains the target\)/,
          line: 5,
          at: weight,
        },
      ]);
    }
    await expectViolations(
      upstream("", "      - {url: http://10.0.0.1:8081, weight: 0}\n      - {url: http://10.0.0.2:8081, weight: 0}\n"),
      [
        {
          field: "upstreams[0].targets",
          description: /every target has weight 0 \(drained\): give at least one target a weight above 0/,
          line: 5,
          at: "-",
        },
      ],
    );
    // One drained target beside a live one is fine.
    const plan = await applyOk(
      server,
      key,
      upstream("", "      - {url: http://10.0.0.1:8081, weight: 0}\n      - {url: http://10.0.0.2:8081}\n"),
      { dryRun: true },
    );
    expect(plan.created).toEqual(["upstreams/pool"]);
  });

  test("balancer is round-robin, least-requests or consistent-hash", async () => {
    await expectViolations(upstream("    balancer: random\n"), [
      {
        field: "upstreams[0].balancer",
        description: /must be one of round-robin, least-requests, consistent-hash \(absent: round-robin\), got "random"/,
        line: 6,
        at: "random",
      },
    ]);
  });

  test("hash_on is client, header:<name> or cookie:<name>, and only with consistent-hash", async () => {
    await expectViolations(upstream("    hash_on: client\n"), [
      {
        field: "upstreams[0].hash_on",
        description:
          /applies only to balancer: consistent-hash \(this upstream's balancer is round-robin\): set balancer: consistent-hash or remove hash_on/,
        line: 6,
        at: "client",
      },
    ]);
    await expectViolations(upstream("    balancer: least-requests\n    hash_on: header:x-user\n"), [
      { field: "upstreams[0].hash_on", description: /applies only to balancer: consistent-hash .*least-requests/, line: 7, at: "header" },
    ]);
    for (const [value, description] of [
      ["ip", /must be client, header:<name> or cookie:<name>/],
      ['"header:x user"', /names no header: "x user" is not an HTTP header name/],
      ['"header:"', /names no header/],
      ['"cookie:a;b"', /names no cookie: "a;b" is not a cookie name/],
      ["5", /must be a string, client, header:<name> or cookie:<name>/],
    ] as const) {
      await expectViolations(upstream(`    balancer: consistent-hash\n    hash_on: ${value}\n`), [
        { field: "upstreams[0].hash_on", description, line: 7, at: value },
      ]);
    }
    // An invalid balancer is reported once, without a second complaint about hash_on.
    await expectViolations(upstream("    balancer: ring\n    hash_on: client\n"), [
      { field: "upstreams[0].balancer", description: /must be one of/, line: 6, at: "ring" },
    ]);
  });

  test("health_check holds active, passive or both", async () => {
    await expectViolations(upstream("    health_check: {}\n"), [
      { field: "upstreams[0].health_check", description: /is empty: give active, passive or both/, line: 6, at: "{}" },
    ]);
    await expectViolations(upstream("    health_check: {active: {path: /h}, circuit: {}}\n"), [
      {
        field: "upstreams[0].health_check.circuit",
        description: /unknown key "circuit": health_check has active, passive/,
        line: 6,
        at: "circuit",
      },
    ]);
    await expectViolations(upstream("    health_check: true\n"), [
      { field: "upstreams[0].health_check", description: /must be a mapping with active, passive or both/, line: 6, at: "true" },
    ]);
  });

  test("an active check needs a path, and bounded intervals, timeouts and thresholds", async () => {
    const active = (fields: string) => upstream(`    health_check:\n      active: {${fields}}\n`);
    const cases: [string, string, RegExp, string][] = [
      ["interval_seconds: 5", "path", /required: the path each target is probed at with GET/, "{"],
      ["path: healthz", "path", /"healthz" is not a path: it starts with "\/"/, "healthz"],
      ['path: "/health?full=1"', "path", /a path has no query/, '"/health'],
      ['path: "/health/*"', "path", /"\*" has no meaning in a probe's path/, '"/health'],
      ["path: /h, interval_seconds: 0", "interval_seconds", /whole number from 1 to 3,600 seconds, got the number 0/, "0"],
      ["path: /h, interval_seconds: 3601", "interval_seconds", /whole number from 1 to 3,600 seconds/, "3601"],
      ["path: /h, timeout_ms: 9", "timeout_ms", /whole number from 10 to 60,000 ms, got the number 9/, "9"],
      ["path: /h, interval_seconds: 100, timeout_ms: 60001", "timeout_ms", /whole number from 10 to 60,000 ms/, "60001"],
      ["path: /h, healthy_after: 0", "healthy_after", /whole number from 1 to 10, got the number 0/, "0"],
      ["path: /h, unhealthy_after: 11", "unhealthy_after", /whole number from 1 to 10, got the number 11/, "11"],
      [
        "path: /h, rise: 2",
        "rise",
        /unknown key "rise": an active check has path, interval_seconds, timeout_ms, healthy_after, unhealthy_after/,
        "rise",
      ],
      // A probe ends before the next is due, defaults included.
      [
        "path: /h, interval_seconds: 2, timeout_ms: 2000",
        "timeout_ms",
        /a probe's timeout \(2000 ms\) must be shorter than the interval between probes \(2000 ms\): lower timeout_ms below 2000 or raise interval_seconds/,
        "2000}",
      ],
      [
        "path: /h, interval_seconds: 1",
        "interval_seconds",
        /a probe's timeout \(1000 ms, the default\) must be shorter than the interval between probes \(1000 ms\)/,
        "1}",
      ],
      [
        "path: /h, timeout_ms: 5000",
        "timeout_ms",
        /timeout \(5000 ms\) must be shorter than the interval between probes \(5000 ms, the default\)/,
        "5000",
      ],
    ];
    for (const [fields, field, description, at] of cases) {
      await expectViolations(active(fields), [{ field: `upstreams[0].health_check.active.${field}`, description, line: 7, at }]);
    }
    await expectViolations(upstream("    health_check:\n      active: ~\n"), [
      {
        field: "upstreams[0].health_check.active",
        description: /must be a mapping with at least the path to probe/,
        line: 7,
        at: "~",
      },
    ]);
  });

  test("a passive check takes {} for its defaults, and bounded thresholds", async () => {
    const passive = (value: string) => upstream(`    health_check:\n      passive: ${value}\n`);
    await expectViolations(passive("{unhealthy_after: 101}"), [
      {
        field: "upstreams[0].health_check.passive.unhealthy_after",
        description: /whole number from 1 to 100, got the number 101/,
        line: 7,
        at: "101",
      },
    ]);
    await expectViolations(passive("{recover_after_seconds: 0}"), [
      {
        field: "upstreams[0].health_check.passive.recover_after_seconds",
        description: /whole number from 1 to 3,600 seconds, got the number 0/,
        line: 7,
        at: "0",
      },
    ]);
    await expectViolations(passive("{recover_after_seconds: 3601, window: 1}"), [
      { field: "upstreams[0].health_check.passive.recover_after_seconds", description: /from 1 to 3,600 seconds/, line: 7, at: "3601" },
      {
        field: "upstreams[0].health_check.passive.window",
        description: /unknown key "window": a passive check has unhealthy_after, recover_after_seconds/,
        line: 7,
        at: "window",
      },
    ]);
    await expectViolations(passive("~"), [
      {
        field: "upstreams[0].health_check.passive",
        description: /must be a mapping: \{\} turns passive checks on with their defaults/,
        line: 7,
        at: "~",
      },
    ]);
  });

  test("retries go from 0 to 5; timeouts from 10 ms to 600,000 ms", async () => {
    await expectViolations(upstream("    retries: 6\n"), [
      { field: "upstreams[0].retries", description: /whole number from 0 to 5, got the number 6/, line: 6, at: "6" },
    ]);
    await expectViolations(upstream("    retries: -1\n"), [
      { field: "upstreams[0].retries", description: /from 0 to 5/, line: 6, at: "-1" },
    ]);
    await expectViolations(upstream("    timeouts: {connect_ms: 9, response_ms: 600001}\n"), [
      { field: "upstreams[0].timeouts.connect_ms", description: /whole number from 10 to 600,000 ms, got the number 9/, line: 6, at: "9" },
      { field: "upstreams[0].timeouts.response_ms", description: /from 10 to 600,000 ms, got the number 600001/, line: 6, at: "600001" },
    ]);
    await expectViolations(upstream("    timeouts: {}\n"), [
      { field: "upstreams[0].timeouts", description: /is empty: give connect_ms, response_ms or both/, line: 6, at: "{}" },
    ]);
    await expectViolations(upstream("    timeouts: {read_ms: 5}\n"), [
      {
        field: "upstreams[0].timeouts.read_ms",
        description: /unknown key "read_ms": timeouts has connect_ms, response_ms/,
        line: 6,
        at: "read_ms",
      },
    ]);
  });

  test("names follow [a-z0-9][a-z0-9-]{0,62}, are unique, and an upstream has no other keys", async () => {
    await expectViolations(
      `${upstream("    weight: 5\n")}  - name: Pool_B\n    targets: [{url: http://10.0.0.2:8081}]\n  - name: pool\n    targets: [{url: http://10.0.0.3:8081}]\n`,
      [
        {
          field: "upstreams[0].weight",
          description: /unknown key "weight": an upstream has name, targets, balancer, hash_on, health_check, retries, timeouts$/,
          line: 6,
          at: "weight",
        },
        { field: "upstreams[1].name", description: /invalid name "Pool_B".*e\.g\. "pool-b"/, line: 7, at: "Pool_B" },
        { field: "upstreams[2].name", description: /duplicate name "pool": upstreams\[0\] already has it/, line: 9, at: "pool" },
      ],
    );
  });
});

describe("routes: upstream is a URL or an upstream's name; timeout_ms and max_body_bytes", () => {
  const route = (extra: string, upstreamValue = "http://127.0.0.1:8081") =>
    `version: 1\nroutes:\n  - name: r\n    path: /r\n    upstream: ${upstreamValue}\n${extra}`;

  test("an upstream that is neither a URL nor a name says which it could be", async () => {
    await expectViolations(route("", "Pool"), [
      { field: "routes[0].upstream", description: /upstream names are lower case: use "pool"/, line: 5, at: "Pool" },
    ]);
    await expectViolations(route("", "pool.internal"), [
      {
        field: "routes[0].upstream",
        description:
          /"pool.internal" is not an upstream URL \(it starts with http:\/\/ or https:\/\/.*\) nor the name of an entry of upstreams/,
        line: 5,
        at: "pool.internal",
      },
    ]);
  });

  test("timeout_ms goes from 10 to 600,000; max_body_bytes from 0 to 10 GiB", async () => {
    await expectViolations(route("    timeout_ms: 9\n    max_body_bytes: -1\n"), [
      { field: "routes[0].timeout_ms", description: /whole number from 10 to 600,000 ms, got the number 9/, line: 6, at: "9" },
      {
        field: "routes[0].max_body_bytes",
        description: /whole number from 0 to 10,737,418,240 bytes \(10 GiB\), got the number -1/,
        line: 7,
        at: "-1",
      },
    ]);
    await expectViolations(route("    timeout_ms: 600001\n    max_body_bytes: 10737418241\n"), [
      { field: "routes[0].timeout_ms", description: /from 10 to 600,000 ms/, line: 6, at: "600001" },
      { field: "routes[0].max_body_bytes", description: /from 0 to 10,737,418,240 bytes/, line: 7, at: "10737418241" },
    ]);
    await expectViolations(route('    timeout_ms: "5s"\n'), [
      { field: "routes[0].timeout_ms", description: /got "5s"/, line: 6, at: '"5s"' },
    ]);
    const plan = await applyOk(server, key, route("    timeout_ms: 10\n    max_body_bytes: 10737418240\n"), { dryRun: true });
    expect(plan.created).toEqual(["routes/r"]);
  });

  test("a route naming an upstream that does not exist in the resulting state is 400 at its line", async () => {
    await expectViolations(route("", "pool"), [
      {
        field: "routes[0].upstream",
        description: /^upstream "pool" does not exist: no upstream is defined: add it under upstreams$/,
        line: 5,
        at: "pool",
      },
    ]);
    await applyOk(server, key, upstream(""));
    await expectViolations(route("", "pool-b"), [
      {
        field: "routes[0].upstream",
        description: /^upstream "pool-b" does not exist: add it under upstreams or use a defined one \(pool\)$/,
        line: 5,
        at: "pool-b",
      },
    ]);
  });
});

describe("merge, strict and references", () => {
  const pool = (targets: string[], name = "pool") =>
    `  - name: ${name}\n    targets:\n${targets.map((url) => `      - {url: ${url}}\n`).join("")}`;
  const routeTo = (upstreamName: string, name = "plants") => `  - name: ${name}\n    path: /${name}\n    upstream: ${upstreamName}\n`;

  test("a merge may name an upstream defined earlier, and replaces an upstream whole", async () => {
    expect((await applyOk(server, key, `version: 1\nupstreams:\n${pool(["http://10.0.0.1:8081"])}`)).created).toEqual(["upstreams/pool"]);
    expect((await applyOk(server, key, `version: 1\nroutes:\n${routeTo("pool")}`)).created).toEqual(["routes/plants"]);
    const plan = await applyOk(
      server,
      key,
      `version: 1\nupstreams:\n  - name: pool\n    targets: [{url: http://10.0.0.2:8081}]\n    retries: 0\n`,
    );
    expect(plan).toMatchObject({ created: [], updated: ["upstreams/pool"], deleted: [], unchanged: 0 });
    const { yaml } = await exportOk(server, key);
    expect(yaml).toContain("upstreams:\n  - name: pool\n    targets:\n      - {url: http://10.0.0.2:8081}\n    retries: 0\nplugins: []\n");
    expect(yaml).toContain("    upstream: pool\n");
  });

  test("plans list upstreams between domains and plugins", async () => {
    const plan = await applyOk(
      server,
      key,
      `version: 1\nroutes:\n${routeTo("pool")}plugins:\n  - name: auth\n    type: api-key-auth\nupstreams:\n${pool(["http://10.0.0.1:8081"])}domains:\n  - name: api.example.com\n`,
    );
    expect(plan.created).toEqual(["domains/api.example.com", "upstreams/pool", "plugins/auth", "routes/plants"]);
  });

  test("strict deletes upstreams the document leaves out, but not one a route of the document still uses", async () => {
    await applyOk(
      server,
      key,
      `version: 1\nupstreams:\n${pool(["http://10.0.0.1:8081"])}${pool(["http://10.0.0.2:8081"], "spare")}routes:\n${routeTo("pool")}`,
    );
    // The route still names pool; the document leaves pool out.
    await expectViolations(
      `version: 1\nupstreams:\n${pool(["http://10.0.0.2:8081"], "spare")}routes:\n${routeTo("pool")}`,
      [
        {
          field: "routes[0].upstream",
          description:
            /^upstream "pool" does not exist once this strict import deletes it \(the document leaves it out\): keep it under upstreams, or stop using it here$/,
          line: 9,
          at: "pool",
        },
      ],
      { strict: true },
    );
    // A merge that leaves it out keeps it.
    expect((await applyOk(server, key, `version: 1\nupstreams:\n${pool(["http://10.0.0.3:8081"], "spare")}`)).deleted).toEqual([]);
    // Pointing the route elsewhere frees it.
    const plan = await applyOk(server, key, `version: 1\nroutes:\n${routeTo("http://10.0.0.9:8081")}`, { strict: true });
    expect(plan).toMatchObject({ deleted: ["upstreams/pool", "upstreams/spare"], updated: ["routes/plants"] });
  });

  test("a strict import of upstreams alone deletes the routes, so nothing dangles", async () => {
    await applyOk(server, key, `version: 1\nupstreams:\n${pool(["http://10.0.0.1:8081"])}routes:\n${routeTo("pool")}`);
    const plan = await applyOk(server, key, `version: 1\nupstreams:\n${pool(["http://10.0.0.1:8081"])}`, { strict: true });
    expect(plan).toMatchObject({ deleted: ["routes/plants"], unchanged: 1 });
  });
});

describe("export", () => {
  test("writes upstreams after domains in canonical form; re-importing it changes nothing", async () => {
    // Fields out of order, block and flow styles mixed, defaults given explicitly, a header name in capitals.
    await applyOk(
      server,
      key,
      `version: 1
routes:
  - max_body_bytes: 1048576
    upstream: plants
    timeout_ms: 5000
    path: /plants
    name: list-plants
upstreams:
  - timeouts:
      response_ms: 30000
      connect_ms: 5000
    name: plants
    retries: 1
    hash_on: header:X-User-Id
    balancer: consistent-hash
    health_check:
      passive: {}
      active:
        unhealthy_after: 3
        path: /healthz
        interval_seconds: 5
    targets:
      - weight: 100
        url: http://10.0.0.1:8081
      - url: http://10.0.0.2:8081
  - name: legacy
    targets: [{url: "https://[::1]:8443/base/", weight: 0}, {url: http://10.0.0.3:8081}]
`,
    );
    const first = await exportOk(server, key);
    expect(first.yaml).toBe(`version: 1
domains: []
upstreams:
  - name: legacy
    targets:
      - {url: "https://[::1]:8443/base/", weight: 0}
      - {url: http://10.0.0.3:8081}
  - name: plants
    targets:
      - {url: http://10.0.0.1:8081, weight: 100}
      - {url: http://10.0.0.2:8081}
    balancer: consistent-hash
    hash_on: header:x-user-id
    health_check: {active: {path: /healthz, interval_seconds: 5, unhealthy_after: 3}, passive: {}}
    retries: 1
    timeouts: {connect_ms: 5000, response_ms: 30000}
plugins: []
rules: []
routes:
  - name: list-plants
    path: /plants
    upstream: plants
    timeout_ms: 5000
    max_body_bytes: 1048576
`);
    const plan = await applyOk(server, key, first.yaml, { strict: true });
    expect(plan).toEqual({ revision: first.revision, applied: true, created: [], updated: [], deleted: [], unchanged: 3, warnings: [] });
    expect(await exportOk(server, key)).toEqual(first);
  });

  test("a default given explicitly is kept as given: leaving it out afterwards is a change", async () => {
    await applyOk(server, key, upstream("    retries: 1\n"));
    const plan = await applyOk(server, key, upstream(""));
    expect(plan.updated).toEqual(["upstreams/pool"]);
    expect((await exportOk(server, key)).yaml).not.toContain("retries");
  });
});

describe("history, diff and rollback carry upstreams", () => {
  const rpc = (method: string, body: Record<string, unknown>) =>
    connectCall(server, `/svc.v1.ConfigService/${method}`, { organizationId: org, ...body }, key);

  test("a revision keeps its upstreams; rolling back restores the targets", async () => {
    const v1 = await applyOk(server, key, `${upstream("")}routes:\n  - name: r\n    path: /r\n    upstream: pool\n`);
    const v2 = await applyOk(server, key, upstream("", "      - {url: http://10.0.0.2:8081}\n"));
    expect(v2.updated).toEqual(["upstreams/pool"]);

    const listed = (await (await rpc("ListConfigRevisions", { pageSize: 2 })).json()) as {
      revisions: { revision: number; updated?: string[] }[];
    };
    expect(listed.revisions[0]).toMatchObject({ revision: v2.revision, updated: ["upstreams/pool"] });
    const old = (await (await rpc("GetConfigRevision", { revision: v1.revision })).json()) as { yaml: string };
    expect(old.yaml).toContain("      - {url: http://10.0.0.1:8081}\n");

    const rolled = await rpc("RollbackConfig", { revision: v1.revision });
    expect(rolled.status).toBe(200);
    expect(await rolled.json()).toMatchObject({ result: { revision: v2.revision + 1, updated: ["upstreams/pool"] } });
    const now = await exportOk(server, key);
    expect(now.yaml).toBe(old.yaml);

    // From an empty configuration, a rollback recreates the upstream and the route that names it.
    const empty = await applyOk(server, key, "version: 1\n", { strict: true });
    const again = await (await rpc("RollbackConfig", { revision: v1.revision })).json();
    expect(again).toMatchObject({ result: { revision: empty.revision + 1, created: ["upstreams/pool", "routes/r"] } });
    expect((await exportOk(server, key)).yaml).toBe(old.yaml);
  });

  test("each target is on a line of its own, so that a line diff shows the target that changed", async () => {
    const v1 = await applyOk(server, key, upstream("", "      - {url: http://10.0.0.1:8081}\n      - {url: http://10.0.0.2:8081}\n"));
    const v2 = await applyOk(server, key, upstream("", "      - {url: http://10.0.0.1:8081}\n      - {url: http://10.0.0.3:8081}\n"));
    const v1Yaml = ((await (await rpc("GetConfigRevision", { revision: v1.revision })).json()) as { yaml: string }).yaml;
    const v2Yaml = ((await (await rpc("GetConfigRevision", { revision: v2.revision })).json()) as { yaml: string }).yaml;
    const changed = (a: string, b: string) => a.split("\n").filter((line) => !b.split("\n").includes(line));
    expect(changed(v1Yaml, v2Yaml)).toEqual(["      - {url: http://10.0.0.2:8081}"]);
    expect(changed(v2Yaml, v1Yaml)).toEqual(["      - {url: http://10.0.0.3:8081}"]);
  });
});
