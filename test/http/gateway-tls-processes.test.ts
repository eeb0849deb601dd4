import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect as http2Connect, type ClientHttp2Session } from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import { makeCertificate, type TestCertificate } from "../support/certificates.js";
import { runCli, startServe, type ServeProcess } from "../support/cli.js";
import { isBuilt } from "../support/config-process.js";
import { createTestDatabase, testProvider, type TestDatabase } from "../support/database.js";
import { startEchoUpstream, type EchoUpstream } from "../support/gateway.js";
import { freePort, revisionAt, startGatewayProcess, until, type GatewayProcess } from "../support/gateway-process.js";
import { secretsApi } from "../support/secrets-client.js";
import type { TestServer } from "../support/server.js";

/**
 * Certificates kept as secrets, end to end (docs/gateway.md, "TLS"): sealed
 * through the API, referenced by a domain, served by the embedded gateway of
 * `gatehouse serve` and by a standalone `gatehouse gateway`, each learning
 * them from the control plane; rotated by writing the secrets again, which
 * every gateway serves to new handshakes without a restart while a
 * connection opened before keeps working. The standalone gateway's cache
 * file never holds the key in the clear. (SQLite only: what storage does
 * here is what the secrets tests cover on both databases.)
 */
if (!isBuilt()) throw new Error("dist/ is not built (node scripts/build.mjs)");
const describeOnce = testProvider === "sqlite" ? describe : describe.skip;

let db: TestDatabase;
let work: string;
let echo: EchoUpstream;
let serve: ServeProcess;
let standalone: GatewayProcess;
let org: string;
let adminKey: string;
let first: TestCertificate;
let second: TestCertificate;
const tlsPorts: { embedded: number; standalone: number } = { embedded: 0, standalone: 0 };

const cliEnv = () => ({ DATABASE_URL: db.url, GATEHOUSE_DATA_DIR: db.dataDir });
function cli<T>(args: string[]): T {
  const answer = runCli([...args, "--json"], cliEnv());
  if (answer.status !== 0) throw new Error(`gatehouse ${args.join(" ")}: ${answer.status} ${answer.stderr}`);
  return JSON.parse(answer.stdout) as T;
}

/** The platform as the secrets client needs it: calls over HTTP to the serve process. */
function platform(): TestServer {
  return {
    call: (path: string, init: RequestInit & { bearer?: string } = {}) => {
      const { bearer, headers, ...rest } = init;
      const merged = new Headers(headers);
      if (bearer !== undefined) merged.set("authorization", `Bearer ${bearer}`);
      return fetch(`${serve.url}${path}`, { ...rest, headers: merged });
    },
  } as unknown as TestServer;
}

/** The certificate a gateway's TLS port presents for api.example.com (its SHA-256 fingerprint), or undefined when the handshake fails. */
function presented(port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = tlsConnect({ host: "127.0.0.1", port, servername: "api.example.com", rejectUnauthorized: false });
    socket.once("secureConnect", () => {
      resolve(socket.getPeerX509Certificate()?.fingerprint256);
      socket.destroy();
    });
    socket.once("error", () => resolve(undefined));
  });
}

function get(session: ClientHttp2Session, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ":path": path, ":authority": "api.example.com" });
    stream.on("response", (headers) => {
      stream.resume();
      stream.on("end", () => resolve(Number(headers[":status"])));
    });
    stream.on("error", reject);
    stream.end();
  });
}

beforeAll(async () => {
  if (testProvider !== "sqlite") return;
  db = await createTestDatabase();
  work = mkdtempSync(join(tmpdir(), "gatehouse-tls-"));
  echo = await startEchoUpstream();
  [first, second] = await Promise.all([makeCertificate(["api.example.com"]), makeCertificate(["api.example.com"], { keyType: "rsa" })]);
  const init = cli<{ organization_id: string; api_key: string }>(["init"]);
  org = init.organization_id;
  adminKey = init.api_key;
  const gatewayKey = cli<{ gateway_key: string }>(["keys", "create", "--org", org, "--kind", "gateway", "--name", "edge"]).gateway_key;
  const [gatewayPort, adminPort] = [await freePort(), await freePort()];
  tlsPorts.embedded = await freePort();
  tlsPorts.standalone = await freePort();
  serve = await startServe({
    ...cliEnv(),
    HOST: "127.0.0.1",
    GATEWAY_PORT: String(gatewayPort),
    GATEWAY_ADMIN_PORT: String(adminPort),
    GATEWAY_TLS_PORT: String(tlsPorts.embedded),
  });
  const secrets = secretsApi(platform(), adminKey, org);
  await secrets.put("API_CERT", "production", first.cert);
  await secrets.put("API_KEY", "production", first.key);
  const put = await fetch(`${serve.url}/organization/${org}/config?strict=true`, {
    method: "PUT",
    headers: { authorization: `Bearer ${adminKey}`, "content-type": "application/yaml" },
    body: `version: 1
domains:
  - name: api.example.com
    tls:
      certificate: \${secret:production/API_CERT}
      private_key: \${secret:production/API_KEY}
routes:
  - name: all
    path: /*
    upstream: ${echo.url}
`,
  });
  if (put.status !== 200) throw new Error(`PUT config: ${put.status} ${await put.text()}`);
  const revision = ((await put.json()) as { revision: number }).revision;
  standalone = await startGatewayProcess({
    id: "edge-tls",
    key: gatewayKey,
    urls: [serve.url],
    cache: join(work, "cache.json"),
    env: { GATEWAY_TLS_PORT: String(tlsPorts.standalone) },
  });
  await until(async () => (await revisionAt(standalone)) >= revision, "the standalone gateway at the revision");
}, 120_000);

afterAll(async () => {
  await standalone?.stop();
  await serve?.stop();
  await echo?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

describeOnce("certificates as secrets, followed by every gateway", () => {
  test("both gateways serve the sealed certificate; a rotation reaches new handshakes on both while an open connection keeps working", async () => {
    for (const port of [tlsPorts.embedded, tlsPorts.standalone]) {
      await until(async () => (await presented(port)) === first.fingerprint256, `the first certificate on port ${port}`);
    }
    const open = http2Connect(`https://127.0.0.1:${tlsPorts.standalone}`, { servername: "api.example.com", ca: first.cert });
    try {
      expect(await get(open, "/before")).toBe(200);

      const secrets = secretsApi(platform(), adminKey, org);
      await secrets.put("API_CERT", "production", second.cert);
      await secrets.put("API_KEY", "production", second.key);
      for (const port of [tlsPorts.embedded, tlsPorts.standalone]) {
        await until(async () => (await presented(port)) === second.fingerprint256, `the rotated certificate on port ${port}`, 10_000);
      }
      // No restart, no dropped connection: the session opened before the rotation still answers.
      expect(open.closed || open.destroyed).toBe(false);
      expect(await get(open, "/after")).toBe(200);
    } finally {
      await new Promise<void>((resolve) => open.close(() => resolve()));
    }
    expect(echo.seen.map((seen) => seen.url)).toEqual(expect.arrayContaining(["/before", "/after"]));
  });

  test("the standalone gateway's cache file and both processes' output hold no private key or certificate in the clear", async () => {
    const cache = readFileSync(standalone.cache, "utf8");
    for (const text of [cache, standalone.output(), serve.output()]) {
      expect(text).not.toContain("PRIVATE KEY");
      expect(text).not.toContain(first.key.split("\n")[1]!);
      expect(text).not.toContain(second.key.split("\n")[1]!);
    }
  });

  test("the expiry metric of each gateway names the domain at the served certificate's notAfter", async () => {
    const metrics = await (await fetch(`${standalone.adminUrl}/metrics`)).text();
    expect(metrics).toContain(
      `gatehouse_gateway_certificate_expiry_timestamp_seconds{domain="api.example.com"} ${Math.floor(Date.parse(second.validTo) / 1000)}`,
    );
  });
});
