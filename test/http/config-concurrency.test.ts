import { resourceKinds } from "../../src/domain/config/config-document.js";
import { readConfigDocument } from "../../src/domain/config/read-config-document.js";
import { renderConfigDocument } from "../../src/domain/config/render-config-document.js";
import { applyOk, exportOk, largeDocument, putConfig, type PlanJson } from "../support/config-documents.js";
import { connectCall } from "../support/credentials.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * Imports are serial: under any number of concurrent PUTs the result is
 * exactly one serial order of them.
 */
let server: TestServer;
let key: string;

beforeAll(async () => {
  server = await startTestServer();
  key = server.credentials.api_key;
});
afterAll(() => server.close());

interface RevisionJson {
  revision: number;
  source: string;
}

async function history(): Promise<RevisionJson[]> {
  const response = await connectCall(
    server,
    "/svc.v1.ConfigService/ListConfigRevisions",
    { organizationId: server.credentials.organization_id, pageSize: 100 },
    key,
  );
  expect(response.status).toBe(200);
  return ((await response.json()) as { revisions?: RevisionJson[] }).revisions ?? [];
}

async function revisionDocument(revision: number): Promise<string> {
  const response = await connectCall(
    server,
    "/svc.v1.ConfigService/GetConfigRevision",
    { organizationId: server.credentials.organization_id, revision },
    key,
  );
  expect(response.status).toBe(200);
  return ((await response.json()) as { yaml: string }).yaml;
}

test("20 concurrent strict PUTs of distinct documents end equal to exactly one of them, one revision each", async () => {
  await applyOk(server, key, largeDocument({ routes: 10, variant: 999 }), { strict: true });
  const start = await exportOk(server, key);
  const documents = Array.from({ length: 20 }, (_, i) => largeDocument({ routes: 40 + (i % 3), variant: i }));
  const responses = await Promise.all(documents.map((doc) => putConfig(server, key, doc, { strict: true })));
  const plans = await Promise.all(
    responses.map(async (r) => {
      expect(r.status).toBe(200);
      return (await r.json()) as PlanJson;
    }),
  );

  // Each PUT was applied on its own revision: a serial order of the 20.
  const revisions = plans.map((p) => p.revision).sort((a, b) => a - b);
  expect(revisions).toEqual(Array.from({ length: 20 }, (_, i) => start.revision + 1 + i));

  // The final state is exactly the document of the PUT that came last.
  const final = await exportOk(server, key);
  expect(final.revision).toBe(start.revision + 20);
  const last = documents[plans.findIndex((p) => p.revision === final.revision)] as string;
  expect(final.yaml).toBe(exportOf(last));
  expect(await applyOk(server, key, last, { strict: true, dryRun: true })).toMatchObject({ created: [], updated: [], deleted: [] });

  // The history holds 20 new revisions, each with the document of the PUT that made it.
  const recorded = (await history()).filter((r) => r.revision > start.revision);
  expect(recorded.map((r) => r.revision)).toEqual(revisions.slice().reverse());
  expect(recorded.every((r) => r.source === "import-strict")).toBe(true);
  for (const [i, plan] of plans.entries()) {
    if (i % 4 === 0) expect(await revisionDocument(plan.revision)).toBe(exportOf(documents[i] as string));
  }
});

test("of 20 concurrent PUTs with the same If-Match, exactly one applies and the others get 412", async () => {
  const { revision } = await exportOk(server, key);
  const documents = Array.from({ length: 20 }, (_, i) => largeDocument({ routes: 5, variant: 100 + i }));
  const responses = await Promise.all(documents.map((doc) => putConfig(server, key, doc, { strict: true, ifMatch: `"${revision}"` })));
  const statuses = responses.map((r) => r.status).sort();
  expect(statuses.filter((s) => s === 200)).toHaveLength(1);
  expect(statuses.filter((s) => s === 412)).toHaveLength(19);
  expect((await exportOk(server, key)).revision).toBe(revision + 1);
});

/** What export writes for a state equal to the document. */
function exportOf(document: string): string {
  const { document: read } = readConfigDocument(document);
  return renderConfigDocument(resourceKinds.flatMap((kind) => read[kind]));
}
