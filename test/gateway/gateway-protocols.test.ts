import { execFile } from "node:child_process";
import { connect as http2Connect, type ClientHttp2Session, type IncomingHttpHeaders as Http2Headers } from "node:http2";
import { connect as tlsConnect, type ConnectionOptions } from "node:tls";
import { certificateFile, makeCertificate, type TestCertificate } from "../support/certificates.js";
import {
  echoOf,
  send,
  startEchoUpstream,
  startTestGateway,
  stateFromYaml,
  type Answer,
  type EchoUpstream,
  type TestGateway,
} from "../support/gateway.js";

/**
 * TLS, HTTP/2 and h2c at the gateway (docs/gateway.md, "TLS" and "HTTP/2"):
 * real handshakes with node:tls and Debian's curl against certificates made
 * by openssl in the test, certificates chosen by SNI (exact before wildcard),
 * rotation under an open connection, and the same answers for every request
 * whichever protocol carried it.
 */
let api: TestCertificate;
let rotated: TestCertificate;
let wild: TestCertificate;
let exactWild: TestCertificate;
let echo: EchoUpstream;
let gw: TestGateway;
let revision = 1;

const documentFor = (upstream: string) => `version: 1
domains:
  - name: api.example.com
    tls:
      certificate: \${secret:production/API_CERT}
      private_key: \${secret:production/API_KEY}
    redirect_http: true
  - name: "*.wild.test"
    tls:
      certificate: \${secret:production/WILD_CERT}
      private_key: \${secret:production/WILD_KEY}
  - name: exact.wild.test
    tls:
      certificate: \${secret:production/EXACT_CERT}
      private_key: \${secret:production/EXACT_KEY}
  - name: plain.test
plugins:
  - name: keys
    type: api-key-auth
  - name: tag
    type: request-headers
    config: {set: {x-env: production}, remove: [x-debug]}
  - name: tight
    type: rate-limit
    config: {requests: 3, window_seconds: 60}
rules:
  - name: no-admin
    match: {path_prefix: /admin}
    action: deny
  - name: needs-header
    match: {header: x-team, regex: ^blue$}
    action: allow
routes:
  - name: open
    path: /*
    upstream: ${upstream}/r-open
    rules: [no-admin]
    plugins: [tag]
  - name: keyed
    path: /keyed/*
    upstream: ${upstream}/r-keyed
    plugins: [keys]
  - name: team
    path: /team/*
    upstream: ${upstream}/r-team
    rules: [needs-header]
  - name: posts
    path: /posts
    methods: [POST]
    upstream: ${upstream}/r-posts
  - name: limited
    path: /limited/*
    upstream: ${upstream}/r-limited
    plugins: [tight]
`;

function secretsWith(apiCertificate: TestCertificate): Map<string, string> {
  return new Map([
    ["production/API_CERT", apiCertificate.cert],
    ["production/API_KEY", apiCertificate.key],
    ["production/WILD_CERT", wild.cert],
    ["production/WILD_KEY", wild.key],
    ["production/EXACT_CERT", exactWild.cert],
    ["production/EXACT_KEY", exactWild.key],
  ]);
}

beforeAll(async () => {
  [api, rotated, wild, exactWild] = await Promise.all([
    makeCertificate(["api.example.com"]),
    makeCertificate(["api.example.com"], { keyType: "rsa" }),
    makeCertificate(["*.wild.test"]),
    makeCertificate(["exact.wild.test"]),
  ]);
  echo = await startEchoUpstream();
});
afterAll(() => echo.close());

beforeEach(async () => {
  gw = await startTestGateway({ tlsPort: 0 }, stateFromYaml(documentFor(echo.url), { revision: revision++, secrets: secretsWith(api) }));
});
afterEach(() => gw.close());

interface Handshake {
  ok: boolean;
  fingerprint?: string;
  protocol?: string | null;
  alpn?: string | false | null;
  error?: string;
}

/** One TLS handshake with node:tls; the peer's certificate, the version and ALPN agreed, or why it failed. */
function handshake(servername: string | undefined, options: ConnectionOptions = {}): Promise<Handshake> {
  return new Promise((resolve) => {
    const socket = tlsConnect({
      host: "127.0.0.1",
      port: gw.tlsPort!,
      ...(servername !== undefined ? { servername } : {}),
      rejectUnauthorized: false,
      ...options,
    });
    socket.once("secureConnect", () => {
      resolve({
        ok: true,
        fingerprint: socket.getPeerX509Certificate()?.fingerprint256,
        protocol: socket.getProtocol(),
        alpn: socket.alpnProtocol,
      });
      socket.destroy();
    });
    socket.once("error", (error: NodeJS.ErrnoException) => resolve({ ok: false, error: `${error.code ?? ""} ${error.message}` }));
  });
}

interface H2Answer extends Answer {
  trailers: Http2Headers;
}

/** One request on an HTTP/2 session, read whole. */
function h2Request(
  session: ClientHttp2Session,
  options: { method?: string; path: string; authority?: string; headers?: Record<string, string>; body?: string },
): Promise<H2Answer> {
  return new Promise((resolve, reject) => {
    const stream = session.request({
      ":method": options.method ?? "GET",
      ":path": options.path,
      ...(options.authority !== undefined ? { ":authority": options.authority } : {}),
      ...options.headers,
    });
    let headers: Http2Headers = {};
    let trailers: Http2Headers = {};
    const chunks: Buffer[] = [];
    stream.on("response", (h) => {
      headers = h;
    });
    stream.on("trailers", (t) => {
      trailers = t;
    });
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      let json: Record<string, unknown> = {};
      try {
        json = text.length > 0 ? (JSON.parse(text) as Record<string, unknown>) : {};
      } catch {}
      resolve({ status: Number(headers[":status"]), headers: headers as Answer["headers"], text, json, trailers });
    });
    stream.on("error", reject);
    stream.end(options.body);
  });
}

function h2cSession(): ClientHttp2Session {
  return http2Connect(gw.url);
}

function h2TlsSession(servername = "api.example.com", ca = api.cert): ClientHttp2Session {
  return http2Connect(`https://127.0.0.1:${gw.tlsPort}`, { servername, ca });
}

async function closeSession(session: ClientHttp2Session): Promise<void> {
  await new Promise<void>((resolve) => session.close(() => resolve()));
}

function curl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile("curl", ["-s", "-S", "--max-time", "10", ...args], { encoding: "utf8" }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === "number" ? error.code : 1) : 0, stdout, stderr });
    });
  });
}

async function metrics(): Promise<string> {
  return (await fetch(`${gw.adminUrl}/metrics`)).text();
}

describe("TLS termination", () => {
  test("SNI picks the domain's certificate: an exact name, a wildcard one label deep, an exact name before the wildcard", async () => {
    expect(await handshake("api.example.com")).toMatchObject({ ok: true, fingerprint: api.fingerprint256 });
    expect(await handshake("API.Example.COM")).toMatchObject({ ok: true, fingerprint: api.fingerprint256 });
    expect(await handshake("a.wild.test")).toMatchObject({ ok: true, fingerprint: wild.fingerprint256 });
    expect(await handshake("exact.wild.test")).toMatchObject({ ok: true, fingerprint: exactWild.fingerprint256 });
    // One label only: a.b.wild.test and wild.test itself are not covered by *.wild.test.
    expect((await handshake("a.b.wild.test")).ok).toBe(false);
    expect((await handshake("wild.test")).ok).toBe(false);
  });

  test("the certificate verifies against its own CA for its name (what a browser checks)", async () => {
    expect(await handshake("api.example.com", { rejectUnauthorized: true, ca: api.cert })).toMatchObject({ ok: true });
    expect(await handshake("x.wild.test", { rejectUnauthorized: true, ca: wild.cert })).toMatchObject({ ok: true });
  });

  test("a handshake for a name without a certificate, or without SNI, fails and is counted; a domain without tls has none", async () => {
    const unknown = await handshake("unknown.example.org");
    expect(unknown.ok).toBe(false);
    expect(unknown.error).toMatch(/unrecognized name|alert|handshake|socket hang up|ECONNRESET/i);
    expect((await handshake("plain.test")).ok).toBe(false);
    // Without SNI (a bare IP address sends none).
    expect((await handshake(undefined)).ok).toBe(false);
    expect(await metrics()).toMatch(/gatehouse_gateway_tls_handshake_failures_total\{reason="[^"]+"\} [1-9]/);
  });

  test("TLS 1.3 and TLS 1.2 are served; TLS 1.1 is not", async () => {
    expect(await handshake("api.example.com")).toMatchObject({ ok: true, protocol: "TLSv1.3" });
    expect(await handshake("api.example.com", { maxVersion: "TLSv1.2" })).toMatchObject({ ok: true, protocol: "TLSv1.2" });
    expect((await handshake("api.example.com", { minVersion: "TLSv1", maxVersion: "TLSv1.1", ciphers: "DEFAULT@SECLEVEL=0" })).ok).toBe(
      false,
    );
  });

  test("ALPN: h2 when the client offers it, http/1.1 otherwise", async () => {
    expect(await handshake("api.example.com", { ALPNProtocols: ["h2", "http/1.1"] })).toMatchObject({ ok: true, alpn: "h2" });
    expect(await handshake("api.example.com", { ALPNProtocols: ["http/1.1"] })).toMatchObject({ ok: true, alpn: "http/1.1" });
  });

  test("HTTPS with curl over HTTP/1.1 and HTTP/2: the route answers, the upstream sees X-Forwarded-Proto https and the real Host", async () => {
    const ca = await certificateFile(api);
    try {
      for (const version of ["--http1.1", "--http2"]) {
        const result = await curl([
          version,
          "--cacert",
          ca.path,
          "--resolve",
          `api.example.com:${gw.tlsPort}:127.0.0.1`,
          "-w",
          "\n%{http_version} %{http_code}",
          `https://api.example.com:${gw.tlsPort}/hello?x=1`,
        ]);
        expect(result.stderr).toBe("");
        const [body, status] = result.stdout.split("\n") as [string, string];
        expect(status).toBe(version === "--http2" ? "2 200" : "1.1 200");
        const seen = JSON.parse(body) as { url: string; headers: Record<string, string> };
        expect(seen.url).toBe("/r-open/hello?x=1");
        expect(seen.headers["x-forwarded-proto"]).toBe("https");
        expect(seen.headers["x-env"]).toBe("production");
      }
    } finally {
      await ca.remove();
    }
  });

  test("redirect_http: plain HTTP for the domain is 308 to the same target on https; other domains are served", async () => {
    const answer = await send(gw.url, { path: "/a/b?c=d", headers: { host: "api.example.com" } });
    expect(answer.status).toBe(308);
    expect(answer.headers.location).toBe(`https://api.example.com:${gw.tlsPort}/a/b?c=d`);
    expect(echo.seen.filter((e) => e.url.startsWith("/r-open/a/b"))).toEqual([]);
    expect((await send(gw.url, { path: "/a", headers: { host: "plain.test" } })).status).toBe(200);
    // The same name over TLS is served, not redirected.
    const session = h2TlsSession();
    try {
      expect((await h2Request(session, { path: "/a/b", authority: "api.example.com" })).status).toBe(200);
    } finally {
      await closeSession(session);
    }
  });

  test("a new certificate in the secrets serves new handshakes at once; a connection opened before keeps working on the old one", async () => {
    const before = h2TlsSession();
    try {
      expect((await h2Request(before, { path: "/one", authority: "api.example.com" })).status).toBe(200);
      const oldFingerprint = (before.socket as unknown as { getPeerX509Certificate(): { fingerprint256: string } }).getPeerX509Certificate()
        .fingerprint256;
      expect(oldFingerprint).toBe(api.fingerprint256);

      gw.gateway.apply(stateFromYaml(documentFor(echo.url), { revision: revision++, secrets: secretsWith(rotated) }));
      expect(await handshake("api.example.com")).toMatchObject({ ok: true, fingerprint: rotated.fingerprint256 });
      // The open connection was not dropped: it answers another request.
      expect((await h2Request(before, { path: "/two", authority: "api.example.com" })).status).toBe(200);
      const metric = (await metrics()).match(/gatehouse_gateway_certificate_expiry_timestamp_seconds\{domain="api.example.com"\} (\d+)/);
      expect(Number(metric?.[1])).toBe(Math.floor(Date.parse(rotated.validTo) / 1000));
    } finally {
      await closeSession(before);
    }
  });

  test("the expiry metric has every domain with a certificate, at the leaf's notAfter", async () => {
    const text = await metrics();
    for (const [domain, certificate] of [
      ["api.example.com", api],
      ["*.wild.test", wild],
      ["exact.wild.test", exactWild],
    ] as const) {
      expect(text).toContain(
        `gatehouse_gateway_certificate_expiry_timestamp_seconds{domain="${domain}"} ${Math.floor(Date.parse(certificate.validTo) / 1000)}`,
      );
    }
    expect(text).not.toContain('domain="plain.test"');
  });

  test("a rotation written one secret at a time: while the certificate and key do not match, the domain keeps its previous certificate", async () => {
    const halfway = secretsWith(api);
    halfway.set("production/API_CERT", rotated.cert); // the new chain is written, the key not yet
    gw.gateway.apply(stateFromYaml(documentFor(echo.url), { revision: revision++, secrets: halfway }));
    expect(await handshake("api.example.com")).toMatchObject({ ok: true, fingerprint: api.fingerprint256 });
    expect(gw.logs.find((line) => line.domain === "api.example.com" && String(line.msg).includes("previous certificate"))).toBeDefined();
    gw.gateway.apply(stateFromYaml(documentFor(echo.url), { revision: revision++, secrets: secretsWith(rotated) }));
    expect(await handshake("api.example.com")).toMatchObject({ ok: true, fingerprint: rotated.fingerprint256 });
    expect(gw.rawLogs.join("\n")).not.toContain("PRIVATE KEY");
    expect(gw.rawLogs.join("\n")).not.toContain("BEGIN CERTIFICATE");
  });

  test("a gateway that starts with a key that does not match its certificate has none for the domain, serves the others and says why without the PEM", async () => {
    await gw.close();
    const secrets = secretsWith(api);
    secrets.set("production/API_KEY", wild.key);
    gw = await startTestGateway({ tlsPort: 0 }, stateFromYaml(documentFor(echo.url), { revision: revision++, secrets }));
    expect((await handshake("api.example.com")).ok).toBe(false);
    expect(await handshake("exact.wild.test")).toMatchObject({ ok: true, fingerprint: exactWild.fingerprint256 });
    expect(gw.logs.find((line) => line.domain === "api.example.com")).toMatchObject({ reason: expect.any(String) });
    expect(gw.rawLogs.join("\n")).not.toContain("PRIVATE KEY");
  });

  test("when an exact domain has no usable certificate, a wildcard domain that covers the name serves it (never no answer at all)", async () => {
    await gw.close();
    const secrets = secretsWith(api);
    secrets.set("production/EXACT_KEY", api.key);
    gw = await startTestGateway({ tlsPort: 0 }, stateFromYaml(documentFor(echo.url), { revision: revision++, secrets }));
    expect(await handshake("exact.wild.test")).toMatchObject({ ok: true, fingerprint: wild.fingerprint256 });
  });
});

describe("HTTP/2", () => {
  test("h2c with prior knowledge on the plain port and h2 over TLS both reach the route", async () => {
    const plain = h2cSession();
    const secure = h2TlsSession();
    try {
      const a = await h2Request(plain, { path: "/via-h2c", authority: "plain.test" });
      const b = await h2Request(secure, { path: "/via-h2", authority: "api.example.com" });
      expect([a.status, b.status]).toEqual([200, 200]);
      expect(echoOf(a).url).toBe("/r-open/via-h2c");
      expect(echoOf(a).headers["x-forwarded-host"]).toBe("plain.test");
      expect(echoOf(b).headers["x-forwarded-host"]).toBe("api.example.com");
      expect(echoOf(a).headers["x-forwarded-proto"]).toBe("http");
      expect(echoOf(b).headers["x-forwarded-proto"]).toBe("https");
      for (const seen of [echoOf(a), echoOf(b)]) {
        expect(Object.keys(seen.headers).filter((name) => name.startsWith(":"))).toEqual([]);
        expect(seen.headers.via).toContain("2 gatehouse");
      }
    } finally {
      await Promise.all([closeSession(plain), closeSession(secure)]);
    }
  });

  test("curl --http2-prior-knowledge on the plain port", async () => {
    const result = await curl([
      "--http2-prior-knowledge",
      "-H",
      "Host: plain.test",
      "-w",
      "\n%{http_version} %{http_code}",
      `${gw.url}/curl-h2c`,
    ]);
    const [body, status] = result.stdout.split("\n") as [string, string];
    expect({ status, stderr: result.stderr }).toEqual({ status: "2 200", stderr: "" });
    expect((JSON.parse(body) as { url: string }).url).toBe("/r-open/curl-h2c");
  });

  test("one POST body streams through unchanged over HTTP/2", async () => {
    const session = h2cSession();
    try {
      const body = "x".repeat(200_000);
      const answer = await h2Request(session, { method: "POST", path: "/posts", authority: "plain.test", body });
      expect(answer.status).toBe(200);
      expect(echoOf(answer).body).toBe(body);
    } finally {
      await closeSession(session);
    }
  });

  test(":authority and Host that disagree are refused with 400, never routed by either", async () => {
    const session = h2cSession();
    try {
      const before = echo.seen.length;
      const answer = await h2Request(session, { path: "/x", authority: "plain.test", headers: { host: "api.example.com" } });
      expect(answer.status).toBe(400);
      expect(echo.seen.length).toBe(before);
    } finally {
      await closeSession(session);
    }
  });

  /**
   * The same requests over HTTP/1.1, h2c and h2 over TLS: routing, rules and
   * plugins answer alike (docs/gateway.md, "HTTP/2": one handler for both).
   */
  test("routes, rules and plugins answer every request alike over HTTP/1.1, h2c and h2", async () => {
    const requests: { path: string; method?: string; headers?: Record<string, string> }[] = [
      { path: "/ok" },
      { path: "/admin/panel" },
      { path: "/keyed/x" },
      { path: "/keyed/x", headers: { "x-api-key": "ck_wrong" } },
      { path: "/team/x" },
      { path: "/team/x", headers: { "x-team": "blue" } },
      { path: "/posts" },
      { path: "/posts", method: "POST" },
      { path: "/a/../admin" },
      { path: "/%2e%2e/admin" },
      { path: "/ok", method: "TRACE" },
      { path: "/ok", headers: { "x-debug": "1", "x-http-method-override": "DELETE" } },
    ];
    const limited = { path: "/limited/x" };
    const over = async (transport: "h1" | "h2c" | "h2"): Promise<string[]> => {
      const out: string[] = [];
      const session = transport === "h2c" ? h2cSession() : transport === "h2" ? h2TlsSession() : undefined;
      const authority = transport === "h2" ? "api.example.com" : "plain.test";
      const one = async (r: { path: string; method?: string; headers?: Record<string, string> }): Promise<string> => {
        const answer =
          session === undefined
            ? await send(gw.url, { path: r.path, method: r.method ?? "GET", headers: { host: authority, ...r.headers } })
            : await h2Request(session, {
                path: r.path,
                method: r.method ?? "GET",
                authority,
                ...(r.headers ? { headers: r.headers } : {}),
              });
        const upstreamPath = typeof answer.json.url === "string" ? ` ${answer.json.url}` : "";
        const env = (answer.json.headers as Record<string, string> | undefined)?.["x-env"] ?? "";
        const debug = (answer.json.headers as Record<string, string> | undefined)?.["x-debug"] ?? "";
        return `${r.method ?? "GET"} ${r.path} -> ${answer.status}${upstreamPath} ${env}${debug}`.trim();
      };
      try {
        for (const r of requests) out.push(await one(r));
        // The rate limit counts per client address, the same whichever protocol: 3 admitted, then 429.
        for (let i = 0; i < 4; i++) out.push(await one(limited));
      } finally {
        if (session) await closeSession(session);
      }
      return out;
    };
    const h1 = await over("h1");
    // A fresh gateway for each transport, so that the rate limit's window starts empty.
    await gw.close();
    gw = await startTestGateway({ tlsPort: 0 }, stateFromYaml(documentFor(echo.url), { revision: revision++, secrets: secretsWith(api) }));
    const h2c = await over("h2c");
    await gw.close();
    gw = await startTestGateway({ tlsPort: 0 }, stateFromYaml(documentFor(echo.url), { revision: revision++, secrets: secretsWith(api) }));
    const h2 = await over("h2");
    expect(h2c).toEqual(h1);
    expect(h2).toEqual(h1);
    // And the answers are the ones the document's routes, rules and plugins call for (so that three wrong answers cannot agree).
    expect(h1).toEqual([
      "GET /ok -> 200 /r-open/ok production",
      "GET /admin/panel -> 403",
      "GET /keyed/x -> 401",
      "GET /keyed/x -> 401",
      "GET /team/x -> 403",
      "GET /team/x -> 200 /r-team/team/x",
      "GET /posts -> 200 /r-open/posts production",
      "POST /posts -> 200 /r-posts/posts",
      "GET /a/../admin -> 400",
      "GET /%2e%2e/admin -> 400",
      "TRACE /ok -> 405",
      "GET /ok -> 200 /r-open/ok production",
      "GET /limited/x -> 200 /r-limited/limited/x",
      "GET /limited/x -> 200 /r-limited/limited/x",
      "GET /limited/x -> 200 /r-limited/limited/x",
      "GET /limited/x -> 429",
    ]);
  });
});
