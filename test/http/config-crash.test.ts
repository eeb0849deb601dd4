import { resourceKinds } from "../../src/domain/config/config-document.js";
import { readConfigDocument } from "../../src/domain/config/read-config-document.js";
import { renderConfigDocument } from "../../src/domain/config/render-config-document.js";
import { largeDocument } from "../support/config-documents.js";
import { isBuilt, spawnServer, type ServerProcess } from "../support/config-process.js";
import { createTestDatabase, openTestDatabase, untilOtherSessionsEnd, type TestDatabase } from "../support/database.js";

/**
 * A process killed (kill -9) in the middle of a 10,000-route import leaves the
 * previous state intact: after a restart the configuration is entirely the
 * old one or entirely the new one, with a history that agrees, and with a
 * config.applied event for each revision and none for an import that did not
 * commit (docs/events.md, "Guarantees": the event is written in the change's transaction).
 */
const rounds = 3;
let db: TestDatabase;
let server: ServerProcess | undefined;

beforeAll(async () => {
  if (!isBuilt()) throw new Error("this test runs the built server: run `npx tsc -p tsconfig.build.json` first (npm test does)");
  db = await createTestDatabase();
});
afterAll(async () => {
  await server?.stop();
  await db?.drop();
});

const env = () => ({ DATABASE_URL: db.url, GATEHOUSE_DATA_DIR: db.dataDir });

/** The revisions of the config.applied events recorded in the outbox, in order. */
async function appliedEvents(): Promise<number[]> {
  const database = await openTestDatabase(db);
  try {
    const rows = await database.client.event.findMany({ where: { type: "config.applied" }, orderBy: { createdAt: "asc" } });
    return rows.map((row) => (JSON.parse(row.payload) as { data: { revision: number } }).data.revision).sort((a, b) => a - b);
  } finally {
    await database.close();
  }
}

/** What export writes once the document is the whole configuration. */
function exportOf(document: string): string {
  const read = readConfigDocument(document).document;
  return renderConfigDocument(resourceKinds.flatMap((kind) => read[kind]));
}

async function exportFrom(url: string, organizationId: string, apiKey: string) {
  const response = await fetch(`${url}/organization/${organizationId}/config`, { headers: { authorization: `Bearer ${apiKey}` } });
  expect(response.status).toBe(200);
  return { revision: Number(/\d+/.exec(response.headers.get("etag") ?? "")?.[0]), yaml: await response.text() };
}

async function latestRecorded(url: string, organizationId: string, apiKey: string): Promise<number> {
  const response = await fetch(`${url}/svc.v1.ConfigService/ListConfigRevisions`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ organizationId, pageSize: 1 }),
  });
  const body = (await response.json()) as { revisions?: { revision: number }[] };
  return body.revisions?.[0]?.revision ?? 0;
}

test("kill -9 during a 10,000-route import: after restart the state is entirely the old or entirely the new one", async () => {
  server = await spawnServer(env());
  const credentials = server.credentials;
  if (!credentials) throw new Error("the first start did not print the credentials");
  const { organizationId, apiKey } = credentials;
  const put = (url: string, body: string) =>
    fetch(`${url}/organization/${organizationId}/config?strict=true`, {
      method: "PUT",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/yaml" },
      body,
    });

  // Complete imports first: the old state, and how long replacing 10,000 routes takes here
  // (the quicker of two, so that one slow moment of a busy machine does not push every kill past the commit).
  expect((await put(server.url, largeDocument({ routes: 10_000, variant: 0 }))).status).toBe(200);
  const timings: number[] = [];
  for (const variant of [100, 101]) {
    const started = Date.now();
    expect((await put(server.url, largeDocument({ routes: 10_000, variant }))).status).toBe(200);
    timings.push(Date.now() - started);
  }
  const importMs = Math.min(...timings);
  let previous = await exportFrom(server.url, organizationId, apiKey);
  expect(previous.revision).toBe(3);

  const outcomes: string[] = [];
  for (let round = 1; round <= rounds; round++) {
    const document = largeDocument({ routes: 10_000, variant: round });
    const expectedNew = exportOf(document);
    // Kill at a different point of the import each round: while parsing, while writing, about when it commits.
    const killAfterMs = Math.round((importMs * 1.05 * round) / rounds);
    const pending = put(server.url, document).then(
      (r) => `answered ${r.status}`,
      () => "no answer",
    );
    await new Promise((resolve) => setTimeout(resolve, killAfterMs));
    await server.kill();
    const answer = await pending;
    // On PostgreSQL the killed server's session may still be finishing its statement, or committing a
    // COMMIT it sent just before the kill: the state is read only once that session has ended, else a
    // commit landing after the read would make "old state" a stale answer.
    const orphanMs = db.provider === "postgresql" ? await untilOtherSessionsEnd(db.url) : 0;

    server = await spawnServer(env());
    const now = await exportFrom(server.url, organizationId, apiKey);
    if (now.revision === previous.revision) {
      expect(now.yaml).toBe(previous.yaml);
      outcomes.push(`round ${round} (kill after ${killAfterMs} ms, ${answer}, sessions ended ${orphanMs} ms later): old state`);
    } else {
      expect(now.revision).toBe(previous.revision + 1);
      expect(now.yaml).toBe(expectedNew);
      outcomes.push(`round ${round} (kill after ${killAfterMs} ms, ${answer}, sessions ended ${orphanMs} ms later): new state`);
    }
    // An import that answered 200 is durable.
    if (answer === "answered 200") expect(now.yaml).toBe(expectedNew);
    expect(await latestRecorded(server.url, organizationId, apiKey)).toBe(now.revision);
    // One event per committed revision, none for the import the kill cut short.
    expect(await appliedEvents()).toEqual(Array.from({ length: now.revision }, (_, i) => i + 1));
    previous = now;
  }
  process.stdout.write(`config crash test (import took ${importMs} ms):\n  ${outcomes.join("\n  ")}\n`);
}, 600_000);
