import pg from "pg";
import type { DatabaseConfig } from "../config.js";
import type { Database, Tx } from "./database.js";

/**
 * Change notification across every instance that shares a database.
 *
 * Writers queue notifications inside a transaction; they are delivered if and
 * only if it commits. On PostgreSQL they travel as NOTIFY (sent by the server
 * at commit, in commit order) and every instance LISTENs on one dedicated
 * connection. On SQLite the database lives in one process, so they are
 * delivered in-process after the commit, to every instance that opened the
 * same file. Payloads are small (identifiers, a revision): subscribers read
 * what changed from the database.
 *
 * Delivery is prompt but not a log: a subscriber that must not miss a change
 * reads from its last known position when it subscribes and whenever it is
 * told about a gap (the listening connection was lost and re-established).
 */
export type ChangeEvent = { kind: "message"; payload: string } | { kind: "gap" };

export interface ChangeSubscription {
  /** Resolves once notifications are being received (LISTEN done). */
  ready: Promise<void>;
  /**
   * True while every notification of the topic reaches this subscriber: LISTEN
   * is done and the connection has not been lost since (after a loss, true
   * again once the gap has been delivered). Caches that trust notifications
   * consult it.
   */
  live(): boolean;
  close(): void;
}

export type Notify = (topic: string, payload: string) => void;

export interface ChangeFeed {
  /** Runs fn in one transaction; what it notifies reaches subscribers once, and only if, it commits. */
  transaction<T>(fn: (tx: Tx, notify: Notify) => Promise<T>): Promise<T>;
  subscribe(topic: string, listener: (event: ChangeEvent) => void): ChangeSubscription;
  close(): Promise<void>;
}

export interface ChangeFeedDeps {
  database: Pick<Database, "transaction">;
  config: DatabaseConfig;
  logger?: { warn(object: object, message: string): void };
}

const topicPattern = /^[a-z][a-z0-9_]{0,39}$/;
/** PostgreSQL refuses NOTIFY payloads of 8000 bytes or more. */
const maxPayloadBytes = 7_999;

function checkTopic(topic: string): void {
  if (!topicPattern.test(topic)) throw new Error(`change feed topic "${topic}" must match ${topicPattern}`);
}

export function createChangeFeed(deps: ChangeFeedDeps): ChangeFeed {
  return deps.config.provider === "postgresql" ? createPostgresFeed(deps, deps.config.url) : createLocalFeed(deps, deps.config.file);
}

type Listener = (event: ChangeEvent) => void;

/** Listeners per topic, shared by every feed of one SQLite file in this process. */
const localHubs = new Map<string, { feeds: number; topics: Map<string, Set<Listener>> }>();

function createLocalFeed(deps: ChangeFeedDeps, file: string): ChangeFeed {
  let hub = localHubs.get(file);
  if (!hub) {
    hub = { feeds: 0, topics: new Map() };
    localHubs.set(file, hub);
  }
  hub.feeds++;
  const shared = hub;
  const mine = new Set<{ topic: string; listener: Listener }>();
  let closed = false;
  return {
    async transaction(fn) {
      const pending: { topic: string; payload: string }[] = [];
      const result = await deps.database.transaction((tx) =>
        fn(tx, (topic, payload) => {
          checkTopic(topic);
          pending.push({ topic, payload });
        }),
      );
      for (const { topic, payload } of pending) {
        for (const listener of [...(shared.topics.get(topic) ?? [])]) deliver(listener, { kind: "message", payload }, deps);
      }
      return result;
    },
    subscribe(topic, listener) {
      checkTopic(topic);
      const listeners = shared.topics.get(topic) ?? new Set();
      shared.topics.set(topic, listeners);
      listeners.add(listener);
      const entry = { topic, listener };
      mine.add(entry);
      return {
        ready: Promise.resolve(),
        live: () => !closed && mine.has(entry),
        close() {
          listeners.delete(listener);
          mine.delete(entry);
        },
      };
    },
    async close() {
      if (closed) return;
      closed = true;
      for (const { topic, listener } of mine) shared.topics.get(topic)?.delete(listener);
      mine.clear();
      shared.feeds--;
      if (shared.feeds === 0) localHubs.delete(file);
    },
  };
}

function deliver(listener: Listener, event: ChangeEvent, deps: ChangeFeedDeps): void {
  try {
    listener(event);
  } catch (error) {
    deps.logger?.warn({ err: error }, "change feed listener failed");
  }
}

/** LISTEN/NOTIFY on a dedicated connection, opened at the first subscription and re-opened when lost. */
function createPostgresFeed(deps: ChangeFeedDeps, url: string): ChangeFeed {
  const topics = new Map<string, Set<Listener>>();
  let client: pg.Client | undefined;
  let connecting: Promise<pg.Client> | undefined;
  let listening = new Set<string>();
  /** Set when the connection is lost, cleared once subscribers have been told of the gap. */
  let missed = false;
  let closed = false;
  let retryMs = 100;
  let retryTimer: NodeJS.Timeout | undefined;

  const channelOf = (topic: string) => `gatehouse_${topic}`;

  function dispatch(topic: string, event: ChangeEvent): void {
    for (const listener of [...(topics.get(topic) ?? [])]) deliver(listener, event, deps);
  }

  function connect(): Promise<pg.Client> {
    if (client) return Promise.resolve(client);
    if (connecting) return connecting;
    connecting = (async () => {
      const fresh = new pg.Client({ connectionString: url, keepAlive: true, application_name: "gatehouse change feed" });
      fresh.on("notification", (message) => {
        const topic = message.channel.replace(/^gatehouse_/, "");
        dispatch(topic, { kind: "message", payload: message.payload ?? "" });
      });
      fresh.on("error", (error) => lost(fresh, error));
      fresh.on("end", () => lost(fresh));
      try {
        await fresh.connect();
        const wanted = [...topics.keys()];
        for (const topic of wanted) await fresh.query(`LISTEN "${channelOf(topic)}"`);
        listening = new Set(wanted);
      } catch (error) {
        fresh.removeAllListeners();
        fresh.on("error", () => {});
        await fresh.end().catch(() => {});
        throw error;
      }
      if (closed) {
        await fresh.end().catch(() => {});
        throw new Error("the change feed is closed");
      }
      client = fresh;
      retryMs = 100;
      return fresh;
    })().finally(() => {
      connecting = undefined;
    });
    return connecting;
  }

  function lost(which: pg.Client, error?: unknown): void {
    if (client !== which) return;
    client = undefined;
    listening = new Set();
    missed = true;
    if (closed) return;
    deps.logger?.warn({ err: error }, "change feed connection lost; reconnecting");
    scheduleReconnect();
  }

  function scheduleReconnect(): void {
    if (closed || retryTimer || topics.size === 0) return;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      connect().then(
        () => {
          // Whatever was notified while we were away is lost: subscribers re-read.
          for (const topic of topics.keys()) dispatch(topic, { kind: "gap" });
          missed = false;
        },
        (error: unknown) => {
          deps.logger?.warn({ err: error }, "change feed could not reconnect; retrying");
          retryMs = Math.min(retryMs * 2, 5_000);
          scheduleReconnect();
        },
      );
    }, retryMs);
    retryTimer.unref();
  }

  async function listen(topic: string): Promise<void> {
    const connection = await connect();
    if (listening.has(topic)) return;
    await connection.query(`LISTEN "${channelOf(topic)}"`);
    listening.add(topic);
  }

  return {
    async transaction(fn) {
      return deps.database.transaction(async (tx) => {
        const pending: { topic: string; payload: string }[] = [];
        const result = await fn(tx, (topic, payload) => {
          checkTopic(topic);
          if (Buffer.byteLength(payload) > maxPayloadBytes) throw new Error(`change feed payload over ${maxPayloadBytes} bytes`);
          pending.push({ topic, payload });
        });
        // NOTIFY inside the transaction: PostgreSQL sends it at commit, never on rollback.
        for (const { topic, payload } of pending) await tx.$executeRaw`SELECT pg_notify(${channelOf(topic)}, ${payload})`;
        return result;
      });
    },
    subscribe(topic, listener) {
      checkTopic(topic);
      if (closed) throw new Error("the change feed is closed");
      const listeners = topics.get(topic) ?? new Set();
      topics.set(topic, listeners);
      listeners.add(listener);
      const ready = listen(topic);
      // A failed first LISTEN is reported through `ready`; keep retrying in the background.
      ready.catch(() => scheduleReconnect());
      let open = true;
      return {
        ready,
        live: () => open && !closed && !missed && client !== undefined && listening.has(topic),
        close() {
          open = false;
          listeners.delete(listener);
        },
      };
    },
    async close() {
      closed = true;
      if (retryTimer) clearTimeout(retryTimer);
      topics.clear();
      const current = client ?? (connecting ? await connecting.catch(() => undefined) : undefined);
      client = undefined;
      if (current) {
        current.removeAllListeners("end");
        await current.end().catch(() => {});
      }
    },
  };
}
