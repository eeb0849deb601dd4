import { randomUUID } from "node:crypto";
import { closeSync, openSync, statSync, watch, type FSWatcher } from "node:fs";
import { open, stat } from "node:fs/promises";
import pg from "pg";
import type { DatabaseConfig } from "../config.js";
import {
  isTopicName,
  type ChangeAnnouncer,
  type ChangeEvent,
  type ChangeSubscriptions,
  type Publish,
  type Topic,
} from "../domain/changes/topic.js";
import type { Database, Tx } from "./database.js";

/**
 * Change notification across every instance that shares a database.
 *
 * Writers queue notifications inside a transaction; they are delivered if and
 * only if it commits. On PostgreSQL they travel as NOTIFY (sent by the server
 * at commit, in commit order) and every instance LISTENs on one dedicated
 * connection. On SQLite they are delivered in-process after the commit, to
 * every instance that opened the same file, and appended to a notice file
 * beside the database (`<file>-notices`), which a process with subscribers
 * follows: an operator command run in another process (a headless
 * `gatehouse sessions revoke`, say) reaches the server's subscribers as it
 * would on PostgreSQL. Payloads are small (identifiers, a revision):
 * subscribers read what changed from the database.
 *
 * Delivery is prompt but not a log: a subscriber that must not miss a change
 * reads from its last known position when it subscribes and whenever it is
 * told about a gap (the listening connection was lost and re-established).
 */
/** A notification as the feed carries it: a topic's payload, or a gap. */
type RawEvent = { kind: "message"; payload: string } | { kind: "gap" };

export type { ChangeEvent, ChangeSubscription, Publish, Topic } from "../domain/changes/topic.js";

export interface ChangeFeed extends ChangeSubscriptions, ChangeAnnouncer {
  /** Runs fn in one transaction; what it publishes reaches subscribers once, and only if, it commits. */
  transaction<T>(fn: (tx: Tx, publish: Publish) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export interface ChangeFeedDeps {
  database: Pick<Database, "transaction">;
  config: DatabaseConfig;
  logger?: { warn(object: object, message: string): void };
}

/** PostgreSQL refuses NOTIFY payloads of 8000 bytes or more. */
const maxPayloadBytes = 7_999;

function checkTopic(topic: string): void {
  if (!isTopicName(topic)) throw new Error(`change feed topic "${topic}" is not a topic name`);
}

/** A raw listener that decodes the topic's payloads; one that does not decode is heard as a gap. */
function decoding<T>(topic: Topic<T>, listener: (event: ChangeEvent<T>) => void): Listener {
  return (event) => {
    if (event.kind === "gap") return listener(event);
    const value = topic.decode(event.payload);
    listener(value === undefined ? { kind: "gap" } : { kind: "message", value });
  };
}

/** The publish function of one transaction: queues each notification as its topic encodes it. */
function publisher(queue: (topic: string, payload: string, local: boolean) => void): Publish {
  return (topic, value) => queue(topic.name, topic.encode(value), topic.localWhenFollowed === true);
}

export function createChangeFeed(deps: ChangeFeedDeps): ChangeFeed {
  return deps.config.provider === "postgresql" ? createPostgresFeed(deps, deps.config.url) : createLocalFeed(deps, deps.config.file);
}

type Listener = (event: RawEvent) => void;

interface LocalHub {
  feeds: number;
  topics: Map<string, Set<Listener>>;
  /** Following the notice file: from the first subscription until the last feed closes. */
  tail: NoticeTail | undefined;
}

/** Listeners per topic, shared by every feed of one SQLite file in this process. */
const localHubs = new Map<string, LocalHub>();

/** Marks the notices this process wrote, which it has delivered in-process already. */
const noticeOrigin = randomUUID();
/** Past this size the notice file is emptied by the next writer; a follower that sees it shrink reports a gap. */
const maxNoticeFileBytes = 1 << 20;
/** How often a follower looks at the notice file when no watch event came (a missed event, a file system without them). */
const noticePollMs = 1_000;

export function noticeFileOf(file: string): string {
  return `${file}-notices`;
}

/** Appends committed notifications to the notice file, one JSON line each (one append: other writers' lines never interleave). */
async function appendNotices(file: string, notices: readonly { topic: string; payload: string }[]): Promise<void> {
  const text = notices.map(({ topic, payload }) => `${JSON.stringify({ o: noticeOrigin, t: topic, p: payload })}\n`).join("");
  const handle = await open(noticeFileOf(file), "a", 0o600);
  try {
    await handle.appendFile(text);
    if ((await handle.stat()).size > maxNoticeFileBytes) await handle.truncate(0);
  } finally {
    await handle.close();
  }
}

interface NoticeTail {
  stop(): void;
}

/**
 * Follows the notice file from its current end: each complete line another
 * process wrote is delivered to onNotice; a file that shrank (emptied by a
 * writer) or a line that cannot be read is a gap, since notices may have
 * been lost.
 */
function tailNotices(
  file: string,
  onNotice: (topic: string, payload: string) => void,
  onGap: () => void,
  logger: ChangeFeedDeps["logger"],
): NoticeTail {
  const path = noticeFileOf(file);
  let offset = 0;
  try {
    closeSync(openSync(path, "a", 0o600));
    offset = statSync(path).size;
  } catch (error) {
    // Not fatal: this process's own notifications still arrive; the poll below retries the file.
    logger?.warn({ err: error }, "the change feed cannot open its notice file: changes made by other processes arrive late");
  }
  let partial: Buffer = Buffer.alloc(0);
  let reading = false;
  let again = false;
  let stopped = false;

  const read = async (): Promise<void> => {
    if (reading) {
      again = true;
      return;
    }
    reading = true;
    try {
      do {
        again = false;
        const size = await stat(path).then(
          (s) => s.size,
          () => 0,
        );
        if (size < offset) {
          offset = 0;
          partial = Buffer.alloc(0);
          onGap();
        }
        if (size === offset) continue;
        const chunk = Buffer.alloc(size - offset);
        const handle = await open(path, "r");
        let bytes: number;
        try {
          ({ bytesRead: bytes } = await handle.read(chunk, 0, chunk.length, offset));
        } finally {
          await handle.close();
        }
        offset += bytes;
        const text = Buffer.concat([partial, chunk.subarray(0, bytes)]);
        const end = text.lastIndexOf(0x0a);
        partial = end === -1 ? text : text.subarray(end + 1);
        if (end === -1) continue;
        let unreadable = false;
        for (const line of text.subarray(0, end).toString("utf8").split("\n")) {
          const notice = parseNotice(line);
          if (notice === undefined) unreadable = true;
          else if (notice.o !== noticeOrigin && isTopicName(notice.t)) onNotice(notice.t, notice.p);
        }
        if (unreadable) onGap();
      } while (again && !stopped);
    } catch (error) {
      logger?.warn({ err: error }, "the change feed could not read its notice file");
      onGap();
    } finally {
      reading = false;
    }
  };

  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(path, { persistent: false }, () => void read());
    watcher.on("error", () => {
      watcher?.close();
      watcher = undefined;
    });
  } catch {
    // No watch events here: the poll below is the only way.
  }
  const poll = setInterval(() => void read(), noticePollMs);
  poll.unref();
  return {
    stop() {
      stopped = true;
      watcher?.close();
      clearInterval(poll);
    },
  };
}

function parseNotice(line: string): { o: string; t: string; p: string } | undefined {
  try {
    const value = JSON.parse(line) as unknown;
    if (typeof value !== "object" || value === null) return undefined;
    const { o, t, p } = value as Record<string, unknown>;
    return typeof o === "string" && typeof t === "string" && typeof p === "string" ? { o, t, p } : undefined;
  } catch {
    return undefined;
  }
}

function createLocalFeed(deps: ChangeFeedDeps, file: string): ChangeFeed {
  let hub = localHubs.get(file);
  if (!hub) {
    hub = { feeds: 0, topics: new Map(), tail: undefined };
    localHubs.set(file, hub);
  }
  hub.feeds++;
  const shared = hub;
  const dispatch = (topic: string, event: RawEvent) => {
    for (const listener of [...(shared.topics.get(topic) ?? [])]) deliver(listener, event, deps);
  };
  const mine = new Set<{ topic: string; listener: Listener }>();
  let closed = false;
  return {
    async transaction(fn) {
      const pending: { topic: string; payload: string; local: boolean }[] = [];
      const result = await deps.database.transaction((tx) =>
        fn(
          tx,
          publisher((topic, payload, local) => {
            checkTopic(topic);
            pending.push({ topic, payload, local });
          }),
        ),
      );
      if (pending.length === 0) return result;
      for (const { topic, payload } of pending) dispatch(topic, { kind: "message", payload });
      // For the other processes on this file, but for what this process follows itself and needs to tell no other
      // (Topic.localWhenFollowed). The change is committed: a notice that cannot be written is only late
      // (subscribers re-read everything now and then), never a reason to fail the write.
      const notices = pending.filter(({ topic, local }) => !local || (shared.topics.get(topic)?.size ?? 0) === 0);
      if (notices.length === 0) return result;
      await appendNotices(file, notices).catch((error: unknown) =>
        deps.logger?.warn({ err: error }, "the change feed could not write its notice file: other processes learn of the change late"),
      );
      return result;
    },
    announce(topic, value) {
      return this.transaction(async (_tx, publish) => publish(topic, value));
    },
    subscribe(typed, typedListener) {
      const topic = typed.name;
      const listener = decoding(typed, typedListener);
      checkTopic(topic);
      shared.tail ??= tailNotices(
        file,
        (noticeTopic, payload) => dispatch(noticeTopic, { kind: "message", payload }),
        () => {
          for (const noticeTopic of shared.topics.keys()) dispatch(noticeTopic, { kind: "gap" });
        },
        deps.logger,
      );
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
      if (shared.feeds === 0) {
        shared.tail?.stop();
        localHubs.delete(file);
      }
    },
  };
}

function deliver(listener: Listener, event: RawEvent, deps: ChangeFeedDeps): void {
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

  function dispatch(topic: string, event: RawEvent): void {
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
        const result = await fn(
          tx,
          publisher((topic, payload, _local) => {
            checkTopic(topic);
            if (Buffer.byteLength(payload) > maxPayloadBytes) throw new Error(`change feed payload over ${maxPayloadBytes} bytes`);
            pending.push({ topic, payload });
          }),
        );
        // NOTIFY inside the transaction: PostgreSQL sends it at commit, never on rollback.
        for (const { topic, payload } of pending) await tx.$executeRaw`SELECT pg_notify(${channelOf(topic)}, ${payload})`;
        return result;
      });
    },
    announce(topic, value) {
      return this.transaction(async (_tx, publish) => publish(topic, value));
    },
    subscribe(typed, typedListener) {
      const topic = typed.name;
      const listener = decoding(typed, typedListener);
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
