import { restRoutes } from "../../src/rest/routes.js";
import { enablePasswords, goodPassword, newIdentifier, postRest } from "../support/identity-client.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * CORS for browser clients (docs/security.md "The platform API"): what a web
 * page on another origin may call with the publishable key answers CORS, on
 * every door a browser has (Connect, gRPC-Web, REST), errors included; the
 * JWKS too; nothing that takes only an API key, a secret key or the
 * dashboard's cookie does. The browser itself: browser-connect-web.test.ts.
 */
let server: TestServer;
const origin = "https://app.example.com";

beforeAll(async () => {
  server = await startTestServer();
  await enablePasswords(server);
});
afterAll(() => server.close());

/** The client-side IdentityService RPCs: each accepts the publishable key (some a secret key as well). */
const browserRpcs = [
  "RegisterPassword",
  "LoginPassword",
  "ResetPassword",
  "CompletePasswordReset",
  "BeginPasskeyRegistration",
  "FinishPasskeyRegistration",
  "BeginPasskeyLogin",
  "FinishPasskeyLogin",
  "VerifyMagicLink",
].map((method) => `/svc.v1.IdentityService/${method}`);

/** The client-side REST identity paths (docs/security.md, "Browser clients (CORS)"). */
const browserRestPaths = [
  "/identity/register/password",
  "/identity/login/password",
  "/identity/reset/password",
  "/identity/register/begin",
  "/identity/register/finish",
  "/identity/login/begin",
  "/identity/login/finish",
  "/v1/identity/register",
  "/v1/identity/login",
  "/v1/identity/reset-password",
];

/** The request headers of Connect and gRPC-Web clients in a browser, and the credential. */
const protocolHeaders = [
  "content-type",
  "authorization",
  "connect-protocol-version",
  "connect-timeout-ms",
  "grpc-timeout",
  "x-grpc-web",
  "x-user-agent",
];
const exposed = ["grpc-status", "grpc-message", "grpc-status-details-bin"];

function preflight(path: string, method = "POST", requestHeaders = "authorization,content-type,connect-protocol-version") {
  return server.call(path, {
    method: "OPTIONS",
    headers: { origin, "access-control-request-method": method, "access-control-request-headers": requestHeaders },
  });
}

const listOf = (value: string | null) => (value ?? "").split(",").map((v) => v.trim().toLowerCase());

function expectPreflightGranted(response: Response, methods: string[]) {
  expect(response.status).toBe(204);
  expect(response.headers.get("access-control-allow-origin")).toBe("*");
  expect(response.headers.get("access-control-allow-credentials")).toBeNull();
  expect(listOf(response.headers.get("access-control-allow-methods")).sort()).toEqual(methods.map((m) => m.toLowerCase()).sort());
  expect(listOf(response.headers.get("access-control-allow-headers"))).toEqual(expect.arrayContaining(protocolHeaders));
  expect(Number(response.headers.get("access-control-max-age"))).toBeGreaterThan(0);
}

/** An actual answer a page may read: any origin, no credentials, the gRPC status headers exposed. */
function expectReadable(response: Response, alsoExposed: string[] = []) {
  expect(response.headers.get("access-control-allow-origin")).toBe("*");
  expect(response.headers.get("access-control-allow-credentials")).toBeNull();
  expect(listOf(response.headers.get("access-control-expose-headers"))).toEqual(expect.arrayContaining([...exposed, ...alsoExposed]));
}

function connect(path: string, body: unknown, bearer?: string) {
  return server.call(path, {
    method: "POST",
    headers: { origin, "content-type": "application/json", "connect-protocol-version": "1" },
    body: JSON.stringify(body),
    ...(bearer !== undefined ? { bearer } : {}),
  });
}

describe("a preflight is granted where a browser may call with the publishable key", () => {
  test.each(browserRpcs)("Connect and gRPC-Web: %s", async (path) => {
    expectPreflightGranted(await preflight(path), ["POST"]);
    // What a gRPC-Web client sends.
    expectPreflightGranted(await preflight(path, "POST", "content-type,x-grpc-web,x-user-agent,grpc-timeout,authorization"), ["POST"]);
  });

  test.each(browserRestPaths)("REST: %s", async (path) => {
    expectPreflightGranted(await preflight(path, "POST", "authorization,content-type"), ["POST"]);
  });

  test("the JWKS: GET and HEAD", async () => {
    expectPreflightGranted(await preflight("/.well-known/jwks.json", "GET", "if-none-match"), ["GET", "HEAD"]);
  });
});

describe("nothing else answers CORS", () => {
  test("of every RPC served, exactly those that accept the publishable key grant a preflight", async () => {
    const paths = server.app.services.flatMap(({ service }) => service.methods.map((m) => `/${service.typeName}/${m.name}`));
    expect(paths.length).toBeGreaterThan(40);
    const granted: string[] = [];
    for (const path of paths) {
      const response = await preflight(path);
      if (response.headers.get("access-control-allow-origin") !== null) granted.push(path);
      else expect(response.status).toBe(405);
    }
    expect(granted.sort()).toEqual([...browserRpcs].sort());
  });

  test("of every REST path, exactly the client-side identity paths grant a preflight", async () => {
    const granted = new Set<string>();
    for (const route of restRoutes) {
      const path = route.pattern.replace(/\{\w+\}/g, server.credentials.organization_id);
      const response = await preflight(path, route.method, "authorization,content-type");
      if (response.headers.get("access-control-allow-origin") !== null) granted.add(route.pattern);
      else expect(response.status).toBe(405);
    }
    expect([...granted].sort()).toEqual([...browserRestPaths].sort());
  });

  test("an API key's, a secret key's and the dashboard's calls succeed or fail without CORS headers, so no page can read them", async () => {
    const org = server.credentials.organization_id;
    const answers = [
      await connect("/svc.v1.ConfigService/GetConfig", { organizationId: org }, server.credentials.api_key),
      await server.call(`/organization/${org}/config`, { headers: { origin }, bearer: server.credentials.api_key }),
      await connect("/svc.v1.IdentityService/GenerateMagicLink", { identifier: newIdentifier("cors") }, server.credentials.secret_key),
      await connect("/svc.v1.IdentityService/ValidateSession", { token: "x" }, server.credentials.secret_key),
      await connect("/svc.v1.DashboardService/ListApiKeys", { organizationId: org }),
      await connect("/svc.v1.DashboardAuthService/GetSignInState", {}),
      // A publishable key on a secret-key RPC: refused, and unreadable too.
      await connect("/svc.v1.IdentityService/GenerateMagicLink", { identifier: newIdentifier("cors") }, server.credentials.publishable_key),
    ];
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 401, 403, 403, 403]);
    for (const answer of answers) {
      expect(answer.headers.get("access-control-allow-origin")).toBeNull();
      expect(answer.headers.get("access-control-expose-headers")).toBeNull();
    }
  });

  test("an OPTIONS that is not a preflight is refused as before: 405 with Allow and the error body", async () => {
    const response = await server.call("/svc.v1.IdentityService/LoginPassword", { method: "OPTIONS", headers: { origin } });
    expect(response.status).toBe(405);
    expect(response.headers.get("allow")).toBe("POST");
    expect(((await response.json()) as { code: string }).code).toBe("unimplemented");
  });
});

describe("a page can read every answer of those paths, errors included", () => {
  test("Connect: a sign-up, then 401 without a key, 403 with a secret key, 400 and 415 for a bad request", async () => {
    const identifier = newIdentifier("cors");
    const created = await connect(
      "/svc.v1.IdentityService/RegisterPassword",
      { identifier, password: goodPassword },
      server.credentials.publishable_key,
    );
    expect(created.status).toBe(200);
    expectReadable(created);

    const missing = await connect("/svc.v1.IdentityService/LoginPassword", { identifier, password: goodPassword });
    expect(missing.status).toBe(401);
    expectReadable(missing, ["www-authenticate"]);

    const secret = await connect(
      "/svc.v1.IdentityService/RegisterPassword",
      { identifier: newIdentifier(), password: goodPassword },
      server.credentials.secret_key,
    );
    expect(secret.status).toBe(403);
    expectReadable(secret);

    const invalid = await connect("/svc.v1.IdentityService/LoginPassword", { identifier: 7 }, server.credentials.publishable_key);
    expect(invalid.status).toBe(400);
    expectReadable(invalid);

    const wrongType = await server.call("/svc.v1.IdentityService/LoginPassword", {
      method: "POST",
      headers: { origin, "content-type": "text/plain" },
      body: "{}",
      bearer: server.credentials.publishable_key,
    });
    expect(wrongType.status).toBe(415);
    expectReadable(wrongType);
  });

  test("429 after too many failed logins, with Retry-After exposed", async () => {
    const identifier = newIdentifier("cors-lockout");
    await postRest(server, "/identity/register/password", { identifier, password: goodPassword }, server.credentials.publishable_key);
    let last: Response | undefined;
    for (let i = 0; i < 6; i++) {
      last = await connect(
        "/svc.v1.IdentityService/LoginPassword",
        { identifier, password: "not the right one at all" },
        server.credentials.publishable_key,
      );
    }
    expect(last?.status).toBe(429);
    expect(Number(last?.headers.get("retry-after"))).toBeGreaterThan(0);
    expectReadable(last as Response, ["retry-after"]);
  });

  test("gRPC-Web: an error travels in the trailers of an answer the page may read", async () => {
    const response = await server.call("/svc.v1.IdentityService/LoginPassword", {
      method: "POST",
      headers: { origin, "content-type": "application/grpc-web+proto", "x-grpc-web": "1" },
      body: new Uint8Array([0, 0, 0, 0, 0]),
    });
    expect(response.status).toBe(200);
    expectReadable(response);
    const body = Buffer.from(await response.arrayBuffer()).toString("latin1");
    expect(body).toContain("grpc-status: 16");
  });

  test("REST: a sign-in and a 401", async () => {
    const identifier = newIdentifier("cors-rest");
    const created = await server.call("/v1/identity/register", {
      method: "POST",
      headers: { origin, "content-type": "application/json" },
      body: JSON.stringify({ email: identifier, password: goodPassword }),
      bearer: server.credentials.publishable_key,
    });
    expect(created.status).toBe(200);
    expectReadable(created);
    const unauthenticated = await server.call("/identity/login/password", {
      method: "POST",
      headers: { origin, "content-type": "application/json" },
      body: JSON.stringify({ identifier, password: goodPassword }),
    });
    expect(unauthenticated.status).toBe(401);
    expectReadable(unauthenticated, ["www-authenticate"]);
  });

  test("the JWKS is readable from any origin, and says so even to a request without Origin (it is cached)", async () => {
    for (const headers of [{ origin }, {}] as Record<string, string>[]) {
      const response = await server.call("/.well-known/jwks.json", { headers });
      expect(response.status).toBe(200);
      expect(response.headers.get("access-control-allow-origin")).toBe("*");
      expect(response.headers.get("access-control-allow-credentials")).toBeNull();
      expect(((await response.json()) as { keys: unknown[] }).keys.length).toBeGreaterThan(0);
    }
  });
});
