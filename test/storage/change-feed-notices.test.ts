import { execFile } from "node:child_process";
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { defineTopic } from "../../src/domain/changes/topic.js";
import { type ChangeFeed, createChangeFeed, noticeFileOf } from "../../src/storage/change-feed.js";
import { type Database, openDatabase } from "../../src/storage/database.js";
import { isBuilt } from "../support/config-process.js";

/**
 * SQLite's change feed across processes: what one process commits reaches
 * the subscribers of another through the notice file beside the database,
 * as NOTIFY does on PostgreSQL (an operator command run while the server
 * runs). Runs on SQLite whatever the suite's database: the feed is SQLite's.
 */
let dir: string;
let file: string;
let database: Database;
const feeds: ChangeFeed[] = [];

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), "gatehouse-notices-"));
  file = join(dir, "gatehouse.db");
  database = await openDatabase({ provider: "sqlite", file });
});
afterEach(async () => {
  for (const feed of feeds.splice(0)) await feed.close();
  await database.close();
  rmSync(dir, { recursive: true, force: true });
});

function feed(logger?: { warn(object: object, message: string): void }): ChangeFeed {
  const created = createChangeFeed({ database, config: { provider: "sqlite", file }, ...(logger ? { logger } : {}) });
  feeds.push(created);
  return created;
}

/** The events a topic receives, and a way to wait for one. */
function record(on: ChangeFeed, topic: string) {
  const events: ChangeEvent[] = [];
  const waiters: (() => void)[] = [];
  const subscription = on.subscribe(text(topic), (event) => {
    events.push(event.kind === "gap" ? event : { kind: "message", payload: event.value });
    for (const wake of waiters.splice(0)) wake();
  });
  return {
    events,
    subscription,
    async until(test: (events: ChangeEvent[]) => boolean, timeoutMs = 5_000): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      while (!test(events)) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`no such events in ${timeoutMs} ms: ${JSON.stringify(events)}`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(left, 100));
          waiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
    },
  };
}

/** A topic whose payloads are plain text (the feed's own behaviour, whatever a topic encodes). */
const text = (name: string) => defineTopic<string>(name, { encode: (value) => value, decode: (payload) => payload });

/** What a subscriber heard, payloads as text. */
type ChangeEvent = { kind: "message"; payload: string } | { kind: "gap" };

const message = (payload: string): ChangeEvent => ({ kind: "message", payload });
const settle = () => new Promise((resolve) => setTimeout(resolve, 1_300));

const describeBuilt = isBuilt() ? describe : describe.skip;

/** Runs `body` in a node process of its own, with `feed`, a change feed on this test's SQLite file (the built code). */
async function inAnotherProcess(body: string): Promise<void> {
  const script = `
    const { openDatabase } = await import(${JSON.stringify(join(process.cwd(), "dist/src/storage/database.js"))});
    const { createChangeFeed } = await import(${JSON.stringify(join(process.cwd(), "dist/src/storage/change-feed.js"))});
    const config = { provider: "sqlite", file: process.env.FILE };
    const database = await openDatabase(config);
    const feed = createChangeFeed({ database, config });
    const text = (name) => ({ name, encode: (value) => value, decode: (payload) => payload });
    ${body}
    await feed.close();
    await database.close();
  `;
  await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], { env: { ...process.env, FILE: file } });
}

describeBuilt("a commit in another process", () => {
  test("reaches this process's subscribers of its topic, in order, and no other topic's", async () => {
    const here = feed();
    const config = record(here, "config");
    const secrets = record(here, "secrets");
    const started = performance.now();
    await inAnotherProcess(
      `await feed.transaction(async (_tx, notify) => { notify(text("config"), "org-1 7"); notify(text("config"), "org-1 8"); });`,
    );
    await config.until((events) => events.length >= 2);
    const seen = performance.now();
    expect(config.events).toEqual([message("org-1 7"), message("org-1 8")]);
    expect(secrets.events).toEqual([]);
    console.log(`notice file: another process's commit reached this process ${Math.round(seen - started)} ms after it was started`);
  }, 30_000);

  test("that rolls back announces nothing", async () => {
    const here = feed();
    const config = record(here, "config");
    await inAnotherProcess(`
      await feed.transaction(async (_tx, notify) => { notify(text("config"), "org-1 9"); throw new Error("rolled back"); }).catch(() => {});
      await feed.transaction(async (_tx, notify) => notify(text("config"), "org-1 10"));
    `);
    await config.until((events) => events.length >= 1);
    await settle();
    expect(config.events).toEqual([message("org-1 10")]);
  }, 30_000);
});

describe("the notice file", () => {
  test("this process's own commits reach its subscribers once, not again from the file", async () => {
    const here = feed();
    const config = record(here, "config");
    await here.transaction(async (_tx, notify) => notify(text("config"), "org-1 1"));
    expect(config.events).toEqual([message("org-1 1")]);
    expect(readFileSync(noticeFileOf(file), "utf8")).toContain('"p":"org-1 1"');
    await settle();
    expect(config.events).toEqual([message("org-1 1")]);
  });

  test("a line written by another process is delivered, a line cut short waits for its end", async () => {
    const config = record(feed(), "config");
    const line = `${JSON.stringify({ o: "another-process", t: "config", p: "org-2 3" })}\n`;
    appendFileSync(noticeFileOf(file), line.slice(0, 20));
    await settle();
    expect(config.events).toEqual([]);
    appendFileSync(noticeFileOf(file), line.slice(20));
    await config.until((events) => events.length >= 1);
    expect(config.events).toEqual([message("org-2 3")]);
  });

  test("emptied by a writer (it keeps to 1 MiB), or holding a line that cannot be read, is a gap for every topic", async () => {
    const here = feed();
    const config = record(here, "config");
    const gateway = record(here, "gateway");
    appendFileSync(noticeFileOf(file), `${JSON.stringify({ o: "another-process", t: "config", p: "org-2 4" })}\n`);
    await config.until((events) => events.length >= 1);
    truncateSync(noticeFileOf(file), 0);
    await config.until((events) => events.some((e) => e.kind === "gap"));
    await gateway.until((events) => events.some((e) => e.kind === "gap"));
    appendFileSync(noticeFileOf(file), "not json\n");
    await gateway.until((events) => events.filter((e) => e.kind === "gap").length >= 2);
  });

  test("is emptied by the writer that takes it past 1 MiB", async () => {
    const here = feed();
    writeFileSync(noticeFileOf(file), `${"x".repeat(1 << 20)}\n`);
    await here.transaction(async (_tx, notify) => notify(text("config"), "org-1 2"));
    expect(readFileSync(noticeFileOf(file), "utf8")).toBe("");
  });

  test("that cannot be written does not fail the committed write; it is logged", async () => {
    const warnings: string[] = [];
    const here = feed({ warn: (_object, text) => warnings.push(text) });
    const config = record(here, "config");
    // A directory where the file should be: every append fails.
    rmSync(noticeFileOf(file), { force: true });
    mkdirSync(noticeFileOf(file));
    await expect(here.transaction(async (_tx, notify) => notify(text("config"), "org-1 5"))).resolves.toBeUndefined();
    expect(config.events).toEqual([message("org-1 5")]);
    expect(warnings).toContain("the change feed could not write its notice file: other processes learn of the change late");
  });

  test("that cannot be opened does not fail a subscription: the process's own notifications still arrive", async () => {
    const warnings: string[] = [];
    const here = feed({ warn: (_object, text) => warnings.push(text) });
    mkdirSync(noticeFileOf(file));
    const config = record(here, "config");
    expect(warnings).toContain("the change feed cannot open its notice file: changes made by other processes arrive late");
    await here.transaction(async (_tx, notify) => notify(text("config"), "org-1 6"));
    expect(config.events).toContainEqual(message("org-1 6"));
  });

  test("is not followed once every feed of the process has closed", async () => {
    const here = feed();
    const events: ChangeEvent[] = [];
    here.subscribe(text("config"), (event) => events.push(event.kind === "gap" ? event : { kind: "message", payload: event.value }));
    await here.close();
    appendFileSync(noticeFileOf(file), `${JSON.stringify({ o: "another-process", t: "config", p: "org-2 6" })}\n`);
    await settle();
    expect(events).toEqual([]);
  });
});
