import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCli, startServe, type ServeProcess } from "../support/cli.js";
import { isBuilt } from "../support/config-process.js";
import { createTestDatabase, testProvider, type TestDatabase } from "../support/database.js";
import { signInWithMagicLink } from "../support/gateway-control.js";
import { freePort, revisionAt, startGatewayProcess, until, type GatewayProcess } from "../support/gateway-process.js";
import { firstHeadersOf, firstJsonOf, rawExchange, startWitness, statusesOf, type Witness } from "../support/raw-http.js";
import type { TestServer } from "../support/server.js";

/**
 * The findings of the edge review (docs/security.md, "The gateway"), each
 * against real processes: `gatehouse serve` with its embedded gateway (which
 * shares its process with the control plane), and a standalone `gatehouse
 * gateway` following it. The witness upstream records every byte it
 * receives; each test says what it must never have seen. The gateway does
 * not touch storage, so the file runs once, on SQLite.
 */
if (!isBuilt()) throw new Error("dist/ is not built (node scripts/build.mjs)");
const describeOnce = testProvider === "sqlite" ? describe : describe.skip;

let db: TestDatabase;
let work: string;
let witness: Witness;
let serve: ServeProcess;
let embedded: { url: string; adminUrl: string };
let standalone: GatewayProcess;
let org: string;
let adminKey: string;
let secretKey: string;
let session: { token: string };

const cliEnv = () => ({ DATABASE_URL: db.url, GATEHOUSE_DATA_DIR: db.dataDir });
function cli<T>(args: string[]): T {
  const answer = runCli([...args, "--json"], cliEnv());
  if (answer.status !== 0) throw new Error(`gatehouse ${args.join(" ")}: ${answer.status} ${answer.stderr}`);
  return JSON.parse(answer.stdout) as T;
}

const documentOf = (upstream: string) => `version: 1
plugins:
  - name: signed-in
    type: session-auth
    config: {forward_identity_header: x-identity-id}
  - name: per-minute
    type: rate-limit
    config: {requests: 100, window_seconds: 60}
rules:
  - name: no-admin
    match: {path_prefix: /admin}
    action: deny
routes:
  - name: pub
    path: /*
    upstream: ${upstream}
    rules: [no-admin]
    plugins: [per-minute]
  - name: sess
    path: /sess/*
    upstream: ${upstream}
    plugins: [signed-in]
`;

beforeAll(async () => {
  if (testProvider !== "sqlite") return;
  db = await createTestDatabase();
  work = mkdtempSync(join(tmpdir(), "gatehouse-edge-"));
  witness = await startWitness();
  const init = cli<{ organization_id: string; api_key: string; secret_key: string }>(["init"]);
  org = init.organization_id;
  adminKey = init.api_key;
  secretKey = init.secret_key;
  const gatewayKey = cli<{ gateway_key: string }>(["keys", "create", "--org", org, "--kind", "gateway", "--name", "edge"]).gateway_key;
  const [gatewayPort, adminPort] = [await freePort(), await freePort()];
  // The control plane and its embedded gateway, with an open-file limit an attacker could exhaust before the fix.
  serve = await startServe(
    { ...cliEnv(), HOST: "127.0.0.1", GATEWAY_PORT: String(gatewayPort), GATEWAY_ADMIN_PORT: String(adminPort), GATEWAY_TLS_PORT: "off" },
    { openFiles: 1024 },
  );
  embedded = { url: `http://127.0.0.1:${gatewayPort}`, adminUrl: `http://127.0.0.1:${adminPort}` };
  const put = await fetch(`${serve.url}/organization/${org}/config?strict=true`, {
    method: "PUT",
    headers: { authorization: `Bearer ${adminKey}`, "content-type": "application/yaml" },
    body: documentOf(witness.url),
  });
  if (put.status !== 200) throw new Error(`PUT config: ${put.status} ${await put.text()}`);
  const revision = ((await put.json()) as { revision: number }).revision;
  standalone = await startGatewayProcess({ id: "edge", key: gatewayKey, urls: [serve.url], cache: join(work, "cache.json") });
  await until(
    async () => (await revisionAt(embedded)) >= revision && (await revisionAt(standalone)) >= revision,
    "both gateways at the revision",
  );
  session = await signInWithMagicLink(
    {
      call: (path: string, init: RequestInit & { bearer?: string } = {}) => {
        const { bearer, headers, ...rest } = init;
        const merged = new Headers(headers);
        if (bearer !== undefined) merged.set("authorization", `Bearer ${bearer}`);
        return fetch(`${serve.url}${path}`, { ...rest, headers: merged });
      },
    } as unknown as TestServer,
    secretKey,
  );
}, 120_000);

afterAll(async () => {
  await standalone?.stop();
  await serve?.stop();
  await witness?.close();
  await db?.drop();
  if (work) rmSync(work, { recursive: true, force: true });
}, 60_000);

const gateways = () =>
  [
    ["the embedded gateway", embedded.url],
    ["a standalone gateway", standalone.url],
  ] as const;
const sawAny = (...needles: string[]) => needles.filter((needle) => witness.received().includes(needle));

const upgradeTo = (path: string) =>
  `GET ${path} HTTP/1.1\r\nHost: gw.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`;

describeOnce("critical: a fake WebSocket upgrade bypasses every plugin", () => {
  test("on both gateways, an upstream's 200 to an upgrade is relayed and the connection closes: the requests sent after it never arrive", async () => {
    for (const [, url] of gateways()) {
      const exchange = await rawExchange(
        url,
        [
          upgradeTo("/pub/x"),
          "GET /admin/secret HTTP/1.1\r\nHost: gw.test\r\n\r\nGET /sess/profile HTTP/1.1\r\nHost: gw.test\r\nx-identity-id: forged-identity\r\n\r\n",
        ],
        { gapMs: 300 },
      );
      expect(statusesOf(exchange.text)).toEqual([200]);
      expect(exchange.closed).toBe(true);
    }
    expect(sawAny("/admin/secret", "/sess/profile", "forged-identity")).toEqual([]);
  });
});

describeOnce("high: a backslash gets past path rules and route auth", () => {
  test("/x/..\\admin/x and /pub/..\\sess/profile are refused with 400 on both gateways; the upstream sees neither", async () => {
    for (const [, url] of gateways()) {
      for (const path of ["/x/..\\admin/x", "/pub/..\\sess/profile", "/x/..;/admin/x", "/x/%5C../admin"]) {
        const exchange = await rawExchange(url, [`GET ${path} HTTP/1.1\r\nHost: gw.test\r\nx-identity-id: forged-identity\r\n\r\n`], {
          quietMs: 100,
        });
        expect({ path, statuses: statusesOf(exchange.text) }).toEqual({ path, statuses: [400] });
      }
    }
    expect(sawAny("admin/x", "sess/profile", "forged-identity")).toEqual([]);
  });
});

describeOnce("medium: one client holding half-sent heads stops nobody else", () => {
  /** Opens `count` connections from `address` that send half a request head and wait. */
  function halfOpen(url: string, count: number, address: string): Promise<Socket[]> {
    const { port } = new URL(url);
    return Promise.all(
      Array.from(
        { length: count },
        () =>
          new Promise<Socket>((resolve) => {
            const socket = connect({ host: "127.0.0.1", port: Number(port), localAddress: address });
            socket.on("error", () => {});
            socket.once("connect", () => {
              socket.write("GET /pub/slow HTTP/1.1\r\nHost: gw.test\r\n");
              resolve(socket);
            });
            socket.once("close", () => resolve(socket));
          }),
      ),
    );
  }

  test("1,500 half-sent heads from six addresses against the embedded gateway of a process limited to 1,024 open files: the control plane, the gateway's admin port and another client are still served", async () => {
    const sockets = (
      await Promise.all(
        ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7"].map((a) => halfOpen(embedded.url, 250, a)),
      )
    ).flat();
    try {
      expect((await fetch(`${serve.url}/healthz`)).status).toBe(200);
      expect((await fetch(`${serve.url}/readyz`)).status).toBe(200);
      expect((await fetch(`${embedded.adminUrl}/healthz`)).status).toBe(200);
      const metrics = await (await fetch(`${embedded.adminUrl}/metrics`)).text();
      expect(Number(/gatehouse_gateway_connections_limit (\d+)/.exec(metrics)?.[1])).toBe(64);
      expect(Number(/gatehouse_gateway_connections_refused_total\{reason="connections"\} (\d+)/.exec(metrics)?.[1])).toBeGreaterThan(1_000);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
    await until(
      async () => (await fetch(`${embedded.url}/pub/after`, { headers: { host: "gw.test" } })).status === 200,
      "the gateway serving again",
    );
  });
});

describeOnce("low: header spellings and forwarding headers", () => {
  test("x_identity_id is never forwarded beside the real identity header; client X-Real-IP and Forwarded are not passed on", async () => {
    for (const [, url] of gateways()) {
      const exchange = await rawExchange(
        url,
        [
          `GET /sess/me HTTP/1.1\r\nHost: gw.test\r\nAuthorization: Bearer ${session.token}\r\nx_identity_id: forged-identity\r\nX-Real-IP: 203.0.113.66\r\nForwarded: for=203.0.113.66\r\nX-Forwarded-For: 203.0.113.66\r\n\r\n`,
        ],
        { quietMs: 150 },
      );
      expect(statusesOf(exchange.text)).toEqual([200]);
    }
    expect(sawAny("forged-identity", "203.0.113.66", "x_identity_id")).toEqual([]);
  });
});

describeOnce("standards, as outside clients found them", () => {
  test("an upstream's response trailers reach the client through both gateways (RFC 9110 section 6.5)", async () => {
    witness.handler = (req, res) => {
      if (req.url !== "/pub/trailers") {
        witness.handler = undefined;
        res.writeHead(404).end();
        return;
      }
      req.resume();
      res.writeHead(200, { "content-type": "text/plain", trailer: "x-checksum" });
      res.write("part one;");
      res.addTrailers({ "x-checksum": "sha256-abc" });
      res.end("part two");
    };
    try {
      for (const [, url] of gateways()) {
        const exchange = await rawExchange(url, ["GET /pub/trailers HTTP/1.1\r\nHost: gw.test\r\nTE: trailers\r\n\r\n"], { quietMs: 300 });
        expect(statusesOf(exchange.text)).toEqual([200]);
        expect(exchange.text).toContain("part one;");
        expect(exchange.text.toLowerCase()).toMatch(/0\r\nx-checksum: sha256-abc\r\n\r\n$/);
      }
    } finally {
      witness.handler = undefined;
    }
  });

  test("two Host fields are 400; an absolute-form target is routed by its authority; CONNECT and TRACE are 405, TRACE never forwarded", async () => {
    for (const [, url] of gateways()) {
      const two = await rawExchange(url, ["GET /pub/two-hosts HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n"], { quietMs: 100 });
      expect(statusesOf(two.text)).toEqual([400]);
      const absolute = await rawExchange(url, ["GET http://gw.test/pub/absolute HTTP/1.1\r\nHost: gw.test\r\n\r\n"], { quietMs: 100 });
      expect(statusesOf(absolute.text)).toEqual([200]);
      const connectAnswer = await rawExchange(url, ["CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"]);
      expect(statusesOf(connectAnswer.text)).toEqual([405]);
      expect(firstJsonOf(connectAnswer.text).code).toBe("unimplemented");
      const trace = await rawExchange(url, ["TRACE /pub/trace-me HTTP/1.1\r\nHost: gw.test\r\n\r\n"], { quietMs: 100 });
      expect(statusesOf(trace.text)).toEqual([405]);
    }
    expect(sawAny("two-hosts", "trace-me")).toEqual([]);
  });

  test("Upgrade: h2c on an ordinary request is ignored (curl --http2 works); parser errors carry Date and the error body; Via is appended; RateLimit-Reset stays within the window", async () => {
    for (const [, url] of gateways()) {
      const h2c = await rawExchange(
        url,
        [
          "GET /pub/h2c HTTP/1.1\r\nHost: gw.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n",
        ],
        { quietMs: 150 },
      );
      expect(statusesOf(h2c.text)).toEqual([200]);
      const headers = firstHeadersOf(h2c.text);
      expect(headers.via).toBe("1.1 gatehouse");
      expect(Number(headers["ratelimit-reset"])).toBeLessThanOrEqual(60);
      const broken = await rawExchange(url, ["GET /pub/x HTTP/1.1\r\nHost: gw.test\r\nbroken header line\r\n\r\n"]);
      expect(statusesOf(broken.text)).toEqual([400]);
      expect(firstHeadersOf(broken.text).date).toMatch(/GMT$/);
      expect(firstJsonOf(broken.text).code).toBe("invalid_argument");
      // curl itself, as the report found it: --http2 on a cleartext URL asks for an upgrade to h2c.
      // (Asynchronously: the witness upstream answers from this process.)
      const curl = await run("curl", [
        "-sS",
        "--http2",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %{http_version}",
        "-H",
        "Host: gw.test",
        `${url}/pub/h2c-curl`,
      ]);
      expect(curl).toEqual({ status: 0, out: "200 1.1", err: "" });
    }
    const forwarded = witness.requests.filter((r) => r.url === "/pub/h2c" || r.url === "/pub/h2c-curl");
    expect(forwarded.map((r) => [r.url, r.headers.upgrade, r.headers.via])).toEqual([
      ["/pub/h2c", undefined, "1.1 gatehouse"],
      ["/pub/h2c-curl", undefined, "1.1 gatehouse"],
      ["/pub/h2c", undefined, "1.1 gatehouse"],
      ["/pub/h2c-curl", undefined, "1.1 gatehouse"],
    ]);
  });
});

/** Runs a program to its end without blocking this process (its witness upstream must keep answering). */
function run(file: string, args: string[]): Promise<{ status: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { encoding: "utf8", timeout: 30_000 }, (error, stdout, stderr) => {
      resolve({ status: error ? ((error as { code?: number }).code ?? null) : 0, out: stdout, err: stderr });
    });
  });
}
