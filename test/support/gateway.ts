import { createHash, randomBytes } from "node:crypto";
import { createServer, request, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { readConfigDocument } from "../../src/domain/config/read-config-document.js";
import { createGateway, type Gateway, type GatewayAddresses, type GatewayOptions } from "../../src/gateway/gateway.js";
import type { Consumer, GatewayState } from "../../src/gateway/gateway-state.js";
import { createLoggers } from "../../src/server/logger.js";

/** What an echo upstream saw of one request. */
export interface Echo {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  /** The raw header lines, to see repeated fields. */
  rawHeaders: string[];
  body: string;
  /** The upstream's name, to tell upstreams apart. */
  upstream: string;
}

export interface EchoUpstream {
  url: string;
  server: Server;
  /** Requests it has seen, in order. */
  seen: Echo[];
  close(): Promise<void>;
}

/**
 * A real upstream: a node:http server answering 200 with a JSON echo of the
 * method, path, headers and body of each request. `x-echo-status` and
 * `x-echo-header` on the request set the status and add a response header.
 */
export async function startEchoUpstream(name = "echo"): Promise<EchoUpstream> {
  const seen: Echo[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const echo: Echo = {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        body: Buffer.concat(chunks).toString("utf8"),
        upstream: name,
      };
      seen.push(echo);
      const body = JSON.stringify(echo);
      const status = Number(req.headers["x-echo-status"] ?? 200);
      const headers: Record<string, string | number> = { "content-type": "application/json", "content-length": Buffer.byteLength(body) };
      const extra = req.headers["x-echo-header"];
      if (typeof extra === "string") {
        const [key = "", ...value] = extra.split(":");
        headers[key.trim()] = value.join(":").trim();
      }
      res.writeHead(status, headers);
      res.end(req.method === "HEAD" ? undefined : body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    server,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export interface StateExtras {
  revision?: number;
  organizationId?: string;
  issuer?: string;
  audience?: string;
  jwks?: GatewayState["jwks"];
  revokedSessions?: Map<string, number>;
  consumers?: Map<string, Consumer>;
  secrets?: Map<string, string>;
}

/** A GatewayState from a YAML document, read and validated by the platform's own reader. */
export function stateFromYaml(yaml: string, extras: StateExtras = {}): GatewayState {
  const { document } = readConfigDocument(yaml);
  return {
    organizationId: extras.organizationId ?? "org-test",
    issuer: extras.issuer ?? "http://127.0.0.1:8080",
    audience: extras.audience ?? extras.organizationId ?? "org-test",
    revision: extras.revision ?? 1,
    document,
    jwks: extras.jwks ?? { keys: [] },
    revokedSessions: extras.revokedSessions ?? new Map(),
    consumers: extras.consumers ?? new Map(),
    secrets: extras.secrets ?? new Map(),
  };
}

/** A consumer key as the platform makes them (ck_ + 43 base64url chars) and the hash the gateway looks it up by. */
export function newConsumerKey(): { key: string; hash: string } {
  const key = `ck_${randomBytes(32).toString("base64url")}`;
  return { key, hash: createHash("sha256").update(key).digest("hex") };
}

export interface TestGateway extends GatewayAddresses {
  gateway: Gateway;
  /** Every log line the gateway wrote, parsed. */
  logs: Record<string, unknown>[];
  /** Lines as written, to search for things that must never be logged. */
  rawLogs: string[];
  close(): Promise<void>;
}

/** A real gateway on ephemeral ports, logging into memory. */
export async function startTestGateway(options: Partial<GatewayOptions> = {}, state?: GatewayState): Promise<TestGateway> {
  const rawLogs: string[] = [];
  const logs: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split("\n")) {
        if (line.length === 0) continue;
        rawLogs.push(line);
        logs.push(JSON.parse(line) as Record<string, unknown>);
      }
      done();
    },
  });
  const loggers = createLoggers("info", destination);
  const gateway = createGateway({ host: "127.0.0.1", port: 0, logger: loggers.app, ...options });
  if (state) gateway.apply(state);
  const addresses = await gateway.listen();
  return { ...addresses, gateway, logs, rawLogs, close: () => gateway.close() };
}

/** An answer read whole: status, headers and the body as text and, when it is JSON, parsed. */
export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  json: Record<string, unknown>;
}

/**
 * One HTTP/1.1 request with node:http (fetch would refuse to set Host or to
 * send some headers), on a fresh connection.
 */
export function send(
  url: string,
  options: {
    method?: string;
    path?: string;
    headers?: Record<string, string | string[]>;
    body?: string | Buffer;
    /** The client's address (127.0.0.x on Linux), to act as another client. */
    localAddress?: string;
  } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const req = request(
      {
        host: target.hostname,
        port: target.port,
        method: options.method ?? "GET",
        path: options.path ?? "/",
        headers: options.headers ?? {},
        agent: false,
        ...(options.localAddress !== undefined ? { localAddress: options.localAddress } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let json: Record<string, unknown> = {};
          try {
            json = text.length > 0 ? (JSON.parse(text) as Record<string, unknown>) : {};
          } catch {
            json = {};
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

/** The upstream's echo inside a forwarded answer. */
export function echoOf(answer: Answer): Echo {
  if (answer.status === 0 || typeof answer.json.method !== "string") {
    throw new Error(`not an echo: ${answer.status} ${answer.text.slice(0, 200)}`);
  }
  return answer.json as unknown as Echo;
}

/** The reason of a Connect JSON error body. */
export function reasonOf(answer: Answer): string | undefined {
  const details = answer.json.details as { debug?: { reason?: string } }[] | undefined;
  return details?.[0]?.debug?.reason;
}
