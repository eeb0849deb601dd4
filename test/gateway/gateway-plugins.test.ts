import type { Consumer } from "../../src/gateway/gateway-state.js";
import {
  echoOf,
  newConsumerKey,
  reasonOf,
  send,
  startEchoUpstream,
  startTestGateway,
  stateFromYaml,
  type EchoUpstream,
  type StateExtras,
  type TestGateway,
} from "../support/gateway.js";

/**
 * docs/gateway.md, "The data plane: how the gateway enforces it", plugins on a matched route: cors, then
 * rules, then api-key-auth, then request-headers (session-auth and
 * rate-limit have files of their own).
 */
let upstream: EchoUpstream;
let gw: TestGateway;
const alice = newConsumerKey();
const bob = newConsumerKey();
const revoked = newConsumerKey();
const consumers = new Map<string, Consumer>([
  [alice.hash, { id: "consumer-alice", name: "alice" }],
  [bob.hash, { id: "consumer-bob", name: "bob" }],
]);

const documentOf = (upstreamUrl: string) => `version: 1
plugins:
  - name: cors-app
    type: cors
    config:
      allowed_origins: [https://app.example.com]
      allowed_methods: [GET, POST]
      allowed_headers: [content-type, x-api-key]
      exposed_headers: [x-upstream]
      allow_credentials: true
      max_age_seconds: 600
  - name: cors-any
    type: cors
    config: {allowed_origins: ["*"]}
  - name: keys
    type: api-key-auth
  - name: keys-hidden
    type: api-key-auth
    config: {header: x-consumer-key, hide_credentials: true}
  - name: headers
    type: request-headers
    config:
      set: {x-env: production, authorization: "Bearer \${secret:prod/UPSTREAM_TOKEN}"}
      add: {x-tag: gateway}
      remove: [x-debug]
  - name: headers-missing-secret
    type: request-headers
    config:
      set: {x-token: "\${secret:prod/NOT_YET}"}
rules:
  - name: block-bots
    match: {header: user-agent, regex: "bot", ignore_case: true}
    action: deny
  - name: block-admin
    match: {path_prefix: /rules/admin}
    action: deny
  - name: deny-loopback
    match: {ip_cidr: 127.0.0.0/8}
    action: deny
  - name: allow-loopback
    match: {ip_cidr: 127.0.0.0/8}
    action: allow
  - name: allow-internal-net
    match: {ip_cidr: 10.0.0.0/8}
    action: allow
  - name: allow-v6-docs
    match: {ip_cidr: 2001:db8::/32}
    action: allow
  - name: allow-beta-header
    match: {header: x-beta, regex: "^yes$"}
    action: allow
routes:
  - name: cors-route
    path: /cors/*
    methods: [GET, POST]
    upstream: ${upstreamUrl}
    plugins: [cors-app, keys]
  - name: cors-any-route
    path: /cors-any/*
    upstream: ${upstreamUrl}
    plugins: [cors-any]
  - name: ruled
    path: /rules/*
    upstream: ${upstreamUrl}
    rules: [block-bots, block-admin]
  - name: denied-by-ip
    path: /ip-denied/*
    upstream: ${upstreamUrl}
    rules: [deny-loopback]
  - name: allowed-by-ip
    path: /ip-allowed/*
    upstream: ${upstreamUrl}
    rules: [allow-internal-net, allow-loopback]
  - name: allow-none-matches
    path: /allow-none/*
    upstream: ${upstreamUrl}
    rules: [allow-internal-net, allow-v6-docs]
  - name: allow-by-header
    path: /allow-header/*
    upstream: ${upstreamUrl}
    rules: [allow-beta-header, block-bots]
  - name: keyed
    path: /keyed/*
    upstream: ${upstreamUrl}
    plugins: [keys]
  - name: keyed-hidden
    path: /keyed-hidden/*
    upstream: ${upstreamUrl}
    plugins: [keys-hidden]
  - name: rewritten
    path: /rewritten/*
    upstream: ${upstreamUrl}
    plugins: [headers]
  - name: waiting-for-secret
    path: /waiting/*
    upstream: ${upstreamUrl}
    plugins: [headers-missing-secret]
`;

const extras = (more: StateExtras = {}): StateExtras => ({
  consumers,
  secrets: new Map([["prod/UPSTREAM_TOKEN", "upstream-secret-value"]]),
  ...more,
});

beforeAll(async () => {
  upstream = await startEchoUpstream();
  gw = await startTestGateway({}, stateFromYaml(documentOf(upstream.url), extras()));
});
afterAll(async () => {
  await gw.close();
  await upstream.close();
});

describe("cors", () => {
  test("a preflight from an allowed origin is answered 204 by the gateway, before credentials are asked for", async () => {
    const before = upstream.seen.length;
    const answer = await send(gw.url, {
      method: "OPTIONS",
      path: "/cors/items",
      headers: {
        origin: "https://app.example.com",
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type",
      },
    });
    expect(answer.status).toBe(204);
    expect(answer.text).toBe("");
    expect(answer.headers).toMatchObject({
      "access-control-allow-origin": "https://app.example.com",
      "access-control-allow-methods": "GET, POST",
      "access-control-allow-headers": "content-type, x-api-key",
      "access-control-allow-credentials": "true",
      "access-control-max-age": "600",
    });
    expect(answer.headers.vary).toContain("Origin");
    expect(upstream.seen.length).toBe(before);
  });

  test("a preflight from an origin not allowed is 204 without CORS headers, so the browser refuses", async () => {
    const answer = await send(gw.url, {
      method: "OPTIONS",
      path: "/cors/items",
      headers: { origin: "https://evil.example.com", "access-control-request-method": "POST" },
    });
    expect(answer.status).toBe(204);
    expect(answer.headers["access-control-allow-origin"]).toBeUndefined();
  });

  test("other answers of the route carry the CORS headers, gateway-made ones included; the upstream's own are replaced", async () => {
    const refused = await send(gw.url, { path: "/cors/items", headers: { origin: "https://app.example.com" } });
    expect(refused.status).toBe(401);
    expect(refused.headers["access-control-allow-origin"]).toBe("https://app.example.com");
    const passed = await send(gw.url, {
      path: "/cors/items",
      headers: { origin: "https://app.example.com", "x-api-key": alice.key, "x-echo-header": "access-control-allow-origin: *" },
    });
    expect(passed.status).toBe(200);
    expect(passed.headers["access-control-allow-origin"]).toBe("https://app.example.com");
    expect(passed.headers["access-control-expose-headers"]).toBe("x-upstream");
    const other = await send(gw.url, { path: "/cors/items", headers: { origin: "https://evil.example.com", "x-api-key": alice.key } });
    expect(other.status).toBe(200);
    expect(other.headers["access-control-allow-origin"]).toBeUndefined();
  });

  test('with "*" any origin gets "*", and an OPTIONS without Access-Control-Request-Method is not a preflight', async () => {
    const preflight = await send(gw.url, {
      method: "OPTIONS",
      path: "/cors-any/x",
      headers: {
        origin: "https://anywhere.example",
        "access-control-request-method": "DELETE",
        "access-control-request-headers": "x-custom",
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers["access-control-allow-origin"]).toBe("*");
    expect(preflight.headers["access-control-allow-headers"]).toBe("x-custom");
    const plainOptions = await send(gw.url, { method: "OPTIONS", path: "/cors-any/x", headers: { origin: "https://anywhere.example" } });
    expect(echoOf(plainOptions).method).toBe("OPTIONS");
  });
});

describe("rules", () => {
  test("a matching header deny rule is 403 naming the rule; the regex honours ignore_case", async () => {
    const answer = await send(gw.url, { path: "/rules/x", headers: { "user-agent": "SuperBOT/1.0" } });
    expect(answer.status).toBe(403);
    expect(answer.json.code).toBe("permission_denied");
    expect(reasonOf(answer)).toBe("denied_by_rule");
    expect(answer.json.message).toContain("block-bots");
    expect(answer.text).not.toContain("SuperBOT");
    expect(echoOf(await send(gw.url, { path: "/rules/x", headers: { "user-agent": "Mozilla/5.0" } })).url).toBe("/rules/x");
    // A header the request does not carry matches nothing.
    expect((await send(gw.url, { path: "/rules/x" })).status).toBe(200);
  });

  test("a path_prefix deny rule refuses its prefix, also when spelled with encoded letters or doubled slashes", async () => {
    for (const path of ["/rules/admin", "/rules/admin/users", "/rules/%61dmin", "/rules//admin"]) {
      const answer = await send(gw.url, { path });
      expect(answer.status).toBe(403);
      expect(answer.json.message).toContain("block-admin");
    }
    expect((await send(gw.url, { path: "/rules/public" })).status).toBe(200);
  });

  test("ip_cidr matches the TCP peer address, never X-Forwarded-For", async () => {
    const denied = await send(gw.url, { path: "/ip-denied/x", headers: { "x-forwarded-for": "10.1.2.3" } });
    expect(denied.status).toBe(403);
    expect(denied.json.message).toContain("deny-loopback");
    expect((await send(gw.url, { path: "/ip-allowed/x" })).status).toBe(200);
  });

  test("when a route lists allow rules and none matches, 403", async () => {
    const answer = await send(gw.url, { path: "/allow-none/x", headers: { "x-forwarded-for": "10.0.0.1" } });
    expect(answer.status).toBe(403);
    expect(reasonOf(answer)).toBe("no_allow_rule_matched");
  });

  test("an allow rule lets a request through, but a matching deny rule still refuses it", async () => {
    expect((await send(gw.url, { path: "/allow-header/x", headers: { "x-beta": "yes" } })).status).toBe(200);
    expect((await send(gw.url, { path: "/allow-header/x", headers: { "x-beta": "no" } })).status).toBe(403);
    const both = await send(gw.url, { path: "/allow-header/x", headers: { "x-beta": "yes", "user-agent": "bot" } });
    expect(both.status).toBe(403);
    expect(both.json.message).toContain("block-bots");
  });

  test("a pattern the linear-time matcher cannot run closes its routes with 503; other routes are served", async () => {
    // Validation refuses such a pattern today; a document stored before it did (and followed from a
    // control plane) may still hold one: the gateway must not guess how to run it.
    const state = stateFromYaml(`version: 1
rules:
  - name: backref
    match: {header: x-a, regex: "a"}
    action: deny
routes:
  - name: closed
    path: /closed
    upstream: ${upstream.url}
    rules: [backref]
  - name: open
    path: /open
    upstream: ${upstream.url}
`);
    const stored = { name: "backref", match: { header: "x-a", regex: "(a)\\1" }, action: "deny" };
    const rules = state.document.rules.map((r) => (r.name === "backref" ? { ...r, spec: JSON.stringify(stored), value: stored } : r));
    const gw2 = await startTestGateway({}, { ...state, document: { ...state.document, rules } });
    try {
      const closed = await send(gw2.url, { path: "/closed" });
      expect(closed.status).toBe(503);
      expect(reasonOf(closed)).toBe("rule_unavailable");
      expect((await send(gw2.url, { path: "/open" })).status).toBe(200);
    } finally {
      await gw2.close();
    }
  });
});

describe("api-key-auth", () => {
  test("a live consumer key in x-api-key passes and is forwarded unless hidden", async () => {
    const echo = echoOf(await send(gw.url, { path: "/keyed/x", headers: { "x-api-key": alice.key } }));
    expect(echo.headers["x-api-key"]).toBe(alice.key);
  });

  test("a missing key is 401; an unknown or revoked one is 401; neither is echoed", async () => {
    const missing = await send(gw.url, { path: "/keyed/x" });
    expect(missing.status).toBe(401);
    expect(reasonOf(missing)).toBe("consumer_key_missing");
    expect(missing.headers["www-authenticate"]).toBeDefined();
    for (const key of [revoked.key, `${alice.key}x`, "not-a-key", ""]) {
      const answer = await send(gw.url, { path: "/keyed/x", headers: { "x-api-key": key } });
      expect(answer.status).toBe(401);
      if (key !== "") expect(answer.text).not.toContain(key);
    }
    // A key in another header than the configured one does not count.
    expect((await send(gw.url, { path: "/keyed/x", headers: { authorization: `Bearer ${alice.key}` } })).status).toBe(401);
  });

  test("a custom header with hide_credentials: the key is checked there and removed before the upstream", async () => {
    const echo = echoOf(await send(gw.url, { path: "/keyed-hidden/x", headers: { "x-consumer-key": bob.key } }));
    expect(echo.headers["x-consumer-key"]).toBeUndefined();
    expect((await send(gw.url, { path: "/keyed-hidden/x", headers: { "x-api-key": bob.key } })).status).toBe(401);
  });

  test("a key revoked in a new state is refused at once", async () => {
    const gw2 = await startTestGateway({}, stateFromYaml(documentOf(upstream.url), extras()));
    try {
      expect((await send(gw2.url, { path: "/keyed/x", headers: { "x-api-key": bob.key } })).status).toBe(200);
      gw2.gateway.apply(
        stateFromYaml(documentOf(upstream.url), extras({ consumers: new Map([[alice.hash, consumers.get(alice.hash)!]]) })),
      );
      expect((await send(gw2.url, { path: "/keyed/x", headers: { "x-api-key": bob.key } })).status).toBe(401);
      expect((await send(gw2.url, { path: "/keyed/x", headers: { "x-api-key": alice.key } })).status).toBe(200);
    } finally {
      await gw2.close();
    }
  });
});

describe("request-headers", () => {
  test("set replaces, add appends, remove drops; secret references are resolved from the state", async () => {
    const echo = echoOf(
      await send(gw.url, {
        path: "/rewritten/x",
        headers: { "x-env": "staging", "x-tag": "client", "x-debug": "1", authorization: "Bearer client-token" },
      }),
    );
    expect(echo.headers["x-env"]).toBe("production");
    expect(echo.headers.authorization).toBe("Bearer upstream-secret-value");
    expect(echo.headers["x-debug"]).toBeUndefined();
    const tags = echo.rawHeaders.filter((_, i) => i % 2 === 1 && echo.rawHeaders[i - 1]?.toLowerCase() === "x-tag");
    expect(tags).toEqual(["client", "gateway"]);
    // The value is never logged.
    expect(gw.rawLogs.join("\n")).not.toContain("upstream-secret-value");
  });

  test("a route whose secret is not resolved answers 503 until it is; other routes are served meanwhile", async () => {
    const gw2 = await startTestGateway({}, stateFromYaml(documentOf(upstream.url), extras()));
    try {
      const waiting = await send(gw2.url, { path: "/waiting/x" });
      expect(waiting.status).toBe(503);
      expect(waiting.json.code).toBe("unavailable");
      expect(reasonOf(waiting)).toBe("secret_unresolved");
      expect((await send(gw2.url, { path: "/rewritten/x" })).status).toBe(200);
      gw2.gateway.apply(
        stateFromYaml(
          documentOf(upstream.url),
          extras({
            secrets: new Map([
              ["prod/UPSTREAM_TOKEN", "upstream-secret-value"],
              ["prod/NOT_YET", "now-here"],
            ]),
          }),
        ),
      );
      expect(echoOf(await send(gw2.url, { path: "/waiting/x" })).headers["x-token"]).toBe("now-here");
      // An updated secret value is used from the next request on.
      gw2.gateway.apply(
        stateFromYaml(
          documentOf(upstream.url),
          extras({
            secrets: new Map([
              ["prod/UPSTREAM_TOKEN", "rotated"],
              ["prod/NOT_YET", "now-here"],
            ]),
          }),
        ),
      );
      expect(echoOf(await send(gw2.url, { path: "/rewritten/x" })).headers.authorization).toBe("Bearer rotated");
      // A value that cannot travel in a header closes the route rather than corrupt the request.
      gw2.gateway.apply(
        stateFromYaml(
          documentOf(upstream.url),
          extras({
            secrets: new Map([
              ["prod/UPSTREAM_TOKEN", "line\r\nbreak"],
              ["prod/NOT_YET", "x"],
            ]),
          }),
        ),
      );
      expect((await send(gw2.url, { path: "/rewritten/x" })).status).toBe(503);
      expect(gw2.rawLogs.join("\n")).not.toContain("line\\r\\nbreak");
    } finally {
      await gw2.close();
    }
  });
});
