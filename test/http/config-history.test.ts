import { applyOk, exportOk, reasonOf, type ErrorJson } from "../support/config-documents.js";
import { connectCall, createApiKey } from "../support/credentials.js";
import { createManualClock, startTestServer, type TestServer } from "../support/server.js";

/**
 * History: every applied revision is kept with its whole document, the acting
 * account, the time and the change summary; an earlier revision can be
 * fetched and rolled back to, and a rollback is itself a new revision.
 */
const clock = createManualClock(new Date("2026-11-22T10:00:00Z"));
let server: TestServer;
let admin: string;
let member: { apiKey: string; prefix: string };
let org: string;

interface RevisionJson {
  revision: number;
  actor: string;
  createdAt: string;
  source: string;
  created?: string[];
  updated?: string[];
  deleted?: string[];
}

const rpc = (method: string, body: Record<string, unknown>, bearer = admin) =>
  connectCall(server, `/svc.v1.ConfigService/${method}`, { organizationId: org, ...body }, bearer);

async function rpcOk<T>(method: string, body: Record<string, unknown>, bearer = admin): Promise<T> {
  const response = await rpc(method, body, bearer);
  const text = await response.text();
  expect({ status: response.status, text }).toMatchObject({ status: 200 });
  return JSON.parse(text) as T;
}

const v1 = "version: 1\ndomains:\n  - name: a.example.com\nroutes:\n  - name: home\n    path: /\n    upstream: http://127.0.0.1:8081\n";
const v2 =
  "version: 1\nroutes:\n  - name: home\n    path: /home\n    upstream: http://127.0.0.1:8081\n  - name: about\n    path: /about\n    upstream: http://127.0.0.1:8081\n";
const documents: string[] = [];

beforeAll(async () => {
  server = await startTestServer({ clock: clock.clock });
  admin = server.credentials.api_key;
  org = server.credentials.organization_id;
  member = await createApiKey(server, "member");
  // Revision 1 by the admin (merge), revision 2 by the member (strict), revision 3 by the admin (merge).
  await applyOk(server, admin, v1);
  documents[1] = (await exportOk(server, admin)).yaml;
  clock.advance(60_000);
  await applyOk(server, member.apiKey, v2, { strict: true });
  documents[2] = (await exportOk(server, admin)).yaml;
  clock.advance(60_000);
  await applyOk(server, admin, "version: 1\nroutes:\n  - name: contact\n    path: /contact\n    upstream: http://127.0.0.1:8081\n");
  documents[3] = (await exportOk(server, admin)).yaml;
});
afterAll(() => server.close());

describe("ListConfigRevisions", () => {
  test("lists who changed what and when, newest first", async () => {
    const { revisions } = await rpcOk<{ revisions: RevisionJson[] }>("ListConfigRevisions", {});
    expect(revisions.map((r) => r.revision)).toEqual([3, 2, 1]);
    expect(revisions[2]).toEqual({
      revision: 1,
      actor: expect.stringMatching(/\S/),
      createdAt: "2026-11-22T10:00:00Z",
      source: "import",
      created: ["domains/a.example.com", "routes/home"],
    });
    expect(revisions[1]).toEqual({
      revision: 2,
      actor: expect.stringContaining(member.prefix),
      createdAt: "2026-11-22T10:01:00Z",
      source: "import-strict",
      created: ["routes/about"],
      updated: ["routes/home"],
      deleted: ["domains/a.example.com"],
    });
    expect(revisions[0]).toMatchObject({ revision: 3, source: "import", createdAt: "2026-11-22T10:02:00Z", created: ["routes/contact"] });
    expect(revisions[0]?.actor).not.toBe(revisions[1]?.actor);
  });

  test("pages with page_size and next_page_token", async () => {
    const first = await rpcOk<{ revisions: RevisionJson[]; nextPageToken?: string }>("ListConfigRevisions", { pageSize: 2 });
    expect(first.revisions.map((r) => r.revision)).toEqual([3, 2]);
    expect(first.nextPageToken).toBeTruthy();
    const second = await rpcOk<{ revisions: RevisionJson[]; nextPageToken?: string }>("ListConfigRevisions", {
      pageSize: 2,
      pageToken: first.nextPageToken,
    });
    expect(second.revisions.map((r) => r.revision)).toEqual([1]);
    expect(second.nextPageToken).toBeUndefined();
  });

  test.each([
    [{ pageSize: 101 }, "page_size", /from 1 to 100/],
    [{ pageSize: -1 }, "page_size", /from 1 to 100/],
    [{ pageToken: "bogus" }, "page_token", /next_page_token/],
  ])("refuses %j", async (body, field, description) => {
    const response = await rpc("ListConfigRevisions", body);
    expect(response.status).toBe(400);
    const json = (await response.json()) as ErrorJson;
    expect(json.details?.[0]?.debug?.violations).toEqual([{ field, description: expect.stringMatching(description) }]);
  });
});

describe("GetConfigRevision", () => {
  test("returns a revision's summary and its whole document as it was", async () => {
    for (const revision of [1, 2, 3]) {
      const answer = await rpcOk<{ revision: RevisionJson; yaml: string }>("GetConfigRevision", { revision });
      expect(answer.revision.revision).toBe(revision);
      expect(answer.yaml).toBe(documents[revision]);
    }
  });

  test("an unknown revision is 404 and says which exist; revision 0 is 400", async () => {
    const missing = await rpc("GetConfigRevision", { revision: 99 });
    expect(missing.status).toBe(404);
    const json = (await missing.json()) as ErrorJson;
    expect(reasonOf(json)).toBe("revision_not_found");
    expect(json.message).toMatch(/revision 99 does not exist: revisions go from 1 to \d+/);
    expect((await rpc("GetConfigRevision", { revision: 0 })).status).toBe(400);
  });
});

describe("RollbackConfig", () => {
  test("makes an earlier document current again as a new revision", async () => {
    clock.advance(60_000);
    const before = await exportOk(server, admin);
    const { result } = await rpcOk<{ result: Record<string, unknown> }>("RollbackConfig", {
      revision: 1,
      expectedRevision: before.revision,
    });
    expect(result).toEqual({
      revision: before.revision + 1,
      applied: true,
      created: ["domains/a.example.com"],
      updated: ["routes/home"],
      deleted: ["routes/about", "routes/contact"],
    });
    const after = await exportOk(server, admin);
    expect(after).toEqual({ revision: before.revision + 1, yaml: documents[1] });
    const { revisions } = await rpcOk<{ revisions: RevisionJson[] }>("ListConfigRevisions", { pageSize: 1 });
    expect(revisions[0]).toMatchObject({ revision: before.revision + 1, source: "rollback:1", createdAt: "2026-11-22T10:03:00Z" });
  });

  test("rolling back to the current state changes nothing and keeps the revision", async () => {
    const before = await exportOk(server, admin);
    const { result } = await rpcOk<{ result: Record<string, unknown> }>("RollbackConfig", { revision: 1 });
    expect(result).toEqual({ revision: before.revision, applied: true, unchanged: 2 });
    expect(await exportOk(server, admin)).toEqual(before);
  });

  test("with a stale expected_revision it is failed_precondition and changes nothing", async () => {
    const before = await exportOk(server, admin);
    const response = await rpc("RollbackConfig", { revision: 2, expectedRevision: before.revision - 1 });
    expect(response.status).toBe(400);
    const json = (await response.json()) as ErrorJson;
    expect(json.code).toBe("failed_precondition");
    expect(reasonOf(json)).toBe("revision_mismatch");
    expect(await exportOk(server, admin)).toEqual(before);
  });

  test("to a revision that does not exist is 404", async () => {
    const response = await rpc("RollbackConfig", { revision: 1000 });
    expect(response.status).toBe(404);
    expect(reasonOf((await response.json()) as ErrorJson)).toBe("revision_not_found");
  });

  test("a member may roll back", async () => {
    const { result } = await rpcOk<{ result: { revision: number } }>("RollbackConfig", { revision: 2 }, member.apiKey);
    expect((await exportOk(server, admin)).yaml).toBe(documents[2]);
    expect(result.revision).toBe((await exportOk(server, admin)).revision);
  });
});
