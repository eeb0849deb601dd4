import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { freePort } from "../support/free-port.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { createEndpoint, webhooksRest } from "../support/webhooks.js";

/**
 * The receiver example of docs/events.md ("A receiver"), run as written
 * against a real server: it verifies deliveries with the standardwebhooks
 * package, handles each webhook-id once, and refuses a forged one.
 */
let server: TestServer;
let child: ChildProcess;
let output = "";
let port: number;

function receiverExample(): string {
  const docs = readFileSync("docs/events.md", "utf8");
  const match = /```js receiver\n([\s\S]*?)```/.exec(docs);
  if (!match?.[1]) throw new Error("docs/events.md has no ```js receiver block");
  return match[1];
}

async function untilListening(): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(port, "127.0.0.1", () => {
        socket.end();
        resolve(true);
      });
      socket.on("error", () => resolve(false));
    });
    if (open) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`the example receiver did not listen: ${output}`);
}

beforeAll(async () => {
  server = await startTestServer({ env: { WEBHOOKS_ALLOW_PRIVATE_NETWORKS: "true" } });
  port = await freePort();
});
afterAll(async () => {
  child?.kill();
  await server?.close();
});

test("the example receiver verifies real deliveries, handles each webhook-id once, and refuses a forged one", async () => {
  const endpoint = await createEndpoint(server, { url: `http://127.0.0.1:${port}/webhooks` });
  // Inside the project, so that `import "standardwebhooks"` resolves as it would in the reader's.
  const dir = join(process.cwd(), "test-artifacts");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, "events-receiver-example.mjs");
  writeFileSync(file, receiverExample());
  child = spawn(process.execPath, [file], { env: { ...process.env, WEBHOOK_SECRET: endpoint.secret, PORT: String(port) } });
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  await untilListening();

  const sent = await webhooksRest<{ event_id: string; delivery_id: string }>(server, "POST", `/${endpoint.endpointId}/test`, {});
  const until = async (text: string, count: number) => {
    for (let i = 0; i < 200 && output.split(text).length - 1 < count; i++) await new Promise((resolve) => setTimeout(resolve, 25));
    return output.split(text).length - 1;
  };
  const line = `received webhook.test ${sent.body.event_id} for ${server.credentials.organization_id}`;
  expect(await until(line, 1)).toBe(1);
  // Sent again (same webhook-id): answered 2xx, handled once.
  for (let i = 0; i < 100; i++) {
    const attempts = await webhooksRest<{ delivery: { status: string } }>(
      server,
      "GET",
      `/${endpoint.endpointId}/deliveries/${sent.body.delivery_id}/attempts`,
    );
    if (attempts.body.delivery.status === "WEBHOOK_DELIVERY_STATUS_DELIVERED") break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const again = await webhooksRest(server, "POST", `/${endpoint.endpointId}/deliveries/${sent.body.delivery_id}/redeliver`, {});
  expect(again.status).toBe(200);
  for (let i = 0; i < 100; i++) {
    const attempts = await webhooksRest<{ attempts: { status_code?: number }[] }>(
      server,
      "GET",
      `/${endpoint.endpointId}/deliveries/${sent.body.delivery_id}/attempts`,
    );
    if (attempts.body.attempts.length === 2) {
      expect(attempts.body.attempts.map((a) => a.status_code)).toEqual([204, 204]);
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  // The receiver writes its line before it answers: by the second 204, a second line would be there.
  expect(output.split(line).length - 1).toBe(1);

  // A forgery (another secret's signature) is refused with 400 and handled not at all.
  const forged = await fetch(`http://127.0.0.1:${port}/webhooks`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "webhook-id": "evt_forged",
      "webhook-timestamp": String(Math.floor(Date.now() / 1000)),
      "webhook-signature": "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=",
    },
    body: JSON.stringify({ type: "key.revoked", timestamp: new Date().toISOString(), data: {} }),
  });
  expect(forged.status).toBe(400);
  expect(output).not.toContain("evt_forged");
});
