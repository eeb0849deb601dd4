import { connect as connectTcp, type Socket } from "node:net";
import { connect as connectTls } from "node:tls";
import type { UpstreamTarget } from "./compile-gateway-state.js";
import { answers } from "./gateway-answer.js";
import type { Exchange } from "./gateway-handler.js";

/**
 * Tunnels an accepted `Upgrade: websocket` request (RFC 6455 section 4.1):
 * connects to the route's upstream, sends the request head with the
 * forwarding headers and the upgrade fields, then pipes both sockets until
 * either side closes. The upstream's handshake answer, whatever it is, goes
 * to the client as it came; its status line is read only for the log.
 * Refused or reset before any answer: 502; no answer in time: 504.
 */
export function openTunnel(exchange: Exchange, upstream: UpstreamTarget, headers: Record<string, string | string[]>): void {
  const client = exchange.socket!;
  const req = exchange.req;
  const deps = exchange.deps;
  // An upgrade is the one case where the Upgrade and Connection fields must travel on (RFC 9110 section 7.8).
  headers.connection = "Upgrade";
  headers.upgrade = "websocket";
  let head = `${req.method ?? "GET"} ${upstream.basePath}${req.url ?? "/"} HTTP/1.1\r\nhost: ${hostHeader(upstream)}\r\n`;
  for (const name in headers) {
    const value = headers[name]!;
    if (Array.isArray(value)) for (const item of value) head += `${name}: ${item}\r\n`;
    else head += `${name}: ${value}\r\n`;
  }
  head += "\r\n";

  const server: Socket = upstream.secure
    ? connectTls({ host: upstream.hostname, port: upstream.port, servername: upstream.hostname, ALPNProtocols: ["http/1.1"] })
    : connectTcp({ host: upstream.hostname, port: upstream.port });
  server.setNoDelay(true);
  let answered = false;
  const timer = setTimeout(() => fail("timeout"), deps.upstreamTimeoutMs);

  function fail(kind: "timeout" | "refused" | "reset"): void {
    clearTimeout(timer);
    server.destroy();
    if (answered) {
      client.destroy();
      return;
    }
    answered = true;
    exchange.metrics?.upstreamError(kind);
    client.unpipe(server);
    exchange.answer(kind === "timeout" ? answers.upstreamTimeout : answers.upstreamUnreachable);
  }

  server.on("error", (error: NodeJS.ErrnoException) => fail(answered ? "reset" : error.code === "ECONNREFUSED" ? "refused" : "reset"));
  server.once(upstream.secure ? "secureConnect" : "connect", () => {
    server.write(head, "latin1");
    if (exchange.head !== undefined && exchange.head.length > 0) server.write(exchange.head);
    client.pipe(server);
  });
  server.once("data", (first: Buffer) => {
    clearTimeout(timer);
    answered = true;
    // "HTTP/1.1 101 Switching Protocols": the status is the three digits after the first space.
    const status = Number(first.subarray(9, 12).toString("latin1"));
    exchange.upstreamStatus = Number.isInteger(status) ? status : 0;
    client.write(first);
    server.pipe(client);
    deps.tunnels.add(client);
    exchange.settle(exchange.upstreamStatus || 502);
  });
  server.once("end", () => {
    if (!answered) fail("reset");
  });
  server.once("close", () => {
    clearTimeout(timer);
    if (answered) client.destroy();
  });
  client.once("close", () => {
    deps.tunnels.delete(client);
    server.destroy();
  });
}

function hostHeader(upstream: UpstreamTarget): string {
  const host = upstream.hostname.includes(":") ? `[${upstream.hostname}]` : upstream.hostname;
  const defaultPort = upstream.secure ? 443 : 80;
  return upstream.port === defaultPort ? host : `${host}:${upstream.port}`;
}
