import { Code, ConnectError } from "@connectrpc/connect";
import { applyOk, exportOk } from "../support/config-documents.js";
import { isBuilt, spawnServer } from "../support/config-process.js";
import { muteHangUpNoise, watchConfig, type Watcher } from "../support/config-watch.js";
import { dropChangeFeedConnections, testProvider } from "../support/database.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * Live propagation: WatchConfig sends the current revision, then every new
 * one; a subscriber that reconnects with since_revision gets what it missed;
 * every instance on the database sees every change.
 */
let server: TestServer;
let key: string;
let org: string;
const open: Watcher[] = [];

beforeAll(async () => {
  muteHangUpNoise();
  server = await startTestServer();
  key = server.credentials.api_key;
  org = server.credentials.organization_id;
});
afterEach(() => {
  for (const w of open.splice(0)) w.close();
});
afterAll(() => server.close());

function watch(on: { url: string }, request: { sinceRevision?: number } = {}, bearer = key): Watcher {
  const watcher = watchConfig(on.url, bearer, { organizationId: org, ...request });
  open.push(watcher);
  return watcher;
}

const doc = (i: number) => `version: 1\nroutes:\n  - name: route-${i}\n    path: /r/${i}\n    upstream: http://127.0.0.1:8081\n`;

describe("WatchConfig", () => {
  test("sends the current revision first, then each new revision with its document and changes", async () => {
    await applyOk(server, key, doc(0));
    const current = await exportOk(server, key);
    const watcher = watch(server);
    const first = await watcher.next();
    expect({ revision: first.revision, yaml: first.yaml }).toEqual(current);

    await applyOk(server, key, doc(1));
    const second = await watcher.next();
    expect(second.revision).toBe(current.revision + 1);
    expect(second.created).toEqual(["routes/route-1"]);
    expect(second.yaml).toBe((await exportOk(server, key)).yaml);

    await applyOk(server, key, doc(1), { strict: true });
    const third = await watcher.next();
    expect(third.revision).toBe(current.revision + 2);
    expect(third.deleted).toEqual(["routes/route-0"]);
  });

  test("a PUT that changes nothing sends nothing", async () => {
    const watcher = watch(server);
    const first = await watcher.next();
    await applyOk(server, key, first.yaml, { strict: true });
    await applyOk(server, key, doc(7));
    // The next message is the real change, not the no-op.
    expect((await watcher.next()).revision).toBe(first.revision + 1);
  });

  test("a subscriber that reconnects with since_revision first receives every revision it missed, in order", async () => {
    const watcher = watch(server);
    const seen = (await watcher.next()).revision;
    watcher.close();
    for (let i = 10; i < 13; i++) await applyOk(server, key, doc(i));

    const again = watch(server, { sinceRevision: seen });
    const missed = [await again.next(), await again.next(), await again.next()];
    expect(missed.map((m) => m.revision)).toEqual([seen + 1, seen + 2, seen + 3]);
    expect(missed.map((m) => m.created)).toEqual([["routes/route-10"], ["routes/route-11"], ["routes/route-12"]]);
    // ...and then keeps receiving live changes.
    await applyOk(server, key, doc(13));
    expect((await again.next()).revision).toBe(seen + 4);
  });

  test("since_revision equal to the current revision waits for the next one", async () => {
    const { revision } = await exportOk(server, key);
    const watcher = watch(server, { sinceRevision: revision });
    await applyOk(server, key, doc(20));
    expect((await watcher.next()).revision).toBe(revision + 1);
  });

  test("since_revision ahead of the current revision is invalid_argument", async () => {
    const { revision } = await exportOk(server, key);
    const error = await watch(server, { sinceRevision: revision + 5 }).ended();
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.InvalidArgument);
    expect((error as ConnectError).rawMessage).toMatch(/ahead of the current revision/);
  });

  test("credentials are checked like on every other RPC", async () => {
    const unknown = await watch(server, {}, `gk_${"A".repeat(43)}`).ended();
    expect((unknown as ConnectError).code).toBe(Code.Unauthenticated);
    const wrongKind = await watch(server, {}, server.credentials.secret_key).ended();
    expect((wrongKind as ConnectError).code).toBe(Code.PermissionDenied);
  });
});

describe("two instances on one database", () => {
  test("a PUT on instance A reaches a WatchConfig subscriber on instance B", async () => {
    const b = await startTestServer({ db: server.db });
    try {
      const watcher = watch(b);
      const first = await watcher.next();
      const plan = await applyOk(server, key, doc(30));
      const message = await watcher.next();
      expect(message.revision).toBe(plan.revision);
      expect(message.revision).toBe(first.revision + 1);
      expect(message.created).toEqual(["routes/route-30"]);
      // And the other way round.
      const onA = watch(server, { sinceRevision: plan.revision });
      const other = await applyOk(server, key, doc(31)).then(() => undefined);
      expect(other).toBeUndefined();
      expect((await onA.next()).revision).toBe(plan.revision + 1);
      expect((await watcher.next()).revision).toBe(plan.revision + 1);
      watcher.close();
    } finally {
      for (const w of open.splice(0)) w.close();
      await b.close();
    }
  });

  const separateProcess = testProvider === "postgresql" && isBuilt() ? test : test.skip;
  separateProcess("PostgreSQL: a PUT on this instance reaches a subscriber of an instance in another process", async () => {
    // The same database; the master key file of the first instance.
    const b = await spawnServer({ DATABASE_URL: server.db.url, GATEHOUSE_DATA_DIR: server.db.dataDir });
    try {
      const watcher = watch(b);
      const first = await watcher.next();
      for (let i = 40; i < 45; i++) {
        const plan = await applyOk(server, key, doc(i));
        const message = await watcher.next();
        expect(message.revision).toBe(plan.revision);
        expect(message.created).toEqual([`routes/route-${i}`]);
      }
      expect(first.revision).toBeGreaterThan(0);
    } finally {
      for (const w of open.splice(0)) w.close();
      await b.stop();
    }
  });
});

const postgresOnly = testProvider === "postgresql" ? test : test.skip;
postgresOnly("PostgreSQL: a subscriber keeps receiving changes after the LISTEN connection is lost", async () => {
  const watcher = watch(server);
  const first = await watcher.next();
  expect(await dropChangeFeedConnections(server.db.url)).toBeGreaterThan(0);
  // Applied while the feed may still be reconnecting: the subscriber re-reads after the gap.
  await applyOk(server, key, doc(50));
  expect((await watcher.next()).revision).toBe(first.revision + 1);
  await applyOk(server, key, doc(51));
  expect((await watcher.next()).revision).toBe(first.revision + 2);
});
