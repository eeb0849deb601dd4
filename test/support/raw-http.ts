import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { connect, createServer, type AddressInfo, type Server as TcpServer, type Socket } from "node:net";

/**
 * A witness upstream: a plain node:http server (it answers every request, an
 * `Upgrade: websocket` one included, with 200 and a JSON echo, as any HTTP
 * server that is not a WebSocket server would) behind a TCP relay that
 * records every byte it is sent. "The upstream never saw X" is then a
 * search of `received()`.
 */
export interface Witness {
  url: string;
  /** Every byte any connection sent to the upstream, in order of arrival, as Latin-1 text. */
  received(): string;
  /** Requests the upstream's HTTP server parsed: method, url, headers. */
  requests: { method: string; url: string; headers: IncomingMessage["headers"]; rawHeaders: string[] }[];
  /** Set to answer the next requests differently. */
  handler?: (req: IncomingMessage, res: ServerResponse) => void;
  close(): Promise<void>;
}

export async function startWitness(): Promise<Witness> {
  const requests: Witness["requests"] = [];
  let bytes = "";
  const witness: Witness = {
    url: "",
    received: () => bytes,
    requests,
    close: async () => {},
  };
  const http: Server = createHttpServer((req, res) => {
    requests.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, rawHeaders: req.rawHeaders });
    if (witness.handler) return witness.handler(req, res);
    req.resume();
    req.on("end", () => {
      const body = JSON.stringify({ method: req.method, url: req.url, headers: req.headers });
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
      res.end(body);
    });
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const httpPort = (http.address() as AddressInfo).port;
  const relays = new Set<Socket>();
  const relay: TcpServer = createServer((client) => {
    const server = connect(httpPort, "127.0.0.1");
    relays.add(client);
    relays.add(server);
    client.on("data", (chunk: Buffer) => {
      bytes += chunk.toString("latin1");
      server.write(chunk);
    });
    server.pipe(client);
    const end = () => {
      client.destroy();
      server.destroy();
    };
    client.on("close", end);
    server.on("close", end);
    client.on("error", end);
    server.on("error", end);
  });
  await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
  witness.url = `http://127.0.0.1:${(relay.address() as AddressInfo).port}`;
  witness.close = async () => {
    for (const socket of relays) socket.destroy();
    http.closeAllConnections();
    await Promise.all([
      new Promise<void>((resolve) => relay.close(() => resolve())),
      new Promise<void>((resolve) => http.close(() => resolve())),
    ]);
  };
  return witness;
}

/**
 * What came back on a raw connection, until the other side closed it or `quietMs`
 * passed without a byte (before the first byte, `firstByteMs`: a loaded machine can
 * take longer than `quietMs` to begin an answer).
 */
export interface RawExchange {
  text: string;
  /** Whether the other side closed the connection. */
  closed: boolean;
}

/**
 * Writes `chunks` to a fresh TCP connection (each after the previous one's
 * answer began, or after `gapMs`), and collects everything that comes back.
 */
export function rawExchange(
  url: string,
  chunks: readonly (string | Buffer)[],
  options: { gapMs?: number; quietMs?: number; firstByteMs?: number; localAddress?: string } = {},
): Promise<RawExchange> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port), ...(options.localAddress ? { localAddress: options.localAddress } : {}) });
    let text = "";
    let closed = false;
    let timer: NodeJS.Timeout | undefined;
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve({ text, closed });
    };
    const quiet = () => {
      clearTimeout(timer);
      const quietMs = options.quietMs ?? 300;
      timer = setTimeout(finish, text === "" ? (options.firstByteMs ?? Math.max(quietMs, 2000)) : quietMs);
    };
    socket.on("data", (chunk: Buffer) => {
      text += chunk.toString("latin1");
      quiet();
    });
    socket.on("end", () => {
      closed = true;
      finish();
    });
    socket.on("close", () => {
      closed = true;
      finish();
    });
    socket.on("error", (error: NodeJS.ErrnoException) => (error.code === "ECONNRESET" ? undefined : reject(error)));
    socket.on("connect", async () => {
      for (const chunk of chunks) {
        if (socket.destroyed) break;
        socket.write(chunk);
        await new Promise((r) => setTimeout(r, options.gapMs ?? 100));
      }
      quiet();
    });
  });
}

/** The status codes of the responses in a raw exchange, in order. */
export function statusesOf(text: string): number[] {
  return [...text.matchAll(/HTTP\/1\.[01] (\d{3}) /g)].map((m) => Number(m[1]));
}

/** The header block of the first response of a raw exchange, lower-cased names. */
export function firstHeadersOf(text: string): Record<string, string> {
  const head = text.slice(0, text.indexOf("\r\n\r\n"));
  const headers: Record<string, string> = {};
  for (const line of head.split("\r\n").slice(1)) {
    const colon = line.indexOf(":");
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  return headers;
}

/** The body of the first response (Content-Length framed), parsed as JSON. */
export function firstJsonOf(text: string): Record<string, unknown> {
  const start = text.indexOf("\r\n\r\n") + 4;
  const length = Number(firstHeadersOf(text)["content-length"]);
  return JSON.parse(text.slice(start, start + length)) as Record<string, unknown>;
}
