import { createTenancyStore } from "../../src/storage/tenancy-store.js";
import {
  applyOk,
  exportOk,
  getConfig,
  putConfig,
  reasonOf,
  violationsOf,
  type ErrorJson,
  type PlanJson,
} from "../support/config-documents.js";
import { connectCall, createApiKey, createOtherOrganization } from "../support/credentials.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * docs/gateway.md, "Import: `PUT /organization/{id}/config`" and
 * "Export: `GET /organization/{id}/config`": export, merge and strict import, If-Match,
 * dry run, the no-op rule, content types and limits, and the credential cases
 * of every configuration path. Each test works in an organisation of its own.
 */
let server: TestServer;
let admin: string;

beforeAll(async () => {
  server = await startTestServer();
  admin = server.credentials.api_key;
});
afterAll(() => server.close());

/** A fresh organisation with an admin key, so tests do not share state. */
async function freshOrganization() {
  const org = await createOtherOrganization(server);
  return { id: org.organizationId, key: org.adminKey };
}

function put(org: { id: string; key: string }, body: string, options: Parameters<typeof putConfig>[3] = {}) {
  return putConfig(server, org.key, body, { ...options, organizationId: org.id });
}

async function putOk(org: { id: string; key: string }, body: string, options: Parameters<typeof putConfig>[3] = {}): Promise<PlanJson> {
  const response = await put(org, body, options);
  const text = await response.text();
  expect({ status: response.status, text }).toMatchObject({ status: 200 });
  expect(response.headers.get("content-type")).toBe("application/json");
  return JSON.parse(text) as PlanJson;
}

async function exportOf(org: { id: string; key: string }) {
  const response = await getConfig(server, org.key, org.id);
  expect(response.status).toBe(200);
  return { etag: response.headers.get("etag"), yaml: await response.text(), type: response.headers.get("content-type") };
}

const base = `version: 1
domains:
  - name: api.example.com
plugins:
  - name: rl-default
    type: rate-limit
    config: {requests: 100, window_seconds: 60}
rules:
  - name: block-bots
    match: {header: user-agent, regex: "bot", ignore_case: true}
    action: deny
routes:
  - name: create-plant
    domains: [api.example.com]
    path: /plants
    methods: [POST]
    upstream: http://127.0.0.1:8081
    plugins: [rl-default]
    rules: [block-bots]
  - name: list-plants
    path: /plants
    methods: [GET]
    upstream: http://127.0.0.1:8081
`;

describe("export (GET /organization/{id}/config)", () => {
  test("an organisation without configuration exports an empty version 1 document at revision 0", async () => {
    const org = await freshOrganization();
    const out = await exportOf(org);
    expect(out.type).toBe("application/yaml; charset=utf-8");
    expect(out.etag).toBe('"0"');
    expect(out.yaml).toBe("version: 1\ndomains: []\nupstreams: []\nplugins: []\nrules: []\nroutes: []\n");
  });

  test("is deterministic, sorted by kind then name, with a stable key order and the revision as ETag", async () => {
    const org = await freshOrganization();
    // Written out of order, with fields out of order and extra spacing.
    await putOk(
      org,
      `routes:
  - upstream: "http://127.0.0.1:8081"
    name: b-route
    path: /b
  - name: a-route
    path: /a/*
    upstream: http://127.0.0.1:8081
    methods: [GET,   HEAD]
domains:
  - name: z.example.com
  - name: a.example.com
version: 1
`,
    );
    const first = await exportOf(org);
    const second = await exportOf(org);
    expect(first.etag).toBe('"1"');
    expect(second.yaml).toBe(first.yaml);
    expect(first.yaml).toBe(`version: 1
domains:
  - name: a.example.com
  - name: z.example.com
upstreams: []
plugins: []
rules: []
routes:
  - name: a-route
    path: /a/*
    methods: [GET, HEAD]
    upstream: http://127.0.0.1:8081
  - name: b-route
    path: /b
    upstream: http://127.0.0.1:8081
`);
  });

  test("the Connect GetConfig RPC answers the same revision and document", async () => {
    const org = await freshOrganization();
    await putOk(org, base);
    const rest = await exportOf(org);
    const response = await connectCall(server, "/svc.v1.ConfigService/GetConfig", { organizationId: org.id }, org.key);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ revision: 1, yaml: rest.yaml });
  });
});

describe("import (PUT /organization/{id}/config)", () => {
  test("creates every resource and answers the plan with the new revision", async () => {
    const org = await freshOrganization();
    const plan = await putOk(org, base);
    expect(plan).toEqual({
      revision: 1,
      applied: true,
      created: ["domains/api.example.com", "plugins/rl-default", "rules/block-bots", "routes/create-plant", "routes/list-plants"],
      updated: [],
      deleted: [],
      unchanged: 0,
      warnings: [],
    });
  });

  test("a PUT that changes nothing keeps the revision and answers applied with empty lists", async () => {
    const org = await freshOrganization();
    await putOk(org, base);
    const before = await exportOf(org);
    expect(await putOk(org, base)).toEqual({
      revision: 1,
      applied: true,
      created: [],
      updated: [],
      deleted: [],
      unchanged: 5,
      warnings: [],
    });
    expect(await putOk(org, base, { strict: true })).toEqual({
      revision: 1,
      applied: true,
      created: [],
      updated: [],
      deleted: [],
      unchanged: 5,
      warnings: [],
    });
    expect(await exportOf(org)).toEqual(before);
  });

  test("merge creates or replaces whole the resources present and leaves the others untouched", async () => {
    const org = await freshOrganization();
    await putOk(org, base);
    // list-plants is replaced whole: its methods disappear because the new version has none.
    const plan = await putOk(
      org,
      `version: 1
routes:
  - name: list-plants
    path: /plants/*
    upstream: http://127.0.0.1:9000
  - name: health
    path: /health
    upstream: http://127.0.0.1:9000
`,
    );
    expect(plan).toEqual({
      revision: 2,
      applied: true,
      created: ["routes/health"],
      updated: ["routes/list-plants"],
      deleted: [],
      unchanged: 0,
      warnings: [],
    });
    const { yaml } = await exportOf(org);
    expect(yaml).toContain("  - name: create-plant\n    domains: [api.example.com]\n");
    expect(yaml).toContain("  - name: list-plants\n    path: /plants/*\n    upstream: http://127.0.0.1:9000\n");
    expect(yaml).toContain("  - name: rl-default\n");
  });

  test("strict makes the organisation equal the document: absent resources are deleted", async () => {
    const org = await freshOrganization();
    await putOk(org, base);
    const plan = await putOk(
      org,
      "version: 1\nroutes:\n  - name: list-plants\n    path: /plants\n    methods: [GET]\n    upstream: http://127.0.0.1:8081\n",
      {
        strict: true,
      },
    );
    expect(plan).toEqual({
      revision: 2,
      applied: true,
      created: [],
      updated: [],
      deleted: ["domains/api.example.com", "plugins/rl-default", "rules/block-bots", "routes/create-plant"],
      unchanged: 1,
      warnings: [],
    });
    expect((await exportOf(org)).yaml).toBe(
      "version: 1\ndomains: []\nupstreams: []\nplugins: []\nrules: []\nroutes:\n  - name: list-plants\n    path: /plants\n    methods: [GET]\n    upstream: http://127.0.0.1:8081\n",
    );
  });

  test("references resolve against the resulting state: a merge may use resources defined earlier", async () => {
    const org = await freshOrganization();
    await putOk(org, base);
    const plan = await putOk(
      org,
      "version: 1\nroutes:\n  - name: more\n    path: /more\n    upstream: http://127.0.0.1:8081\n    plugins: [rl-default]\n    rules: [block-bots]\n",
    );
    expect(plan.created).toEqual(["routes/more"]);
  });

  test("a strict import that deletes a resource still referenced is refused, and nothing changes", async () => {
    const org = await freshOrganization();
    await putOk(org, base);
    const before = await exportOf(org);
    const response = await put(
      org,
      "version: 1\nroutes:\n  - name: create-plant\n    path: /plants\n    upstream: http://127.0.0.1:8081\n    plugins: [rl-default]\n",
      { strict: true },
    );
    expect(response.status).toBe(400);
    const body = (await response.json()) as ErrorJson;
    expect(body.code).toBe("invalid_argument");
    expect(violationsOf(body)).toEqual([
      { field: "routes[0].plugins[0]", description: expect.stringContaining('plugin "rl-default" does not exist'), line: 6, column: 15 },
    ]);
    expect(await exportOf(org)).toEqual(before);
  });

  test("accepts application/yaml, application/x-yaml and text/yaml (with parameters)", async () => {
    const org = await freshOrganization();
    for (const [i, type] of ["application/yaml", "application/x-yaml", "text/yaml; charset=utf-8"].entries()) {
      const plan = await putOk(org, `version: 1\ndomains:\n  - name: d${i}.example.com\n`, { contentType: type });
      expect(plan.created).toEqual([`domains/d${i}.example.com`]);
    }
  });

  test("the Connect ApplyConfig RPC applies the same way (expected revision as a field)", async () => {
    const org = await freshOrganization();
    const response = await connectCall(
      server,
      "/svc.v1.ConfigService/ApplyConfig",
      { organizationId: org.id, yaml: base, expectedRevision: 0 },
      org.key,
    );
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ revision: 1, applied: true });
    const stale = await connectCall(
      server,
      "/svc.v1.ConfigService/ApplyConfig",
      { organizationId: org.id, yaml: base, strict: true, expectedRevision: 0 },
      org.key,
    );
    expect(stale.status).toBe(400);
    const body = (await stale.json()) as ErrorJson;
    expect(body.code).toBe("failed_precondition");
    expect(reasonOf(body)).toBe("revision_mismatch");
  });
});

describe("If-Match", () => {
  test("a matching revision applies", async () => {
    const org = await freshOrganization();
    expect((await putOk(org, base, { ifMatch: '"0"' })).revision).toBe(1);
    expect((await putOk(org, `${base}  - name: x\n    path: /x\n    upstream: http://127.0.0.1:1\n`, { ifMatch: '"1"' })).revision).toBe(2);
  });

  test("a mismatch answers 412 failed_precondition and changes nothing", async () => {
    const org = await freshOrganization();
    await putOk(org, base);
    const before = await exportOf(org);
    const response = await put(org, "version: 1\nroutes: []\n", { strict: true, ifMatch: '"0"' });
    expect(response.status).toBe(412);
    const body = (await response.json()) as ErrorJson;
    expect(body.code).toBe("failed_precondition");
    expect(reasonOf(body)).toBe("revision_mismatch");
    expect(body.message).toMatch(/revision 1 \(ETag "1"\), which If-Match "0" does not match/);
    expect(await exportOf(org)).toEqual(before);
  });

  test("a malformed If-Match is a 400 that says what to send", async () => {
    const org = await freshOrganization();
    const response = await put(org, base, { ifMatch: "1" });
    expect(response.status).toBe(400);
    expect(((await response.json()) as ErrorJson).message).toMatch(/If-Match must be \* or a comma-separated list of entity tags/);
  });
});

describe("dry run", () => {
  test("returns the plan without applying it", async () => {
    const org = await freshOrganization();
    await putOk(org, base);
    const before = await exportOf(org);
    const plan = await putOk(org, "version: 1\nroutes:\n  - name: list-plants\n    path: /other\n    upstream: http://127.0.0.1:8081\n", {
      strict: true,
      dryRun: true,
    });
    expect(plan).toEqual({
      revision: 1,
      applied: false,
      created: [],
      updated: ["routes/list-plants"],
      deleted: ["domains/api.example.com", "plugins/rl-default", "rules/block-bots", "routes/create-plant"],
      unchanged: 0,
      warnings: [],
    });
    expect(await exportOf(org)).toEqual(before);
  });

  test("validates like a real import", async () => {
    const org = await freshOrganization();
    const response = await put(org, "version: 1\nroutes:\n  - name: r\n    path: /r\n    upstream: http://x\n    plugins: [missing]\n", {
      dryRun: true,
    });
    expect(response.status).toBe(400);
    expect(violationsOf((await response.json()) as ErrorJson).map((v) => v.field)).toEqual(["routes[0].plugins[0]"]);
  });
});

describe("content type and size", () => {
  test.each([
    ["application/json", '{"version": 1}'],
    ["text/plain", "version: 1\n"],
  ])("Content-Type %s is 415 and changes nothing", async (type, body) => {
    const org = await freshOrganization();
    const response = await put(org, body, { contentType: type });
    expect(response.status).toBe(415);
    const json = (await response.json()) as ErrorJson;
    expect(json.code).toBe("invalid_argument");
    expect(json.message).toMatch(/application\/yaml/);
    expect((await exportOf(org)).etag).toBe('"0"');
  });

  test("a body over 5 MiB is 413", async () => {
    const org = await freshOrganization();
    const body = `version: 1\n${"# padding\n".repeat(530_000)}`;
    expect(Buffer.byteLength(body)).toBeGreaterThan(5 * 1024 * 1024);
    const response = await put(org, body);
    expect(response.status).toBe(413);
    const json = (await response.json()) as ErrorJson;
    expect(json.code).toBe("resource_exhausted");
    expect(json.message).toMatch(/5 MiB/);
  });

  test("a document over 5 MiB on the Connect path is refused as resource_exhausted", async () => {
    const org = await freshOrganization();
    const yaml = `version: 1\n${"#".repeat(5 * 1024 * 1024)}\n`;
    const response = await connectCall(server, "/svc.v1.ConfigService/ApplyConfig", { organizationId: org.id, yaml }, org.key);
    const json = (await response.json()) as ErrorJson;
    expect(json.code).toBe("resource_exhausted");
    expect(json.message).toMatch(/over the limit/);
  });
});

describe("credentials", () => {
  let member: string;
  let revoked: string;
  let other: Awaited<ReturnType<typeof createOtherOrganization>>;
  const org = () => server.credentials.organization_id;

  beforeAll(async () => {
    member = (await createApiKey(server, "member")).apiKey;
    const key = await createApiKey(server, "admin");
    await createTenancyStore(server.app.database.client).revokeApiKey(key.id, new Date());
    revoked = key.apiKey;
    other = await createOtherOrganization(server);
  });

  const cases: [string, () => string | undefined, () => string, number, string][] = [
    ["no credential", () => undefined, org, 401, "credential_missing"],
    ["a malformed credential", () => "Bearer-less", org, 401, "credential_malformed"],
    ["an unknown API key", () => `gk_${"A".repeat(43)}`, org, 401, "credential_unknown"],
    ["a revoked API key", () => revoked, org, 401, "credential_revoked"],
    ["a publishable key", () => server.credentials.publishable_key, org, 403, "wrong_credential_kind"],
    ["a secret key", () => server.credentials.secret_key, org, 403, "wrong_credential_kind"],
    ["an organisation the account is not a member of", () => admin, () => other.organizationId, 404, "organization_not_found"],
    ["an organisation that does not exist", () => admin, () => "00000000-0000-4000-8000-000000000000", 404, "organization_not_found"],
  ];

  const fronts: [string, (bearer: string | undefined, org: string) => Promise<Response>][] = [
    [
      "REST PUT",
      (bearer, id) =>
        server.call(`/organization/${id}/config`, {
          method: "PUT",
          headers: { "content-type": "application/yaml" },
          body: base,
          ...(bearer ? { bearer } : {}),
        }),
    ],
    [
      "Connect ApplyConfig",
      (bearer, id) => connectCall(server, "/svc.v1.ConfigService/ApplyConfig", { organizationId: id, yaml: base }, bearer),
    ],
    [
      "Connect ListConfigRevisions",
      (bearer, id) => connectCall(server, "/svc.v1.ConfigService/ListConfigRevisions", { organizationId: id }, bearer),
    ],
    [
      "Connect GetConfigRevision",
      (bearer, id) => connectCall(server, "/svc.v1.ConfigService/GetConfigRevision", { organizationId: id, revision: 1 }, bearer),
    ],
    [
      "Connect RollbackConfig",
      (bearer, id) => connectCall(server, "/svc.v1.ConfigService/RollbackConfig", { organizationId: id, revision: 1 }, bearer),
    ],
  ];

  describe.each(fronts)("%s", (_front, call) => {
    test.each(cases)("%s", async (_name, bearer, orgId, status, reason) => {
      const before = await exportOk(server, admin);
      const response = await call(bearer(), orgId());
      const text = await response.text();
      expect({ status: response.status, text }).toMatchObject({ status });
      const body = JSON.parse(text) as ErrorJson;
      expect(reasonOf(body)).toBe(reason);
      expect(body.message.length).toBeGreaterThan(10);
      expect(text).not.toMatch(/[gps]k_[A-Za-z0-9_-]{43}/);
      expect(await exportOk(server, admin)).toEqual(before);
    });
  });

  test("a member (not only an admin) may export and import", async () => {
    expect((await getConfig(server, member)).status).toBe(200);
    const plan = await applyOk(server, member, "version: 1\ndomains:\n  - name: member.example.com\n");
    expect(plan.applied).toBe(true);
  });
});
