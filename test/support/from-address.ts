import { Agent, request } from "node:http";

/** An answer read whole: status, headers and the parsed JSON body (or the text). */
export interface AddressedAnswer<T = Record<string, unknown>> {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: T;
}

const agents = new Map<string, Agent>();

/**
 * A keep-alive agent whose sockets leave from `localAddress` (any of
 * 127.0.0.0/8 on Linux, or ::1), so requests over loopback come from distinct
 * client addresses.
 */
export function agentFrom(localAddress: string): Agent {
  let agent = agents.get(localAddress);
  if (!agent) {
    agent = new Agent({ keepAlive: true, localAddress, maxSockets: 64 });
    agents.set(localAddress, agent);
  }
  return agent;
}

/** Closes every agent this module made (afterAll). */
export function closeAgents(): void {
  for (const agent of agents.values()) agent.destroy();
  agents.clear();
}

/** A request from `localAddress` to `baseUrl + path` with a JSON body (or none for GET). */
export function requestFrom<T = Record<string, unknown>>(
  localAddress: string,
  baseUrl: string,
  path: string,
  options: { method?: string; headers?: Record<string, string>; json?: unknown } = {},
): Promise<AddressedAnswer<T>> {
  const url = new URL(path, baseUrl);
  const payload = options.json === undefined ? undefined : JSON.stringify(options.json);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname.replace(/^\[|\]$/g, ""),
        port: url.port,
        path: url.pathname + url.search,
        method: options.method ?? (payload === undefined ? "GET" : "POST"),
        agent: agentFrom(localAddress),
        headers: {
          ...(payload === undefined ? {} : { "content-type": "application/json", "content-length": String(Buffer.byteLength(payload)) }),
          ...options.headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let body: unknown = text;
          try {
            body = text.length > 0 ? JSON.parse(text) : {};
          } catch {
            body = { unparsed: text };
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: body as T });
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

/** The error reason of a Connect JSON error body. */
export function reasonIn(answer: AddressedAnswer): string | undefined {
  return (answer.body as { details?: { debug?: { reason?: string } }[] }).details?.[0]?.debug?.reason;
}
