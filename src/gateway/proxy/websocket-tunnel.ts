import { request as httpRequest, STATUS_CODES, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { droppedResponseHeaders } from "./upstream-headers.js";

/** Where the tunnel goes. */
export interface TunnelTarget {
  readonly hostname: string;
  readonly port: number;
  readonly secure: boolean;
}

export interface TunnelRequest {
  /** The client's socket, taken from the HTTP server by its `upgrade` event. */
  readonly client: Duplex;
  /** Bytes the client sent after the request head: only ever sent upstream once the tunnel is open. */
  readonly head: Buffer | undefined;
  readonly target: TunnelTarget;
  /** The forwarded request target (canonical path and query), as the routes and rules judged it. */
  readonly path: string;
  /** The upstream request's headers (upgrade fields excluded: they are set here). */
  readonly headers: Record<string, string | string[]>;
  /** How long the upstream may take to connect and answer its head. */
  readonly timeoutMs: number;
  /** How long an open tunnel may carry nothing either way before it is closed. */
  readonly idleTimeoutMs: number;
  /** Headers added to whatever the client receives: [name, value, ...]. */
  readonly answerHeaders: readonly string[];
}

export interface TunnelEvents {
  /** The upstream answered 101: the tunnel is open until either side closes. */
  opened(): void;
  /** The upstream answered something else, relayed as a plain response; the connection then closes. */
  answered(status: number): void;
  /** No answer: refused or reset before one, or too slow. */
  failed(kind: "refused" | "reset" | "timeout"): void;
  /** The tunnel (or the relayed answer) is over and both sockets are closed. */
  closed(): void;
}

/**
 * Tunnels an `Upgrade: websocket` request that every plugin of its route let
 * through (RFC 6455 section 4.1; docs/security.md, "The gateway"). The
 * upstream request is made with node:http's client, whose parser says
 * whether the answer really is `101 Switching Protocols` with the upgrade
 * fields; only then are the two sockets joined. Until then nothing the client
 * sent after its request head reaches the upstream, and an answer that is not
 * a switch (a 200 from a plain HTTP server, a 401, a redirect) is relayed as
 * an ordinary response after which the client's connection closes: a socket
 * is never joined to an upstream that did not agree to leave HTTP, so no
 * later request on it can pass unjudged.
 */
export function openWebSocketTunnel(tunnel: TunnelRequest, events: TunnelEvents): void {
  const { client, target } = tunnel;
  const send = target.secure ? httpsRequest : httpRequest;
  let settled = false;
  const upstream = send({
    host: target.hostname,
    port: target.port,
    method: "GET",
    path: tunnel.path,
    headers: { ...tunnel.headers, connection: "Upgrade", upgrade: "websocket" },
    // One connection per tunnel: it leaves HTTP if the switch happens, so it is never pooled.
    agent: false,
    timeout: tunnel.timeoutMs,
    ...(target.secure ? { servername: target.hostname, ALPNProtocols: ["http/1.1"] } : {}),
  });

  const fail = (kind: "refused" | "reset" | "timeout") => {
    if (settled) return;
    settled = true;
    upstream.destroy();
    events.failed(kind);
  };
  upstream.on("timeout", () => fail("timeout"));
  upstream.on("error", (error: NodeJS.ErrnoException) => fail(error.code === "ECONNREFUSED" ? "refused" : "reset"));
  client.once("close", () => {
    if (!settled) {
      settled = true;
      upstream.destroy();
      events.closed();
    }
  });

  upstream.on("upgrade", (answer: IncomingMessage, socket: Socket, upstreamHead: Buffer) => {
    if (settled) {
      socket.destroy();
      return;
    }
    settled = true;
    socket.setTimeout(0);
    socket.setNoDelay(true);
    client.write(headOf(101, answer.rawHeaders, tunnel.answerHeaders, false), "latin1");
    if (upstreamHead.length > 0) client.write(upstreamHead);
    if (tunnel.head !== undefined && tunnel.head.length > 0) socket.write(tunnel.head);
    socket.pipe(client);
    client.pipe(socket);
    const close = () => {
      socket.destroy();
      client.destroy();
    };
    socket.on("error", close);
    client.on("error", close);
    socket.once("close", () => {
      client.destroy();
      events.closed();
    });
    client.once("close", () => socket.destroy());
    // Everything either side sends passes through the client's socket: its idleness is the tunnel's.
    if ("setTimeout" in client && typeof client.setTimeout === "function") (client as Socket).setTimeout(tunnel.idleTimeoutMs, close);
    events.opened();
  });

  upstream.on("response", (answer: IncomingMessage) => {
    if (settled) {
      answer.destroy();
      return;
    }
    settled = true;
    const status = answer.statusCode ?? 502;
    // Close-delimited (RFC 9112 section 6.3): the answer is relayed as it streams, then the connection ends.
    client.write(headOf(status, answer.rawHeaders, tunnel.answerHeaders, true), "latin1");
    answer.on("data", (chunk: Buffer) => client.write(chunk));
    answer.once("end", () => client.end());
    answer.once("error", () => client.destroy());
    client.once("close", () => {
      answer.destroy();
      events.closed();
    });
    events.answered(status);
  });

  upstream.end();
}

/** A response head for the client, from the upstream's raw header lines less hop-by-hop ones (kept on a switch). */
function headOf(status: number, rawHeaders: readonly string[], extra: readonly string[], closing: boolean): string {
  let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}\r\n`;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const lower = name.toLowerCase();
    // A switch keeps its Upgrade and Connection fields; a relayed answer is close-delimited.
    if (closing ? droppedResponseHeaders.has(lower) || lower === "trailer" : lower === "keep-alive") continue;
    head += `${name}: ${rawHeaders[i + 1]}\r\n`;
  }
  for (let i = 0; i < extra.length; i += 2) head += `${extra[i]}: ${extra[i + 1]}\r\n`;
  if (closing) head += "connection: close\r\n";
  return `${head}\r\n`;
}
