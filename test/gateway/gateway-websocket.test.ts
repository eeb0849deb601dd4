import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { WebSocket, WebSocketServer } from "ws";
import { send, startTestGateway, stateFromYaml, newConsumerKey, type TestGateway } from "../support/gateway.js";
import type { Consumer } from "../../src/gateway/gateway-state.js";

/**
 * docs/gateway.md, "The data plane: how the gateway enforces it": `Upgrade: websocket` is tunnelled,
 * after the route's rules and credentials; other upgrades are ignored.
 */
let http: Server;
let wss: WebSocketServer;
let gw: TestGateway;
let upstreamUrl: string;
const seenHeaders: Record<string, string | string[] | undefined>[] = [];
const consumer = newConsumerKey();

beforeAll(async () => {
  http = createServer((_req, res) => {
    res.writeHead(200);
    res.end("plain");
  });
  wss = new WebSocketServer({ server: http });
  wss.on("connection", (socket, req) => {
    seenHeaders.push(req.headers);
    socket.send(`hello ${req.url}`);
    socket.on("message", (data) => socket.send(`echo ${String(data)}`));
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  upstreamUrl = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  gw = await startTestGateway(
    {},
    stateFromYaml(
      `version: 1
plugins:
  - name: keys
    type: api-key-auth
  - name: tag
    type: request-headers
    config: {set: {x-tunnel: "yes"}}
rules:
  - name: no-bots
    match: {header: user-agent, regex: bot}
    action: deny
routes:
  - name: socket
    path: /ws/*
    upstream: ${upstreamUrl}/base
    plugins: [tag]
    rules: [no-bots]
  - name: keyed-socket
    path: /keyed-ws
    upstream: ${upstreamUrl}
    plugins: [keys]
  - name: nowhere
    path: /nowhere
    upstream: http://127.0.0.1:1
`,
      { consumers: new Map<string, Consumer>([[consumer.hash, { id: "c1", name: "c1" }]]) },
    ),
  );
});
afterAll(async () => {
  await gw.close();
  for (const client of wss.clients) client.terminate();
  wss.close();
  http.closeAllConnections();
  await new Promise<void>((resolve) => http.close(() => resolve()));
});

function open(path: string, headers: Record<string, string> = {}): Promise<{ socket: WebSocket; first: string }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`${gw.url.replace("http", "ws")}${path}`, { headers });
    socket.once("message", (data) => resolve({ socket, first: String(data) }));
    socket.once("unexpected-response", (_req, res) => reject(new Error(`status ${res.statusCode}`)));
    socket.once("error", reject);
  });
}

function nextMessage(socket: WebSocket): Promise<string> {
  return new Promise((resolve) => socket.once("message", (data) => resolve(String(data))));
}

test("a WebSocket is tunnelled both ways to the route's upstream, with the forwarding headers", async () => {
  const { socket, first } = await open("/ws/chat?room=1", { "x-request-id": "ws-1" });
  expect(first).toBe("hello /base/ws/chat?room=1");
  for (const text of ["one", "two", "x".repeat(100_000)]) {
    socket.send(text);
    expect(await nextMessage(socket)).toBe(`echo ${text}`);
  }
  const headers = seenHeaders.at(-1)!;
  expect(headers["x-forwarded-for"]).toBe("127.0.0.1");
  expect(headers["x-request-id"]).toBe("ws-1");
  expect(headers["x-tunnel"]).toBe("yes");
  expect(headers.upgrade).toBe("websocket");
  socket.close();
  for (let i = 0; i < 50 && !gw.logs.some((l) => l.reqId === "ws-1"); i++) await new Promise((r) => setTimeout(r, 10));
  expect(gw.logs.find((l) => l.reqId === "ws-1")).toMatchObject({ route: "socket", status: 101, upstreamStatus: 101 });
});

test("the route's rules and credentials apply to the upgrade", async () => {
  await expect(open("/ws/chat", { "user-agent": "bot" })).rejects.toThrow("status 403");
  await expect(open("/keyed-ws")).rejects.toThrow("status 401");
  const { socket, first } = await open("/keyed-ws", { "x-api-key": consumer.key });
  expect(first).toBe("hello /keyed-ws");
  socket.close();
});

test("an upgrade to no route is 404, and an unreachable upstream 502", async () => {
  await expect(open("/elsewhere")).rejects.toThrow("status 404");
  await expect(open("/nowhere")).rejects.toThrow("status 502");
});

test("an upgrade to anything but websocket (h2c included) is ignored: the request is served as plain HTTP/1.1 (RFC 9110 section 7.8)", async () => {
  const answer = await send(gw.url, {
    path: "/ws/x",
    headers: { connection: "Upgrade, HTTP2-Settings", upgrade: "h2c", "http2-settings": "AAMAAABkAARAAAAAAAIAAAAA" },
  });
  // The upstream's plain handler answered (it never saw an upgrade: Upgrade and Connection are hop-by-hop).
  expect(answer.status).toBe(200);
  expect(answer.text).toBe("plain");
});

test("closing the gateway ends open tunnels", async () => {
  const gw2 = await startTestGateway(
    {},
    stateFromYaml(`version: 1\nroutes:\n  - name: s\n    path: /ws/*\n    upstream: ${upstreamUrl}\n`),
  );
  const socket = await new Promise<WebSocket>((resolve, reject) => {
    const ws = new WebSocket(`${gw2.url.replace("http", "ws")}/ws/x`);
    ws.once("message", () => resolve(ws));
    ws.once("error", reject);
  });
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  await gw2.close();
  await closed;
});
