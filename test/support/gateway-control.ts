import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { GatewayService, type WatchGatewayResponse } from "../../gen/svc/v1/gateway_pb.js";
import type { GatewayCredentials } from "../../src/domain/gateway/gateway-credentials.js";
import { createFollower, type Follower, type FollowerOptions } from "../../src/gateway/follower/follower.js";
import type { GatewayState } from "../../src/gateway/gateway-state.js";
import { gatewayCredentialsOf } from "../../src/composition/gateway.js";
import { createPlatform } from "../../src/composition/platform.js";
import { loadConfig } from "../../src/config.js";
import type { DatabaseConfig } from "../../src/config.js";
import type { Database } from "../../src/storage/database.js";
import type { TestServer } from "./server.js";

/**
 * The gateway-key and consumer-key functions as an operator command uses them:
 * over the server's database, with a change feed of their own (NOTIFY on
 * PostgreSQL; on SQLite, the in-process hub every feed of the file shares).
 */
export function gatewayAdmin(server: Pick<TestServer, "app">): { credentials: GatewayCredentials; close(): Promise<void> } {
  return gatewayAdminOn(server.app.database, server.app.config.database, () => server.app.credentialsChanged());
}

export function gatewayAdminOn(
  database: Database,
  config: DatabaseConfig,
  credentialsChanged: () => Promise<void>,
): { credentials: GatewayCredentials; close(): Promise<void> } {
  // An operator command's platform over the database: a change feed of its own, no subscriptions.
  const url = config.provider === "sqlite" ? `file:${config.file}` : config.url;
  const { platform, close } = createPlatform({
    config: loadConfig({ DATABASE_URL: url }),
    database,
    logger: { info: () => {}, warn: () => {}, error: () => {} },
    serving: false,
    keyring: () => {
      throw new Error("gateway keys need no master key");
    },
    passwordHasher: () => {
      throw new Error("gateway keys hash no password");
    },
    credentialsChanged: () => credentialsChanged(),
  });
  return { credentials: gatewayCredentialsOf(platform), close };
}

/** A follower whose states are recorded, with a way to wait for one. */
export interface RecordedFollower {
  follower: Follower;
  states: GatewayState[];
  /** Resolves with the first state (already recorded or to come) that satisfies the predicate. */
  waitFor(predicate: (state: GatewayState) => boolean, timeoutMs?: number, what?: string): Promise<GatewayState>;
  /** Like waitFor, also giving when (performance.now()) the state arrived. */
  waitForTimed(predicate: (state: GatewayState) => boolean, timeoutMs?: number): Promise<{ state: GatewayState; at: number }>;
  close(): Promise<void>;
}

export async function startFollower(
  options: Omit<FollowerOptions, "onState"> & { onState?: FollowerOptions["onState"] },
): Promise<RecordedFollower> {
  const states: { state: GatewayState; at: number }[] = [];
  const waiters = new Set<{
    predicate: (s: GatewayState) => boolean;
    resolve: (v: { state: GatewayState; at: number }) => void;
    timer: NodeJS.Timeout;
  }>();
  const follower = createFollower({
    rsaModulusLength: 2048,
    backoff: { initialMs: 50, maxMs: 1_000, refusedMs: 1_000 },
    ...options,
    onState(state) {
      const entry = { state, at: performance.now() };
      states.push(entry);
      options.onState?.(state);
      for (const waiter of [...waiters]) {
        if (waiter.predicate(state)) {
          waiters.delete(waiter);
          waiter.resolve(entry);
        }
      }
    },
  });
  await follower.start();
  const waitForTimed = (predicate: (s: GatewayState) => boolean, timeoutMs = 10_000, what = "state") => {
    const found = states.find((entry) => predicate(entry.state));
    if (found) return Promise.resolve(found);
    return new Promise<{ state: GatewayState; at: number }>((resolve, reject) => {
      const waiter = {
        predicate,
        resolve: (value: { state: GatewayState; at: number }) => {
          clearTimeout(waiter.timer);
          resolve(value);
        },
        timer: setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`no ${what} within ${timeoutMs} ms (status ${JSON.stringify(follower.status())})`));
        }, timeoutMs),
      };
      waiters.add(waiter);
    });
  };
  return {
    follower,
    get states() {
      return states.map((entry) => entry.state);
    },
    waitFor: async (predicate, timeoutMs, what) => (await waitForTimed(predicate, timeoutMs, what)).state,
    waitForTimed: (predicate, timeoutMs) => waitForTimed(predicate, timeoutMs),
    async close() {
      for (const waiter of waiters) clearTimeout(waiter.timer);
      waiters.clear();
      await follower.close();
    },
  };
}

/** A raw WatchGateway stream, read one message at a time. */
export function watchGateway(
  baseUrl: string,
  bearer: string,
  request: { gatewayId: string; sinceRevision?: number; organizationId?: string },
) {
  const controller = new AbortController();
  const client = createClient(GatewayService, createConnectTransport({ baseUrl, httpVersion: "1.1" }));
  const iterator = client
    .watchGateway(request, { headers: { authorization: `Bearer ${bearer}` }, signal: controller.signal })
    [Symbol.asyncIterator]();
  const within = <T>(promise: Promise<T>, timeoutMs: number, what: string) =>
    new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no ${what} within ${timeoutMs} ms`)), timeoutMs);
      promise.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  return {
    /** The next message that is not a heartbeat. */
    async next(timeoutMs = 10_000): Promise<WatchGatewayResponse> {
      for (;;) {
        const result = await within(iterator.next(), timeoutMs, "WatchGateway message");
        if (result.done) throw new Error("the WatchGateway stream ended");
        if (result.value.event.case !== "heartbeat") return result.value;
      }
    },
    /** Resolves with the error that ended the stream (undefined when it ended cleanly). */
    async ended(timeoutMs = 10_000): Promise<unknown> {
      try {
        for (;;) {
          const result = await within(iterator.next(), timeoutMs, "end of the WatchGateway stream");
          if (result.done) return undefined;
          if (result.value.event.case !== "heartbeat") return new Error(`unexpected message: ${result.value.event.case}`);
        }
      } catch (error) {
        return error;
      }
    },
    close() {
      controller.abort();
      iterator.return?.().catch(() => {});
    },
  };
}

/**
 * Under jest, connect-node does not recognise Node's own errors (another
 * realm), so a gateway hanging up is logged as a failed RPC. Mute exactly that.
 */
export function muteGatewayHangUps(): void {
  const original = console.error.bind(console);
  console.error = (...args: unknown[]) => {
    if (
      typeof args[0] === "string" &&
      /^handler for rpc (WatchGateway|WatchConfig)/.test(args[0]) &&
      /ERR_STREAM_DESTROYED|ERR_STREAM_PREMATURE_CLOSE|aborted/.test(String(args[1]))
    )
      return;
    original(...args);
  };
}

/** Signs a new identity in with a magic link (secret key): its session token, session id and identity id. */
export async function signInWithMagicLink(
  server: Pick<TestServer, "call" | "credentials">,
  secretKey = server.credentials.secret_key,
): Promise<{ token: string; sessionId: string; identityId: string }> {
  const post = async (method: string, body: unknown) => {
    const response = await server.call(`/svc.v1.IdentityService/${method}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      bearer: secretKey,
    });
    const text = await response.text();
    if (response.status !== 200) throw new Error(`${method}: ${response.status} ${text}`);
    return JSON.parse(text) as Record<string, unknown>;
  };
  const link = await post("GenerateMagicLink", { identifier: `gw.${Math.random().toString(36).slice(2, 10)}@example.com` });
  const signed = (await post("VerifyMagicLink", { token: link.token })) as { identityId: string; session: { token: string } };
  const claims = JSON.parse(Buffer.from(signed.session.token.split(".")[1] as string, "base64url").toString()) as { sid: string };
  return { token: signed.session.token, sessionId: claims.sid, identityId: signed.identityId };
}

/** A request-headers plugin that puts a secret into a header, on a route that uses it. */
export function secretRouteDocument(
  options: { reference?: string; upstream?: string; plugin?: string; route?: string; header?: string } = {},
): string {
  const plugin = options.plugin ?? "inject-token";
  return [
    "version: 1",
    "plugins:",
    `  - name: ${plugin}`,
    "    type: request-headers",
    "    config:",
    "      set:",
    `        ${options.header ?? "authorization"}: "Bearer \${secret:${options.reference ?? "production/UPSTREAM_TOKEN"}}"`,
    "routes:",
    `  - name: ${options.route ?? "with-secret"}`,
    "    path: /secret/*",
    `    upstream: ${options.upstream ?? "http://127.0.0.1:9001"}`,
    `    plugins: [${plugin}]`,
    "",
  ].join("\n");
}
