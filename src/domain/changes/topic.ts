/**
 * A change-feed topic: its name on the wire (a PostgreSQL NOTIFY channel, a
 * line of the SQLite notice file) and the one encoder and decoder of its
 * payload. Every topic is declared once, in topics.ts; publishers and
 * subscribers exchange typed values, never strings.
 */
export interface Topic<T> {
  readonly name: string;
  /**
   * SQLite: a process that follows this topic itself hears its own commits in
   * process and writes them to the notice file for no other process (each
   * process that follows the topic finds its work itself: the delivery workers).
   * A process that does not follow it (an operator command) still writes them.
   */
  readonly localWhenFollowed?: boolean;
  encode(value: T): string;
  /** The value of a payload; undefined when it is not one (the subscriber then treats it as a gap and re-reads). */
  decode(payload: string): T | undefined;
}

/** What a subscriber hears: a value, or a gap (notifications may have been lost: re-read what you keep). */
export type ChangeEvent<T> = { kind: "message"; value: T } | { kind: "gap" };

export interface ChangeSubscription {
  /** Resolves once notifications are being received (on PostgreSQL: LISTEN done). */
  ready: Promise<void>;
  /**
   * True while every notification of the topic reaches this subscriber (on
   * PostgreSQL, LISTEN is done and the connection has not been lost since).
   * Caches that trust notifications consult it.
   */
  live(): boolean;
  close(): void;
}

/** Queues a notification inside a transaction: it reaches subscribers once, and only if, the transaction commits. */
export type Publish = <T>(topic: Topic<T>, value: T) => void;

/** The change feed as the domain sees it (a port; src/storage/change-feed.ts implements it). */
export interface ChangeSubscriptions {
  subscribe<T>(topic: Topic<T>, listener: (event: ChangeEvent<T>) => void): ChangeSubscription;
}

/** Announces a change that has committed already (or that writes nothing), to every instance. */
export interface ChangeAnnouncer {
  announce<T>(topic: Topic<T>, value: T): Promise<void>;
}

const topicPattern = /^[a-z][a-z0-9_]{0,39}$/;

/** Declares a topic (names: lower case, digits and _, at most 40 characters). */
export function defineTopic<T>(name: string, codec: Pick<Topic<T>, "encode" | "decode" | "localWhenFollowed">): Topic<T> {
  if (!topicPattern.test(name)) throw new Error(`change feed topic "${name}" must match ${topicPattern}`);
  return { name, encode: codec.encode, decode: codec.decode, ...(codec.localWhenFollowed ? { localWhenFollowed: true } : {}) };
}

/** Whether a name is a valid topic name. */
export function isTopicName(name: string): boolean {
  return topicPattern.test(name);
}
