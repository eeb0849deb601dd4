import { applyOk, getConfig } from "../support/config-documents.js";
import { muteHangUpNoise, watchConfig, type Watcher } from "../support/config-watch.js";
import { dropChangeFeedConnections, testProvider } from "../support/database.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * GET answers from memory while the change feed vouches for what it holds:
 * every committed revision is announced to every instance sharing the
 * database, which then drops its older export. An export is never older than
 * what the instance has been told, and the instance that applied a change
 * serves it from its very next GET.
 */
let a: TestServer;
let b: TestServer;
let key: string;
let org: string;
const open: Watcher[] = [];

beforeAll(async () => {
  muteHangUpNoise();
  a = await startTestServer();
  b = await startTestServer({ db: a.db });
  key = a.credentials.api_key;
  org = a.credentials.organization_id;
});
afterEach(() => {
  for (const w of open.splice(0)) w.close();
});
afterAll(async () => {
  await b.close();
  await a.close();
});

const doc = (i: number) => `version: 1\nroutes:\n  - name: cached-${i}\n    path: /c/${i}\n    upstream: http://127.0.0.1:8081\n`;

/** GET of the organisation's configuration on an instance: the revision (from the ETag) and the YAML. */
async function exportOk(on: TestServer, bearer: string): Promise<{ revision: number; yaml: string }> {
  const response = await getConfig(on, bearer, org);
  const yaml = await response.text();
  if (response.status !== 200) throw new Error(`GET answered ${response.status}: ${yaml}`);
  return { revision: Number(/^"(\d+)"$/.exec(response.headers.get("etag") ?? "")?.[1] ?? Number.NaN), yaml };
}

function watch(on: TestServer): Watcher {
  const watcher = watchConfig(on.url, key, { organizationId: org });
  open.push(watcher);
  return watcher;
}

test("the instance that applied a change serves it from its next GET", async () => {
  for (let i = 0; i < 5; i++) {
    await exportOk(a, key);
    const plan = await applyOk(a, key, doc(i), { strict: true });
    const exported = await exportOk(a, key);
    expect(exported.revision).toBe(plan.revision);
    expect(exported.yaml).toContain(`cached-${i}`);
  }
});

test("another instance serves a new revision once its announcement has arrived", async () => {
  const before = await exportOk(b, key);
  expect(await exportOk(b, key)).toEqual(before);
  const watcher = watch(b);
  expect((await watcher.next()).revision).toBe(before.revision);

  const plan = await applyOk(a, key, doc(100));
  // The watcher and the export cache of B hear the same announcement; the cache first.
  expect((await watcher.next()).revision).toBe(plan.revision);
  const after = await exportOk(b, key);
  expect(after.revision).toBe(plan.revision);
  expect(after.yaml).toBe((await exportOk(a, key)).yaml);
});

const postgresOnly = testProvider === "postgresql" ? test : test.skip;
postgresOnly(
  "PostgreSQL: after the change feed's connection is lost, no instance serves an export older than the revision its watcher has seen",
  async () => {
    const before = await exportOk(b, key);
    const watcher = watch(b);
    expect((await watcher.next()).revision).toBe(before.revision);
    expect(await dropChangeFeedConnections(a.db.url)).toBeGreaterThan(0);
    // Applied while B's feed may be down: B must not keep serving what it cached before.
    const plan = await applyOk(a, key, doc(200));
    expect((await watcher.next()).revision).toBe(plan.revision);
    expect((await exportOk(b, key)).revision).toBe(plan.revision);
    // And caching resumes: the next change reaches B the usual way.
    const next = await applyOk(a, key, doc(201));
    expect((await watcher.next()).revision).toBe(next.revision);
    expect((await exportOk(b, key)).revision).toBe(next.revision);
  },
);
