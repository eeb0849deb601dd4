import { gzipSync } from "node:zlib";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { DashboardAuthService, SignInState } from "../../gen/svc/v1/dashboard_auth_pb.js";
import { DashboardService } from "../../gen/svc/v1/dashboard_pb.js";
import { hashToken } from "../../src/crypto/tokens.js";
import {
  cookieOf,
  dashboardAuthRpc,
  dashboardHeader,
  dashboardRpc,
  ownerPassword,
  setUpOwner,
  signIn,
  startDashboardServer,
  type DashboardRequestOptions,
  type DashboardTestServer,
} from "../support/dashboard-server.js";
import { createManualClock } from "../support/server.js";

/**
 * The dashboard's sign-in, setup, invitation and sign-out operations are
 * RPCs of svc.v1.DashboardAuthService behind the one request pipeline: the
 * same decoding, limits, error rendering, metrics and logs as every RPC, and
 * the dashboard's request guard (one interceptor) in front of both dashboard
 * services, on every door.
 */

interface ErrorBody {
  code: string;
  message: string;
  details?: { debug?: { reason?: string } }[];
}

const reasonOf = (body: ErrorBody) => body.details?.[0]?.debug?.reason;
const email = "owner@example.com";

describe("the dashboard's auth RPCs go through the one request pipeline", () => {
  let server: DashboardTestServer;
  beforeAll(async () => {
    server = await startDashboardServer();
    await setUpOwner(server, email);
  });
  afterAll(() => server.close());

  const scrape = async () => (await server.call("/metrics")).text();
  const count = (text: string, method: string, code: string) => {
    const series = `gatehouse_rpc_requests_total{service="svc.v1.DashboardAuthService",method="${method}",protocol="connect",code="${code}"}`;
    const line = text.split("\n").find((l) => l.startsWith(`${series} `));
    return line === undefined ? 0 : Number(line.slice(series.length + 1));
  };

  test("each call is counted once in gatehouse_rpc_requests_total (protocol connect) and logged once with its request id", async () => {
    const before = await scrape();
    const ok = await dashboardAuthRpc(server, "SignIn", { email, password: ownerPassword });
    const wrong = await dashboardAuthRpc(server, "SignIn", { email, password: "not the password at all" });
    const forged = await dashboardAuthRpc(server, "SignIn", { email, password: ownerPassword }, { origin: "https://evil.example" });
    const state = await dashboardAuthRpc(server, "GetSignInState", {}, { cookie: cookieOf(ok) });
    expect([ok.status, wrong.status, forged.status, state.status]).toEqual([200, 401, 403, 200]);
    const after = await scrape();
    expect(count(after, "SignIn", "ok") - count(before, "SignIn", "ok")).toBe(1);
    expect(count(after, "SignIn", "unauthenticated") - count(before, "SignIn", "unauthenticated")).toBe(1);
    expect(count(after, "SignIn", "permission_denied") - count(before, "SignIn", "permission_denied")).toBe(1);
    expect(count(after, "GetSignInState", "ok") - count(before, "GetSignInState", "ok")).toBe(1);

    const id = ok.headers.get("x-request-id") ?? "";
    expect(id).not.toBe("");
    const lines = server.logs.filter((line) => line.includes(`"reqId":${JSON.stringify(id)}`));
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0] as string)).toMatchObject({
      rpc: "/svc.v1.DashboardAuthService/SignIn",
      protocol: "connect",
      code: "ok",
    });
    // Nothing secret in any log line: no password, no session token.
    const token = cookieOf(ok).split("=")[1] as string;
    expect(server.logs.join("\n")).not.toContain(ownerPassword);
    expect(server.logs.join("\n")).not.toContain(token);
  });

  test("the answers carry the cookie through Set-Cookie and are never cached", async () => {
    const response = await dashboardAuthRpc(server, "SignIn", { email, password: ownerPassword });
    expect(response.headers.get("content-type")).toBe("application/json");
    expect(response.headers.get("cache-control")).toBe("no-store");
    expect(response.headers.getSetCookie()).toEqual([
      expect.stringMatching(/^gatehouse_dashboard=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=43200$/),
    ]);
    const out = await dashboardAuthRpc(server, "SignOut", {}, { cookie: cookieOf(response) });
    expect(out.headers.getSetCookie()).toEqual(["gatehouse_dashboard=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"]);
    const refused = await dashboardAuthRpc(server, "SignIn", { email, password: "wrong once more" });
    expect(refused.headers.get("cache-control")).toBe("no-store");
    expect(refused.headers.get("set-cookie")).toBeNull();
  });

  test("a malformed body gets the pipeline's error: located, never echoed, and nothing happens", async () => {
    const url = `${server.url}/svc.v1.DashboardAuthService/SignIn`;
    const headers = { origin: server.origin, [dashboardHeader]: "1", "content-type": "application/json" };
    const post = async (body: string, extra: Record<string, string> = {}) => {
      const response = await fetch(url, { method: "POST", headers: { ...headers, ...extra }, body });
      return { status: response.status, text: await response.text() };
    };
    const secret = "hunter2-do-not-echo";

    const broken = await post(`{"email": "${email}", "password": "${secret}`);
    expect(broken.status).toBe(400);
    expect(reasonOf(JSON.parse(broken.text) as ErrorBody)).toBe("malformed_json");
    expect(JSON.parse(broken.text).message).toMatch(/line 1, column \d+ \(byte \d+\)/);
    expect(broken.text).not.toContain(secret);

    const typed = await post(JSON.stringify({ email, password: { value: secret } }));
    expect(typed.status).toBe(400);
    expect(JSON.parse(typed.text).message).toBe('field "password" must be a string');
    expect(typed.text).not.toContain(secret);

    const unknown = await post(JSON.stringify({ email, passwrd: secret }));
    expect(unknown.status).toBe(400);
    expect(unknown.text).not.toContain(secret);
    expect(unknown.text).not.toContain("passwrd");

    const deep = await post(`{"email": ${"[".repeat(65)}${"]".repeat(65)}}`);
    expect(deep.status).toBe(400);
    expect(JSON.parse(deep.text).message).toContain("deeper than 64 levels");

    expect((await post(JSON.stringify({ email, password: ownerPassword }), { "content-type": "text/plain" })).status).toBe(415);
    expect((await post(JSON.stringify({ email, password: ownerPassword }), { "content-encoding": "compress" })).status).toBe(415);
    // Content-Encoding is the pipeline's too: a gzip body signs in like a plain one.
    const zipped = await fetch(url, {
      method: "POST",
      headers: { ...headers, "content-encoding": "gzip" },
      body: gzipSync(JSON.stringify({ email, password: ownerPassword })),
    });
    expect(zipped.status).toBe(200);
    expect(zipped.headers.get("set-cookie")).toMatch(/^gatehouse_dashboard=/);
    // A GET is no RPC call.
    const get = await fetch(url, { headers });
    expect(get.status).toBe(405);
    expect(get.headers.get("allow")).toBe("POST");
  });

  test("the binary protobuf encoding works as well (a real Connect RPC)", async () => {
    const client = createClient(
      DashboardAuthService,
      createConnectTransport({ baseUrl: server.url, httpVersion: "1.1", useBinaryFormat: true }),
    );
    const headers = { origin: server.origin, [dashboardHeader]: "1" };
    let setCookie = "";
    const answer = await client.signIn(
      { email, password: ownerPassword },
      { headers, onHeader: (h) => (setCookie = h.get("set-cookie") ?? "") },
    );
    expect(answer.accountId).toMatch(/^[0-9a-f-]{36}$/);
    expect(setCookie).toMatch(/^gatehouse_dashboard=[A-Za-z0-9_-]{43};/);
    const state = await client.getSignInState({}, { headers: { ...headers, cookie: setCookie.split(";")[0] as string } });
    expect(state.state).toBe(SignInState.SIGNED_IN);
  });

  test("the request guard runs on the gRPC door too: no browser page sent it, so it is refused", async () => {
    const transport = createGrpcTransport({ baseUrl: server.grpcUrl });
    for (const call of [
      () => createClient(DashboardAuthService, transport).signIn({ email, password: ownerPassword }),
      () => createClient(DashboardService, transport).getOperatorSession({}),
    ]) {
      const error = ConnectError.from(await call().catch((e: unknown) => e));
      expect(error.code).toBe(Code.PermissionDenied);
      expect(error.rawMessage).toContain("dashboard requests must come from a page of");
    }
  });
});

describe("the request guard: every RPC of both dashboard services needs a dashboard page's Origin and header", () => {
  let server: DashboardTestServer;
  let cookie: string;
  beforeAll(async () => {
    server = await startDashboardServer();
    cookie = await setUpOwner(server, email);
  });
  afterAll(() => server.close());

  const methods = [...DashboardService.methods, ...DashboardAuthService.methods].map((m) => `${m.parent.name}/${m.name}`);
  const refusals: [string, DashboardRequestOptions][] = [
    ["no Origin", { origin: null }],
    ["another site's Origin", { origin: "https://evil.example" }],
    ['Origin "null"', { origin: "null" }],
    ["the same host on another scheme", { origin: "https://127.0.0.1" }],
    ["no X-Gatehouse-Dashboard header", { marked: false }],
  ];

  test("both services are guarded, auth RPCs included", () => {
    expect(methods).toEqual(
      expect.arrayContaining(["DashboardAuthService/SignIn", "DashboardAuthService/SignOut", "DashboardService/ListGatewayKeys"]),
    );
    expect(methods.length).toBeGreaterThan(45);
  });

  test.each(methods)(
    "%s: refused with 403 (cross_site_request) for each forgery, before authentication, with or without the cookie",
    async (path) => {
      const [service, method] = path.split("/") as [string, string];
      const send = service === "DashboardAuthService" ? dashboardAuthRpc : dashboardRpc;
      // Every request message decodes from {}: the guard, not the body, decides.
      for (const [what, options] of refusals) {
        for (const withCookie of [false, true]) {
          const response = await send(server, method, {}, { ...options, ...(withCookie ? { cookie } : {}) });
          const body = (await response.json()) as ErrorBody;
          expect({ what, withCookie, status: response.status, code: body.code, reason: reasonOf(body) }).toEqual({
            what,
            withCookie,
            status: 403,
            code: "permission_denied",
            reason: "cross_site_request",
          });
          expect(response.headers.get("set-cookie")).toBeNull();
        }
      }
    },
  );

  test("a forged SignIn with the right password starts no session; a forged SignOut ends none", async () => {
    const sessions = () => server.app.database.client.dashboardSession.count({ where: { revokedAt: null } });
    const before = await sessions();
    expect((await dashboardAuthRpc(server, "SignIn", { email, password: ownerPassword }, { origin: "https://evil.example" })).status).toBe(
      403,
    );
    expect(await sessions()).toBe(before);
    expect((await dashboardAuthRpc(server, "SignOut", {}, { cookie, marked: false })).status).toBe(403);
    expect((await dashboardRpc(server, "GetOperatorSession", {}, { cookie })).status).toBe(200);
  });

  test("other services are not the guard's: an API key needs no Origin", async () => {
    const response = await server.call(`/organization/${server.credentials.organization_id}/config`, {
      bearer: server.credentials.api_key,
    });
    expect(response.status).toBe(200);
  });
});

describe("GetSignInState tells a first visit from an ended session, without failing and without extending it", () => {
  const manual = createManualClock();
  let server: DashboardTestServer;
  beforeAll(async () => {
    server = await startDashboardServer({ clock: manual.clock });
    await setUpOwner(server, email);
  });
  afterAll(() => server.close());

  const stateOf = async (options: DashboardRequestOptions = {}) => {
    const response = await dashboardAuthRpc(server, "GetSignInState", {}, options);
    expect(response.status).toBe(200);
    expect(response.headers.get("set-cookie")).toBeNull();
    return ((await response.json()) as { state: string }).state;
  };

  test("no cookie: signed out; a live session: signed in; a signed-out, unknown or malformed one: ended or signed out", async () => {
    expect(await stateOf()).toBe("SIGN_IN_STATE_SIGNED_OUT");
    const cookie = await signIn(server, email, ownerPassword);
    expect(await stateOf({ cookie })).toBe("SIGN_IN_STATE_SIGNED_IN");
    expect(await stateOf({ cookie: `gatehouse_dashboard=${"A".repeat(43)}` })).toBe("SIGN_IN_STATE_ENDED");
    // Not a token at all: as if there were no cookie.
    expect(await stateOf({ cookie: "gatehouse_dashboard=short" })).toBe("SIGN_IN_STATE_SIGNED_OUT");
    await dashboardAuthRpc(server, "SignOut", {}, { cookie });
    expect(await stateOf({ cookie })).toBe("SIGN_IN_STATE_ENDED");
  });

  test("an idle or expired session is ended; asking does not keep a session alive", async () => {
    const cookie = await signIn(server, email, ownerPassword);
    const lastSeen = async () =>
      (await server.app.database.client.dashboardSession.findFirst({ where: { hash: hashToken(cookie.split("=")[1] ?? "") } }))?.lastSeenAt;
    const seen = await lastSeen();
    manual.advance(20 * 60_000);
    expect(await stateOf({ cookie })).toBe("SIGN_IN_STATE_SIGNED_IN");
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await lastSeen()).toEqual(seen);
    manual.advance(11 * 60_000);
    expect(await stateOf({ cookie })).toBe("SIGN_IN_STATE_ENDED");
    expect((await dashboardRpc(server, "GetOperatorSession", {}, { cookie })).status).toBe(401);

    const expiring = await signIn(server, email, ownerPassword);
    await server.app.database.client.dashboardSession.updateMany({
      where: { hash: hashToken(expiring.split("=")[1] ?? "") },
      data: { expiresAt: manual.clock() },
    });
    expect(await stateOf({ cookie: expiring })).toBe("SIGN_IN_STATE_ENDED");
  });
});
