import { Writable } from "node:stream";
import { createApp, type App, type AppOptions, type Listening } from "../../src/app.js";
import { loadConfig } from "../../src/config.js";
import type { Clock } from "../../src/domain/clock.js";
import type { InitialCredentials } from "../../src/domain/tenancy/tenancy.js";
import { createTestDatabase, type TestDatabase } from "./database.js";

/** A real Gatehouse server on ephemeral ports, over a database of its own. */
export interface TestServer extends Listening {
  app: App;
  db: TestDatabase;
  /** What `gatehouse init` printed. */
  credentials: InitialCredentials;
  /** Every log line the server wrote. */
  logs: string[];
  /** fetch against the platform API with an optional bearer credential. */
  call(path: string, init?: RequestInit & { bearer?: string }): Promise<Response>;
  close(): Promise<void>;
}

export interface TestServerOptions {
  clock?: Clock;
  /** Extra environment (PUBLIC_URL, ...). */
  env?: Record<string, string>;
  /** Reuse a database (a second instance on the same store). */
  db?: TestDatabase;
  /** Master key of the first instance, for a second one. */
  masterKeyBase64?: string;
  /** The webhook delivery worker's seams (a sender, timers, jitter, lease and concurrency). */
  webhooks?: AppOptions["webhooks"];
}

export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const db = options.db ?? (await createTestDatabase());
  const logs: string[] = [];
  const config = loadConfig({
    PORT: "0",
    GRPC_PORT: "0",
    SAMPLE_PORT: "0",
    HOST: "127.0.0.1",
    DATABASE_URL: db.url,
    GATEHOUSE_DATA_DIR: db.dataDir,
    LOG_LEVEL: "info",
    ...(options.masterKeyBase64 ? { GATEHOUSE_MASTER_KEY: options.masterKeyBase64 } : {}),
    ...options.env,
  });
  const app = await createApp({
    config,
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.webhooks ? { webhooks: options.webhooks } : {}),
    logDestination: new Writable({
      write(chunk, _encoding, done) {
        logs.push(
          ...String(chunk)
            .split("\n")
            .filter((line) => line.length > 0),
        );
        done();
      },
    }),
  });
  const credentials = (await app.initialize()) as InitialCredentials;
  const listening = await app.listen();
  const owned = options.db === undefined;
  return {
    ...listening,
    app,
    db,
    credentials,
    logs,
    call(path, init = {}) {
      const { bearer, headers, ...rest } = init;
      const merged = new Headers(headers);
      if (bearer !== undefined) merged.set("authorization", `Bearer ${bearer}`);
      return fetch(listening.url + path, { ...rest, headers: merged });
    },
    async close() {
      await app.close();
      if (owned) await db.drop();
    },
  };
}

/** A clock tests move by hand: no sleeps where a clock seam serves. */
export function createManualClock(start = new Date("2026-11-22T10:00:00Z")) {
  let now = start.getTime();
  const clock: Clock = () => new Date(now);
  return {
    clock,
    advance(ms: number) {
      now += ms;
    },
    set(date: Date) {
      now = date.getTime();
    },
  };
}
