import { createTenancyStore } from "../../src/storage/tenancy-store.js";
import { connectCall, createApiKey, createOtherOrganization } from "../support/credentials.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * docs/api.md, "Credentials and roles": for one RPC of each credential kind, on the Connect
 * path and on the REST path, each failure gives the documented status and a
 * Connect error body.
 */
let server: TestServer;
let memberKey: string;
let revokedKey: string;
let other: Awaited<ReturnType<typeof createOtherOrganization>>;

beforeAll(async () => {
  server = await startTestServer();
  memberKey = (await createApiKey(server, "member")).apiKey;
  const revoked = await createApiKey(server, "admin");
  await createTenancyStore(server.app.database.client).revokeApiKey(revoked.id, new Date());
  revokedKey = revoked.apiKey;
  other = await createOtherOrganization(server);
});
afterAll(() => server.close());

const unknownKey = (prefix: string) => `${prefix}_${"A".repeat(43)}`;

interface Case {
  name: string;
  bearer?: string | (() => string);
  status: number;
  code: string;
  reason: string;
  org?: () => string;
}

type Front = (bearer: string | undefined, org: string) => Promise<Response>;

async function expectError(response: Response, status: number, code: string, reason: string) {
  const text = await response.text();
  expect({ status: response.status, text }).toMatchObject({ status });
  expect(response.headers.get("content-type")).toBe("application/json");
  const body = JSON.parse(text) as { code: string; message: string; details?: { debug?: { reason?: string } }[] };
  expect(body.code).toBe(code);
  expect(body.message.length).toBeGreaterThan(10);
  expect(body.details?.[0]?.debug?.reason).toBe(reason);
  // Never echo a credential back.
  expect(text).not.toMatch(/[gps]k_[A-Za-z0-9_-]{43}/);
}

function credentialCases(valid: () => string, wrongKind: () => string): Case[] {
  return [
    { name: "no credential", status: 401, code: "unauthenticated", reason: "credential_missing" },
    { name: "malformed credential", bearer: "not-a-key", status: 401, code: "unauthenticated", reason: "credential_malformed" },
    {
      name: "unknown credential",
      bearer: () => unknownKey(valid().slice(0, 2)),
      status: 401,
      code: "unauthenticated",
      reason: "credential_unknown",
    },
    { name: "credential of the wrong kind", bearer: wrongKind, status: 403, code: "permission_denied", reason: "wrong_credential_kind" },
  ];
}

describe.each([
  {
    area: "API key (ConfigService.GetConfig, any member)",
    connect: ((bearer, org) => connectCall(server, "/svc.v1.ConfigService/GetConfig", { organizationId: org }, bearer)) as Front,
    rest: ((bearer, org) => server.call(`/organization/${org}/config`, bearer ? { bearer } : {})) as Front,
    cases: (): Case[] => [
      ...credentialCases(
        () => server.credentials.api_key,
        () => server.credentials.secret_key,
      ),
      { name: "revoked API key", bearer: () => revokedKey, status: 401, code: "unauthenticated", reason: "credential_revoked" },
      {
        name: "organisation the key's account is not a member of",
        bearer: () => server.credentials.api_key,
        org: () => other.organizationId,
        status: 404,
        code: "not_found",
        reason: "organization_not_found",
      },
      {
        name: "organisation that does not exist",
        bearer: () => server.credentials.api_key,
        org: () => "00000000-0000-4000-8000-000000000000",
        status: 404,
        code: "not_found",
        reason: "organization_not_found",
      },
    ],
  },
  {
    area: "API key with the admin role (SecretsService.GetPublicKey)",
    connect: ((bearer, org) => connectCall(server, "/svc.v1.SecretsService/GetPublicKey", { organizationId: org }, bearer)) as Front,
    rest: ((bearer, org) => server.call(`/organization/${org}/secrets/public-key`, bearer ? { bearer } : {})) as Front,
    cases: (): Case[] => [
      ...credentialCases(
        () => server.credentials.api_key,
        () => server.credentials.publishable_key,
      ),
      {
        name: "member without the admin role",
        bearer: () => memberKey,
        status: 403,
        code: "permission_denied",
        reason: "role_insufficient",
      },
      {
        name: "admin of another organisation",
        bearer: () => other.adminKey,
        status: 404,
        code: "not_found",
        reason: "organization_not_found",
      },
    ],
  },
  {
    area: "publishable key (IdentityService.RegisterPassword)",
    connect: ((bearer) =>
      connectCall(server, "/svc.v1.IdentityService/RegisterPassword", { identifier: "a@example.com", password: "x" }, bearer)) as Front,
    rest: ((bearer) =>
      server.call("/identity/register/password", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ identifier: "a@example.com", password: "x" }),
        ...(bearer ? { bearer } : {}),
      })) as Front,
    cases: (): Case[] => [
      ...credentialCases(
        () => server.credentials.publishable_key,
        () => server.credentials.secret_key,
      ),
      {
        name: "an API key",
        bearer: () => server.credentials.api_key,
        status: 403,
        code: "permission_denied",
        reason: "wrong_credential_kind",
      },
    ],
  },
  {
    area: "secret key (IdentityService.GenerateMagicLink)",
    connect: ((bearer) =>
      connectCall(server, "/svc.v1.IdentityService/GenerateMagicLink", { identifier: "a@example.com" }, bearer)) as Front,
    rest: undefined,
    cases: (): Case[] =>
      credentialCases(
        () => server.credentials.secret_key,
        () => server.credentials.publishable_key,
      ),
  },
])("$area", ({ connect, rest, cases }) => {
  const fronts: [string, Front][] = [["Connect", connect]];
  if (rest) fronts.push(["REST", rest]);
  describe.each(fronts)("on the %s path", (_front, call) => {
    test.each(cases().map((c) => [c.name, c] as const))("%s", async (_name, c) => {
      const bearer = typeof c.bearer === "function" ? c.bearer() : c.bearer;
      const org = c.org?.() ?? server.credentials.organization_id;
      await expectError(await call(bearer, org), c.status, c.code, c.reason);
    });
  });
});

describe("a revoked publishable or secret key", () => {
  test("is refused with 401 once the key is rotated", async () => {
    const fresh = await server.app.tenancy.rotateOrganizationKey(other.organizationId, "secret");
    const rotatedAgain = await server.app.tenancy.rotateOrganizationKey(other.organizationId, "secret");
    expect(rotatedAgain).not.toBe(fresh);
    const response = await connectCall(server, "/svc.v1.IdentityService/ValidateSession", { token: "x" }, fresh);
    await expectError(response, 401, "unauthenticated", "credential_revoked");
  });
});

describe("keys at rest", () => {
  test("only hashes of keys are stored, never the keys", async () => {
    const db = server.app.database.client;
    const stored = JSON.stringify([await db.apiKey.findMany(), await db.organizationKey.findMany()]);
    for (const key of [server.credentials.api_key, server.credentials.publishable_key, server.credentials.secret_key, memberKey]) {
      expect(stored).not.toContain(key);
      expect(stored).not.toContain(key.slice(10));
    }
  });

  test("a key's last use is recorded", async () => {
    const response = await server.call(`/organization/${server.credentials.organization_id}/config`, { bearer: memberKey });
    expect([200, 501]).toContain(response.status);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const keys = await createTenancyStore(server.app.database.client).listApiKeys(server.credentials.organization_id);
    const used = keys.find((k) => memberKey.startsWith(k.prefix));
    expect(used?.lastUsedAt).toBeInstanceOf(Date);
  });
});
