import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";

/** One delivery as the receiver got it. */
export interface ReceivedDelivery {
  id: string;
  timestamp: string;
  signature: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** The body parsed: {type, timestamp, data}. */
  event: { type: string; timestamp: string; data: Record<string, unknown> };
  /** performance.now() when the request's body was complete. */
  at: number;
  /** The path the delivery was POSTed to (endpoints of one receiver differ by path). */
  path: string;
}

/** What the receiver answers a delivery: a status and headers, or never (it hangs until closed). */
export type Answer = { status: number; headers?: Record<string, string> } | "hang";

/**
 * A real webhook receiver (node:http) for tests: it records every delivery,
 * and answers as `answer` says (200 by default). Verification is the test's,
 * with the standardwebhooks package (a verifier nobody here wrote).
 */
export interface WebhookReceiver {
  url: string;
  received: ReceivedDelivery[];
  answer: (delivery: ReceivedDelivery) => Answer;
  /** Resolves once `count` deliveries matching `filter` arrived. */
  until(count: number, filter?: (delivery: ReceivedDelivery) => boolean, timeoutMs?: number): Promise<ReceivedDelivery[]>;
  /** Answers every request held so far ("hang") with this status. */
  release(status: number): void;
  /** How many requests are held unanswered now. */
  held(): number;
  /** Stops listening (the port then refuses connections) and ends hanging answers. */
  close(): Promise<void>;
}

export async function startWebhookReceiver(port = 0): Promise<WebhookReceiver> {
  const hanging = new Set<ServerResponse>();
  const waiters = new Set<() => void>();
  const receiver: WebhookReceiver = {
    url: "",
    received: [],
    answer: () => ({ status: 200 }),
    async until(count, filter = () => true, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const matching = receiver.received.filter(filter);
        if (matching.length >= count) return matching;
        const left = deadline - Date.now();
        if (left <= 0) {
          throw new Error(
            `${matching.length} of ${count} deliveries arrived in ${timeoutMs} ms: ${receiver.received.map((d) => d.event.type).join(", ")}`,
          );
        }
        await new Promise<void>((resolve) => {
          const wake = () => {
            clearTimeout(timer);
            waiters.delete(wake);
            resolve();
          };
          const timer = setTimeout(wake, Math.min(left, 200));
          waiters.add(wake);
        });
      }
    },
    release(status) {
      for (const res of hanging) if (!res.destroyed) res.writeHead(status).end("released");
      hanging.clear();
    },
    held: () => [...hanging].filter((res) => !res.destroyed).length,
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of hanging) res.destroy();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const delivery: ReceivedDelivery = {
        id: String(req.headers["webhook-id"] ?? ""),
        timestamp: String(req.headers["webhook-timestamp"] ?? ""),
        signature: String(req.headers["webhook-signature"] ?? ""),
        headers: req.headers,
        body,
        event: JSON.parse(body) as ReceivedDelivery["event"],
        at: performance.now(),
        path: req.url ?? "/",
      };
      receiver.received.push(delivery);
      for (const wake of [...waiters]) wake();
      const answer = receiver.answer(delivery);
      if (answer === "hang") {
        hanging.add(res);
        return;
      }
      res.writeHead(answer.status, { "content-type": "text/plain", ...answer.headers });
      res.end("ok");
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", () => resolve()));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return receiver;
}

/** Verifies a delivery as a receiver would, with the standardwebhooks package; returns the payload or throws. */
export function verifyDelivery(secret: string, delivery: ReceivedDelivery): unknown {
  return new Webhook(secret).verify(delivery.body, {
    "webhook-id": delivery.id,
    "webhook-timestamp": delivery.timestamp,
    "webhook-signature": delivery.signature,
  });
}
