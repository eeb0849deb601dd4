import {
  echoOf,
  reasonOf,
  send,
  startEchoUpstream,
  startTestGateway,
  stateFromYaml,
  type EchoUpstream,
  type TestGateway,
} from "../support/gateway.js";

/**
 * docs/gateway.md, "The data plane: how the gateway enforces it", routing: candidates by Host, exact
 * beats prefix, a longer prefix beats a shorter one, a route with domains
 * beats one without, then the name in byte order; 405 with Allow, 404.
 */
let a: EchoUpstream;
let b: EchoUpstream;
let c: EchoUpstream;
let gw: TestGateway;

beforeAll(async () => {
  [a, b, c] = await Promise.all([startEchoUpstream("a"), startEchoUpstream("b"), startEchoUpstream("c")]);
  const yaml = `version: 1
domains:
  - name: api.example.com
  - name: other.example.com
routes:
  - name: exact-plants
    path: /plants
    methods: [GET]
    upstream: ${a.url}
  - name: plants-prefix
    path: /plants/*
    upstream: ${b.url}
  - name: plants-deep
    path: /plants/rare/*
    upstream: ${c.url}
  - name: zeta-catch-all
    path: /*
    upstream: ${a.url}
  - name: alpha-catch-all
    path: /*
    upstream: ${b.url}
  - name: domain-catch-all
    domains: [api.example.com]
    path: /*
    upstream: ${c.url}
  - name: post-only
    path: /orders
    methods: [POST, PUT]
    upstream: ${a.url}
  - name: order-items
    path: /orders/items
    methods: [DELETE]
    upstream: ${a.url}
  - name: based
    path: /based/*
    upstream: ${c.url}/base/
  - name: colon
    path: /v1/things:batch
    upstream: ${c.url}
  - name: encoded
    path: /caf%C3%A9
    upstream: ${c.url}
  - name: domain-only
    domains: [other.example.com]
    path: /only-other
    upstream: ${a.url}
`;
  gw = await startTestGateway({}, stateFromYaml(yaml));
});
afterAll(async () => {
  await gw.close();
  await Promise.all([a.close(), b.close(), c.close()]);
});

const get = (path: string, host = "unknown.example.com", method = "GET") => send(gw.url, { method, path, headers: { host } });

describe("path precedence", () => {
  test("an exact path beats a prefix that also matches it", async () => {
    expect(echoOf(await get("/plants")).upstream).toBe("a");
  });

  test("a prefix route matches its own path without the trailing slash and everything under it", async () => {
    // POST /plants: the exact route serves only GET, so the prefix route takes it.
    expect(echoOf(await get("/plants", undefined, "POST")).upstream).toBe("b");
    expect(echoOf(await get("/plants/")).upstream).toBe("b");
    expect(echoOf(await get("/plants/12/leaves?x=1")).upstream).toBe("b");
  });

  test("a prefix does not match a longer segment that merely starts with it", async () => {
    // /plantsx is not under /plants/: the catch-all (alpha-catch-all, upstream b) serves it, not plants-prefix.
    const gwPrefix = await startTestGateway(
      {},
      stateFromYaml(`version: 1
routes:
  - name: plants-prefix
    path: /plants/*
    upstream: ${b.url}
`),
    );
    try {
      expect((await send(gwPrefix.url, { path: "/plantsx" })).status).toBe(404);
      expect(echoOf(await send(gwPrefix.url, { path: "/plants" })).upstream).toBe("b");
    } finally {
      await gwPrefix.close();
    }
  });

  test("a longer prefix beats a shorter one", async () => {
    expect(echoOf(await get("/plants/rare")).upstream).toBe("c");
    expect(echoOf(await get("/plants/rare/orchid")).upstream).toBe("c");
    expect(echoOf(await get("/plants/rarer")).upstream).toBe("b");
  });

  test("between equal paths without domains, the name first in byte order wins", async () => {
    expect(echoOf(await get("/anything")).upstream).toBe("b"); // alpha-catch-all beats zeta-catch-all
  });

  test("between equal paths, a route with domains beats one without, for its domain only", async () => {
    expect(echoOf(await get("/anything", "api.example.com")).upstream).toBe("c");
    expect(echoOf(await get("/anything", "API.Example.com:8443")).upstream).toBe("c");
    expect(echoOf(await get("/anything", "other.example.com")).upstream).toBe("b");
  });

  test("a more specific path without domains still beats a domain route's shorter prefix", async () => {
    expect(echoOf(await get("/plants", "api.example.com")).upstream).toBe("a");
  });

  test("a route with domains is not a candidate for other hosts", async () => {
    expect(echoOf(await get("/only-other", "api.example.com")).upstream).toBe("c"); // domain-catch-all, not domain-only
    expect(echoOf(await get("/only-other", "other.example.com")).upstream).toBe("a");
    expect(echoOf(await get("/only-other", "unknown.example.com")).upstream).toBe("b"); // alpha-catch-all
  });
});

describe("methods", () => {
  test("a method no matching route serves is 405 with Allow listing what they serve, in the Connect error body", async () => {
    // A table of its own: the catch-alls above serve every method.
    const gwOnly = await startTestGateway(
      {},
      stateFromYaml(`version: 1
routes:
  - name: post-only
    path: /orders
    methods: [POST, PUT]
    upstream: ${a.url}
  - name: order-prefix
    path: /orders/*
    methods: [GET]
    upstream: ${b.url}
`),
    );
    try {
      const answer = await send(gwOnly.url, { method: "DELETE", path: "/orders" });
      expect(answer.status).toBe(405);
      expect(answer.headers.allow).toBe("GET, POST, PUT");
      expect(answer.json.code).toBe("unimplemented");
      expect(reasonOf(answer)).toBe("method_not_allowed");
      expect(answer.text).not.toContain("DELETE");
      expect(echoOf(await send(gwOnly.url, { method: "GET", path: "/orders" })).upstream).toBe("b");
      expect(echoOf(await send(gwOnly.url, { method: "PUT", path: "/orders" })).upstream).toBe("a");
      const missing = await send(gwOnly.url, { path: "/nothing" });
      expect(missing.status).toBe(404);
      expect(missing.json.code).toBe("not_found");
      expect(reasonOf(missing)).toBe("route_not_found");
      expect(missing.headers["content-type"]).toBe("application/json");
      // Not forwarded anywhere.
      expect(a.seen.some((echo) => echo.url === "/nothing")).toBe(false);
    } finally {
      await gwOnly.close();
    }
  });

  test("a method the best route does not serve goes to the next route that does", async () => {
    expect(echoOf(await get("/orders", undefined, "POST")).upstream).toBe("a");
    expect(echoOf(await get("/orders", undefined, "GET")).upstream).toBe("b"); // alpha-catch-all
  });
});

describe("forwarding paths", () => {
  test("the upstream's path is a prefix of the original path and query", async () => {
    const echo = echoOf(await get("/based/x/y?q=1&r=%20"));
    expect(echo.url).toBe("/base/based/x/y?q=1&r=%20");
  });

  test("a colon in a route path is a literal character", async () => {
    expect(echoOf(await get("/v1/things:batch")).upstream).toBe("c");
  });

  test("percent-encoded paths match in their encoded form; encoded unreserved characters match their letters", async () => {
    expect(echoOf(await get("/caf%C3%A9")).upstream).toBe("c");
    expect(echoOf(await get("/caf%c3%a9")).upstream).toBe("c");
    const echo = echoOf(await get("/%70lants"));
    expect(echo.upstream).toBe("a");
    // The path the routes judged is what goes upstream: encoded unreserved characters decoded, hex in upper case.
    expect(echo.url).toBe("/plants");
    expect(echoOf(await get("/caf%c3%a9")).url).toBe("/caf%C3%A9");
  });

  test("malformed paths are 400, never forwarded", async () => {
    for (const path of ["/plants/%zz", "/plants/../admin", "/plants/%2e%2e/admin", "/a/./b"]) {
      const answer = await get(path);
      expect(answer.status).toBe(400);
      expect(reasonOf(answer)).toBe("malformed_path");
    }
  });
});
