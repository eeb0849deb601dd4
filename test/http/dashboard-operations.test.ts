import { applyOk, exportOk } from "../support/config-documents.js";
import { callIdentity, goodPassword, postRest } from "../support/identity-client.js";
import { secretsApi } from "../support/secrets-client.js";
import {
  addMember,
  createInvitedAccount,
  dashboardRpc,
  invite,
  ownerPassword,
  dashboardAuthRpc,
  setUpOwner,
  signIn,
  startDashboardServer,
  cookieOf,
  tokenOf,
  type DashboardTestServer,
} from "../support/dashboard-server.js";

interface ErrorBody {
  code: string;
  message: string;
  details?: { debug?: { reason?: string; violations?: { field: string; description: string }[] } }[];
}

/** Calls a dashboard RPC as the signed-in page does; answers status and JSON body. */
async function call<T = Record<string, unknown>>(
  server: DashboardTestServer,
  cookie: string,
  method: string,
  body: Record<string, unknown>,
) {
  const response = await dashboardRpc(server, method, body, { cookie });
  return { status: response.status, body: (await response.json()) as T & ErrorBody };
}

const violations = (body: ErrorBody) => body.details?.[0]?.debug?.violations ?? [];
const reason = (body: ErrorBody) => body.details?.[0]?.debug?.reason;

describe("dashboard operations, through the same code as the public API", () => {
  let server: DashboardTestServer;
  let owner: string;
  let org: string;
  const ask = <T = Record<string, unknown>>(method: string, body: Record<string, unknown> = {}, cookie = owner) =>
    call<T>(server, cookie, method, { organizationId: org, ...body });

  const myAccountId = async (cookie: string) =>
    (await call<{ operator: { accountId: string } }>(server, cookie, "GetOperatorSession", {})).body.operator.accountId;

  beforeAll(async () => {
    server = await startDashboardServer();
    owner = await setUpOwner(server);
    org = server.credentials.organization_id;
  });
  afterAll(() => server.close());

  describe("API keys", () => {
    test("a created key is returned once, works against the config API, is listed by prefix only, and stops working when revoked", async () => {
      const created = await ask<{ apiKey: { id: string; prefix: string; role: string }; key: string }>("CreateApiKey", {
        name: "ci-deploy",
        role: "ROLE_MEMBER",
      });
      expect(created.status).toBe(200);
      expect(created.body.key).toMatch(/^gk_[A-Za-z0-9_-]{43}$/);
      expect(created.body.apiKey).toMatchObject({ prefix: created.body.key.slice(0, 9), role: "ROLE_MEMBER" });
      expect((await server.call(`/organization/${org}/config`, { bearer: created.body.key })).status).toBe(200);

      const listed = await ask<{ apiKeys: { id: string; name: string; prefix: string; lastUsedAt?: string }[] }>("ListApiKeys");
      const row = listed.body.apiKeys.find((k) => k.id === created.body.apiKey.id);
      expect(row).toMatchObject({ name: "ci-deploy", prefix: created.body.key.slice(0, 9) });
      expect(row?.lastUsedAt).toBeDefined();
      expect(JSON.stringify(listed.body)).not.toContain(created.body.key);

      expect((await ask("RevokeApiKey", { apiKeyId: created.body.apiKey.id })).status).toBe(200);
      expect((await server.call(`/organization/${org}/config`, { bearer: created.body.key })).status).toBe(401);
      const after = await ask<{ apiKeys: { id: string }[] }>("ListApiKeys");
      expect(after.body.apiKeys.map((k) => k.id)).not.toContain(created.body.apiKey.id);
      const withRevoked = await ask<{ apiKeys: { id: string; revokedAt?: string }[] }>("ListApiKeys", { includeRevoked: true });
      expect(withRevoked.body.apiKeys.find((k) => k.id === created.body.apiKey.id)?.revokedAt).toBeDefined();
    });

    test("bad input lists every violation by field", async () => {
      const response = await ask("CreateApiKey", { name: " ", role: "ROLE_UNSPECIFIED" });
      expect(response.status).toBe(400);
      expect(
        violations(response.body)
          .map((v) => v.field)
          .sort(),
      ).toEqual(["name", "role"]);
    });

    test("a key of another organisation cannot be revoked from here (404)", async () => {
      const other = await server.app.tenancy.createOrganization("Other");
      const foreign = await server.app.tenancy.createApiKey({ organizationId: other.organizationId, name: "theirs", role: "admin" });
      const response = await ask("RevokeApiKey", { apiKeyId: foreign.id });
      expect(response.status).toBe(404);
      expect((await server.call(`/organization/${other.organizationId}/config`, { bearer: foreign.apiKey })).status).toBe(200);
    });

    test("long lists come in pages", async () => {
      for (let i = 0; i < 4; i++) await ask("CreateApiKey", { name: `paged-${i}`, role: "ROLE_MEMBER" });
      const seen: string[] = [];
      let token = "";
      let pages = 0;
      do {
        const page = await ask<{ apiKeys: { id: string }[]; nextPageToken: string }>("ListApiKeys", { pageSize: 2, pageToken: token });
        expect(page.body.apiKeys.length).toBeLessThanOrEqual(2);
        seen.push(...page.body.apiKeys.map((k) => k.id));
        // proto3 JSON leaves out an empty next_page_token.
        token = page.body.nextPageToken ?? "";
        pages++;
      } while (token !== "" && pages < 20);
      expect(new Set(seen).size).toBe(seen.length);
      expect(seen.length).toBeGreaterThanOrEqual(5);
      expect((await ask("ListApiKeys", { pageToken: "garbage" })).status).toBe(400);
    });

    test("pages are read from the database by position: a key revoked between pages hides none after it", async () => {
      for (let i = 0; i < 3; i++) await ask("CreateApiKey", { name: `position-${i}`, role: "ROLE_MEMBER" });
      type Page = { apiKeys: { id: string; name: string }[]; nextPageToken?: string };
      const all = (await ask<Page>("ListApiKeys", { pageSize: 100 })).body.apiKeys;
      const at = all.findIndex((k) => k.name === "position-0");
      // The first page ends with position-0.
      const first = await ask<Page>("ListApiKeys", { pageSize: at + 1 });
      expect(first.body.apiKeys.map((k) => k.id)).toEqual(all.slice(0, at + 1).map((k) => k.id));
      // Revoked, it leaves the list; an offset would now skip position-1.
      expect((await ask("RevokeApiKey", { apiKeyId: all[at]?.id })).status).toBe(200);
      const second = await ask<Page>("ListApiKeys", { pageSize: 2, pageToken: first.body.nextPageToken });
      expect(second.body.apiKeys.map((k) => k.name)).toEqual(["position-1", "position-2"]);
      // With revoked keys included, the same token continues at the same place.
      const withRevoked = await ask<Page>("ListApiKeys", { pageSize: 2, pageToken: first.body.nextPageToken, includeRevoked: true });
      expect(withRevoked.body.apiKeys.map((k) => k.name)).toEqual(["position-1", "position-2"]);
    });

    test("a malformed page token, or one of another list, is a 400 that names page_token", async () => {
      const members = await ask<{ nextPageToken?: string }>("ListMembers", { pageSize: 1 });
      const otherList = members.body.nextPageToken ?? Buffer.from(JSON.stringify(["members", "a@example.com"])).toString("base64url");
      const tampered = Buffer.from(JSON.stringify(["api_keys", "yesterday", 7])).toString("base64url");
      for (const pageToken of ["garbage!", "Zm9v", otherList, tampered, "A".repeat(3000)]) {
        const response = await ask("ListApiKeys", { pageToken });
        expect({ pageToken: pageToken.slice(0, 20), status: response.status }).toEqual({ pageToken: pageToken.slice(0, 20), status: 400 });
        expect(violations(response.body).map((v) => v.field)).toEqual(["page_token"]);
        expect(reason(response.body)).toBe("page_token_malformed");
      }
      const both = await ask("ListApiKeys", { pageToken: "garbage!", pageSize: 1000 });
      expect(
        violations(both.body)
          .map((v) => v.field)
          .sort(),
      ).toEqual(["page_size", "page_token"]);
    });
  });

  describe("identity keys", () => {
    test("rotating the secret key returns the new key once; the old one is refused and the new one works", async () => {
      const before = await ask<{ secretKey: { prefix: string } }>("GetIdentityKeys");
      expect(before.body.secretKey.prefix).toBe(server.credentials.secret_key.slice(0, 9));
      const rotated = await ask<{ key: string; keyInfo: { prefix: string; kind: string } }>("RotateIdentityKey", {
        kind: "IDENTITY_KEY_KIND_SECRET",
      });
      expect(rotated.status).toBe(200);
      expect(rotated.body.key).toMatch(/^sk_[A-Za-z0-9_-]{43}$/);
      expect(rotated.body.keyInfo).toMatchObject({ kind: "IDENTITY_KEY_KIND_SECRET", prefix: rotated.body.key.slice(0, 9) });
      const identifier = `rotated-${Date.now()}@example.com`;
      expect((await callIdentity(server, "GenerateMagicLink", { identifier }, server.credentials.secret_key)).status).toBe(401);
      expect((await callIdentity(server, "GenerateMagicLink", { identifier }, rotated.body.key)).status).toBe(200);
      const after = await ask<{ secretKey: { prefix: string }; publishableKey: { prefix: string } }>("GetIdentityKeys");
      expect(after.body.secretKey.prefix).toBe(rotated.body.key.slice(0, 9));
      expect(after.body.publishableKey.prefix).toBe(server.credentials.publishable_key.slice(0, 9));
      server.credentials.secret_key = rotated.body.key;
    });
  });

  describe("identity settings", () => {
    test("password authentication follows the toggle", async () => {
      const current = await ask<{ settings: Record<string, unknown>; defaultRpId: string; defaultOrigins: string[] }>(
        "GetIdentitySettings",
      );
      expect(current.body.settings).toMatchObject({ passkeys: true, magicLinks: true, sessionTtlSeconds: 3600 });
      expect(current.body.settings.password ?? false).toBe(false);
      // The loopback default relying party is localhost, reachable by both names.
      expect(current.body.defaultRpId).toBe("localhost");
      expect(current.body.defaultOrigins).toEqual([server.origin, server.origin.replace("127.0.0.1", "localhost")]);
      const register = () =>
        postRest(
          server,
          "/identity/register/password",
          { identifier: `pw-${Math.random().toString(36).slice(2)}@example.com`, password: goodPassword },
          server.credentials.publishable_key,
        );
      expect((await register()).status).toBe(403);
      const on = await ask("UpdateIdentitySettings", { settings: { ...current.body.settings, password: true } });
      expect(on.status).toBe(200);
      expect((await register()).status).toBe(200);
      const off = await ask("UpdateIdentitySettings", { settings: { ...current.body.settings, password: false } });
      expect(off.status).toBe(200);
      expect((await register()).status).toBe(403);
    });

    test("every invalid value is listed with its field path, and nothing changes", async () => {
      const current = await ask<{ settings: Record<string, unknown> }>("GetIdentitySettings");
      const response = await ask("UpdateIdentitySettings", {
        settings: {
          ...current.body.settings,
          sessionTtlSeconds: 5,
          lockoutThreshold: 0,
          rpId: "not a host!",
          origins: ["ftp://x", "https://ok.example"],
        },
      });
      expect(response.status).toBe(400);
      expect(
        violations(response.body)
          .map((v) => v.field)
          .sort(),
      ).toEqual(["settings.lockout_threshold", "settings.origins[0]", "settings.rp_id", "settings.session_ttl_seconds"]);
      const after = await ask<{ settings: Record<string, unknown> }>("GetIdentitySettings");
      expect(after.body.settings).toEqual(current.body.settings);
    });
  });

  describe("identities", () => {
    test("search by identifier, see credentials and sessions, revoke a session and then all of them", async () => {
      const identifier = `Search.Me+${Date.now()}@Example.com`;
      const link = await callIdentity<{ token: string }>(server, "GenerateMagicLink", { identifier }, server.credentials.secret_key);
      const first = await callIdentity<{ identityId: string; session: { token: string } }>(
        server,
        "VerifyMagicLink",
        { token: link.body.token },
        server.credentials.secret_key,
      );
      const link2 = await callIdentity<{ token: string }>(server, "GenerateMagicLink", { identifier }, server.credentials.secret_key);
      const second = await callIdentity<{ session: { token: string } }>(
        server,
        "VerifyMagicLink",
        { token: link2.body.token },
        server.credentials.secret_key,
      );

      const found = await ask<{ identities: { id: string; identifier: string }[] }>("SearchIdentities", { query: "SEARCH.me+" });
      expect(found.body.identities).toEqual([expect.objectContaining({ id: first.body.identityId, identifier: identifier.toLowerCase() })]);
      expect((await ask<{ identities: unknown[] }>("SearchIdentities", { query: "%" })).body.identities ?? []).toEqual([]);

      const details = await ask<{ hasPassword?: boolean; passkeys?: unknown[]; liveSessions: number }>("GetIdentityDetails", {
        identityId: first.body.identityId,
      });
      expect(details.status).toBe(200);
      expect(details.body.hasPassword ?? false).toBe(false);
      expect(details.body.passkeys ?? []).toEqual([]);
      expect(details.body.liveSessions).toBe(2);

      const sessions = await ask<{ sessions: { sessionId: string; method: string; live: boolean }[] }>("ListIdentitySessions", {
        identityId: first.body.identityId,
      });
      expect(sessions.body.sessions).toHaveLength(2);
      expect(sessions.body.sessions.every((s) => s.method === "magic_link" && s.live)).toBe(true);

      const validate = (token: string) => callIdentity(server, "ValidateSession", { token }, server.credentials.secret_key);
      expect((await validate(first.body.session.token)).status).toBe(200);
      const target = sessions.body.sessions.find((s) => s) as { sessionId: string };
      const one = await ask<{ revoked: number }>("RevokeIdentitySessions", {
        identityId: first.body.identityId,
        sessionId: target.sessionId,
      });
      expect(one.body.revoked).toBe(1);
      const all = await ask<{ revoked: number }>("RevokeIdentitySessions", { identityId: first.body.identityId });
      expect(all.body.revoked).toBe(1);
      expect((await validate(first.body.session.token)).status).toBe(401);
      expect((await validate(second.body.session.token)).status).toBe(401);
    });

    test("search results and an identity's sessions come in pages, each row once", async () => {
      const stamp = Date.now();
      const identifiers = [`pager-c-${stamp}@example.com`, `pager-a-${stamp}@example.com`, `pager-b-${stamp}@example.com`];
      let identityId = "";
      for (const identifier of identifiers) {
        for (let i = 0; i < 2; i++) {
          const link = await callIdentity<{ token: string }>(server, "GenerateMagicLink", { identifier }, server.credentials.secret_key);
          const verified = await callIdentity<{ identityId: string }>(
            server,
            "VerifyMagicLink",
            { token: link.body.token },
            server.credentials.secret_key,
          );
          identityId = verified.body.identityId;
        }
      }
      type Found = { identities?: { identifier: string }[]; nextPageToken?: string };
      const first = await ask<Found>("SearchIdentities", { query: `${stamp}`, pageSize: 2 });
      const second = await ask<Found>("SearchIdentities", { query: `${stamp}`, pageSize: 2, pageToken: first.body.nextPageToken });
      expect([...(first.body.identities ?? []), ...(second.body.identities ?? [])].map((i) => i.identifier)).toEqual(
        [...identifiers].sort(),
      );
      expect(second.body.nextPageToken ?? "").toBe("");

      type Sessions = { sessions?: { sessionId: string }[]; nextPageToken?: string };
      const all = (await ask<Sessions>("ListIdentitySessions", { identityId })).body.sessions?.map((x) => x.sessionId) ?? [];
      expect(all).toHaveLength(2);
      const one = await ask<Sessions>("ListIdentitySessions", { identityId, pageSize: 1 });
      const two = await ask<Sessions>("ListIdentitySessions", { identityId, pageSize: 1, pageToken: one.body.nextPageToken });
      expect([...(one.body.sessions ?? []), ...(two.body.sessions ?? [])].map((x) => x.sessionId)).toEqual(all);
      // A search's token does not page sessions.
      expect((await ask("ListIdentitySessions", { identityId, pageToken: first.body.nextPageToken })).status).toBe(400);
    });

    test("an identity of another organisation is not found", async () => {
      const other = await server.app.tenancy.createOrganization("Other identities");
      const link = await callIdentity<{ token: string }>(
        server,
        "GenerateMagicLink",
        { identifier: "elsewhere@example.com" },
        other.secretKey,
      );
      const verified = await callIdentity<{ identityId: string }>(server, "VerifyMagicLink", { token: link.body.token }, other.secretKey);
      expect((await ask("GetIdentityDetails", { identityId: verified.body.identityId })).status).toBe(404);
      expect((await ask("RevokeIdentitySessions", { identityId: verified.body.identityId })).status).toBe(404);
    });

    test("removing a passkey that does not exist is 404", async () => {
      const link = await callIdentity<{ token: string }>(
        server,
        "GenerateMagicLink",
        { identifier: "nokeys@example.com" },
        server.credentials.secret_key,
      );
      const verified = await callIdentity<{ identityId: string }>(
        server,
        "VerifyMagicLink",
        { token: link.body.token },
        server.credentials.secret_key,
      );
      const response = await ask("RemoveIdentityPasskey", { identityId: verified.body.identityId, credentialId: "AAAA" });
      expect(response.status).toBe(404);
    });
  });

  describe("secrets", () => {
    test("environments, names, tags and versions are listed, never values; delete removes a secret", async () => {
      const secrets = secretsApi(server, server.credentials.api_key);
      await secrets.put("DATABASE_URL", "production", "postgres://very-secret-value", { tags: ["db"] });
      await secrets.put("DATABASE_URL", "production", "postgres://very-secret-value-2", { tags: ["db", "rotated"] });
      await secrets.put("STRIPE_KEY", "staging", "sk_test_secret_value");
      const environments = await ask<{ environments: string[] }>("ListSecretEnvironments");
      expect(environments.body.environments).toEqual(["production", "staging"]);
      const listed = await ask<{ secrets: { name: string; version: number; tags: string[]; updatedAt: string }[] }>(
        "ListEnvironmentSecrets",
        { environment: "production" },
      );
      expect(listed.body.secrets).toEqual([
        { name: "DATABASE_URL", environment: "production", version: 2, tags: ["db", "rotated"], updatedAt: expect.any(String) },
      ]);
      expect(JSON.stringify(listed.body)).not.toContain("very-secret-value");
      expect((await ask("DeleteEnvironmentSecret", { environment: "production", name: "DATABASE_URL" })).status).toBe(200);
      expect(await secrets.list("production")).toEqual([]);
      expect((await ask("DeleteEnvironmentSecret", { environment: "production", name: "DATABASE_URL" })).status).toBe(404);
    });

    test("an environment's secrets come in pages by name in byte order; one deleted between pages hides none after it", async () => {
      const secrets = secretsApi(server, server.credentials.api_key);
      const names = ["b_lower", "Zeta", "_under", "ALPHA", "a.dot", "M-dash"];
      for (const name of names) await secrets.put(name, "paging", `value of ${name}`);
      const byteOrder = [...names].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
      expect(byteOrder).toEqual(["ALPHA", "M-dash", "Zeta", "_under", "a.dot", "b_lower"]);
      type Page = { secrets?: { name: string }[]; nextPageToken?: string };
      const first = await ask<Page>("ListEnvironmentSecrets", { environment: "paging", pageSize: 2 });
      expect(first.body.secrets?.map((s) => s.name)).toEqual(byteOrder.slice(0, 2));
      expect((await ask("DeleteEnvironmentSecret", { environment: "paging", name: "ALPHA" })).status).toBe(200);
      const seen = [...(first.body.secrets ?? []).map((s) => s.name)];
      let token = first.body.nextPageToken ?? "";
      while (token !== "") {
        const page = await ask<Page>("ListEnvironmentSecrets", { environment: "paging", pageSize: 2, pageToken: token });
        expect(page.status).toBe(200);
        seen.push(...(page.body.secrets ?? []).map((s) => s.name));
        token = page.body.nextPageToken ?? "";
      }
      expect(seen).toEqual(byteOrder);
      const bad = await ask("ListEnvironmentSecrets", { environment: "Not An Env", pageToken: "garbage!" });
      expect(bad.status).toBe(400);
      expect(
        violations(bad.body)
          .map((v) => v.field)
          .sort(),
      ).toEqual(["environment", "page_token"]);
    });
  });

  describe("configuration", () => {
    test("history with actor, diff between revisions, and rollback that GET .../config then shows", async () => {
      // The route names an upstream; the revisions differ in one of its targets.
      const doc = (target: string) =>
        `version: 1\nupstreams:\n  - name: pool\n    targets:\n      - {url: http://127.0.0.1:8080}\n      - {url: ${target}}\nroutes:\n  - name: plants\n    path: /plants\n    upstream: pool\n`;
      const first = await applyOk(server, server.credentials.api_key, doc("http://127.0.0.1:8081"));
      const second = await applyOk(server, server.credentials.api_key, doc("http://127.0.0.1:9999"));
      const current = await ask<{ revision: number; yaml: string }>("GetConfigDocument");
      expect(current.body.revision).toBe(second.revision);
      expect(current.body.yaml).toBe((await exportOk(server, server.credentials.api_key)).yaml);

      const history = await ask<{ revisions: { revision: number; actor: string; updated?: string[]; created?: string[] }[] }>(
        "ListConfigHistory",
      );
      expect(history.body.revisions.map((r) => r.revision)).toEqual([second.revision, first.revision]);
      expect(history.body.revisions[0]?.actor).toContain("initial admin");
      expect(history.body.revisions[0]?.updated).toEqual(["upstreams/pool"]);

      const diff = await ask<{ hunks: { lines: { kind: string; text: string }[] }[]; added: number; removed: number }>(
        "DiffConfigRevisions",
        {
          fromRevision: first.revision,
          toRevision: second.revision,
        },
      );
      expect(diff.body).toMatchObject({ added: 1, removed: 1 });
      const changed = diff.body.hunks.flatMap((h) => h.lines).filter((l) => l.kind !== "DIFF_LINE_KIND_SAME");
      expect(changed.map((l) => [l.kind, l.text.trim()])).toEqual([
        ["DIFF_LINE_KIND_REMOVED", "- {url: http://127.0.0.1:8081}"],
        ["DIFF_LINE_KIND_ADDED", "- {url: http://127.0.0.1:9999}"],
      ]);
      expect((await ask("DiffConfigRevisions", { fromRevision: 0, toRevision: first.revision })).status).toBe(200);
      expect((await ask("DiffConfigRevisions", { fromRevision: 999, toRevision: first.revision })).status).toBe(404);

      const rolled = await ask<{ result: { revision: number } }>("RollbackConfigRevision", {
        revision: first.revision,
        expectedRevision: second.revision,
      });
      expect(rolled.status).toBe(200);
      expect(rolled.body.result.revision).toBe(second.revision + 1);
      const exported = await exportOk(server, server.credentials.api_key);
      expect(exported.revision).toBe(second.revision + 1);
      expect(exported.yaml).toContain("      - {url: http://127.0.0.1:8081}\n");
      const newest = await ask<{ revisions: { actor: string; source: string }[] }>("ListConfigHistory", { pageSize: 1 });
      expect(newest.body.revisions[0]).toMatchObject({
        source: `rollback:${first.revision}`,
        actor: expect.stringContaining("(dashboard)"),
      });

      const stale = await ask("RollbackConfigRevision", { revision: first.revision, expectedRevision: second.revision });
      expect(stale.status).toBe(400);
      expect(reason(stale.body)).toBe("revision_mismatch");
    });
  });

  describe("members", () => {
    test("an invited person creates their account from the invitation link, signs in, reads but cannot administer", async () => {
      const invited = await ask<{ invitationUrl: string; invitation: { invitationId: string; email: string; role: string } }>(
        "InviteMember",
        { email: "Member@Example.com", displayName: "Mia Member", role: "ROLE_MEMBER" },
      );
      expect(invited.status).toBe(200);
      expect(invited.body.invitation).toMatchObject({ email: "member@example.com", role: "ROLE_MEMBER" });
      expect(invited.body.invitationUrl).toMatch(
        new RegExp(`^${server.origin.replace(/[.]/g, "\\.")}/dashboard/invitation#token=[A-Za-z0-9_-]{43}$`),
      );
      const token = tokenOf(invited.body.invitationUrl);
      const inspect = await dashboardAuthRpc(server, "InspectInvitation", { token });
      expect(await inspect.json()).toMatchObject({
        organizationName: "Default organisation",
        email: "member@example.com",
        displayName: "Mia Member",
        role: "ROLE_MEMBER",
        invitedBy: "Olive Owner <owner@example.com>",
      });
      const { cookie: member, accountId } = await createInvitedAccount(server, token, "another good passphrase", "Mia Member");

      expect((await ask("ListApiKeys", {}, member)).status).toBe(200);
      expect((await ask("GetConfigDocument", {}, member)).status).toBe(200);
      for (const [method, body] of [
        ["CreateApiKey", { name: "nope", role: "ROLE_ADMIN" }],
        ["RotateIdentityKey", { kind: "IDENTITY_KEY_KIND_SECRET" }],
        ["InviteMember", { email: "x@example.com", displayName: "X", role: "ROLE_ADMIN" }],
        ["ReissueInvitation", { invitationId: invited.body.invitation.invitationId }],
        ["RevokeInvitation", { invitationId: invited.body.invitation.invitationId }],
        ["ListSecretEnvironments", {}],
      ] as const) {
        const response = await ask(method, body, member);
        expect({ method, status: response.status }).toEqual({ method, status: 403 });
      }
      const listed = await ask<{ members: { email: string; status: string }[] }>("ListMembers", {}, member);
      expect(listed.body.members).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ email: "member@example.com", status: "MEMBER_STATUS_ACTIVE" }),
          expect.objectContaining({ email: "owner@example.com", status: "MEMBER_STATUS_ACTIVE" }),
        ]),
      );
      expect(listed.body.members.some((m) => m.email.endsWith(".invalid"))).toBe(false);
      // Accepted, the invitation is no longer pending.
      const pending = await ask<{ invitations?: { email: string }[] }>("ListInvitations", {}, member);
      expect((pending.body.invitations ?? []).map((i) => i.email)).not.toContain("member@example.com");

      // Made admin, the member administers; removed, they are refused at once.
      const promoted = await ask("ChangeMemberRole", { accountId, role: "ROLE_ADMIN" });
      expect(promoted.status).toBe(200);
      expect((await ask("ListSecretEnvironments", {}, member)).status).toBe(200);
      expect((await ask("RemoveMember", { accountId })).status).toBe(200);
      expect((await ask("ListApiKeys", {}, member)).status).toBe(401);
      expect((await dashboardAuthRpc(server, "SignIn", { email: "member@example.com", password: "another good passphrase" })).status).toBe(
        401,
      );
    });

    test("a member cannot be invited again, nor a pending invitee a second time", async () => {
      const response = await ask("InviteMember", { email: "owner@example.com", displayName: "Again", role: "ROLE_ADMIN" });
      expect(response.status).toBe(409);
      expect(reason(response.body)).toBe("member_exists");
      expect(violations(response.body).map((v) => v.field)).toEqual(["email"]);
      await invite(server, owner, { email: "twice@example.com" });
      const twice = await ask("InviteMember", { email: "TWICE@example.com", displayName: "Again", role: "ROLE_ADMIN" });
      expect(twice.status).toBe(409);
      expect(reason(twice.body)).toBe("invitation_exists");
      expect(violations(twice.body).map((v) => v.field)).toEqual(["email"]);
    });

    test("an operator of another organisation joins it only by accepting its invitation, signed in as themselves", async () => {
      const other = await server.app.tenancy.createOrganization("Second organisation");
      const otherOwner = cookieOf(
        await dashboardAuthRpc(server, "SetUpAccount", {
          token: tokenOf(other.dashboardSetupUrl),
          email: "boss@example.org",
          display_name: "Bo Boss",
          password: "boss good passphrase",
        }),
      );
      const invited = await invite(server, otherOwner, { organizationId: other.organizationId, email: "owner@example.com" });
      // Invited is not joined: the organisation is not Olive's until she accepts.
      const before = await call<{ organizations: { organizationId: string }[] }>(server, owner, "GetOperatorSession", {});
      expect(before.body.organizations.map((o) => o.organizationId)).toEqual([org]);
      // The link's page cannot create an account that exists: she signs in instead.
      const create = await dashboardAuthRpc(server, "CreateInvitedAccount", {
        token: invited.token,
        display_name: "Olive",
        password: "some other passphrase",
      });
      expect(create.status).toBe(409);
      expect(reason((await create.json()) as ErrorBody)).toBe("account_exists");

      const accepted = await call<{ organization: { organizationId: string; name: string; role: string } }>(
        server,
        owner,
        "AcceptInvitation",
        // Joining replaces the password; the same one again keeps the other tests' sign-ins working.
        { token: invited.token, currentPassword: ownerPassword, newPassword: ownerPassword },
      );
      expect(accepted.status).toBe(200);
      expect(accepted.body.organization).toEqual({
        organizationId: other.organizationId,
        name: "Second organisation",
        role: "ROLE_MEMBER",
      });
      const session = await call<{ organizations: { organizationId: string; role: string }[] }>(server, owner, "GetOperatorSession", {});
      expect(session.body.organizations).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ organizationId: org, role: "ROLE_ADMIN" }),
          expect.objectContaining({ organizationId: other.organizationId, role: "ROLE_MEMBER" }),
        ]),
      );
      // The token works once.
      const again = await call(server, owner, "AcceptInvitation", {
        token: invited.token,
        currentPassword: ownerPassword,
        newPassword: ownerPassword,
      });
      expect(again.status).toBe(404);
      expect(reason(again.body)).toBe("invitation_not_found");
      // The other organisation's admin removes Olive there: she keeps her own organisation and her session.
      const me = await myAccountId(owner);
      expect((await call(server, otherOwner, "RemoveMember", { organizationId: other.organizationId, accountId: me })).status).toBe(200);
      expect((await call(server, owner, "ListApiKeys", { organizationId: other.organizationId })).status).toBe(404);
      expect((await ask("ListApiKeys")).status).toBe(200);
    });

    test("a person removed from every organisation is re-opened by a new invitation and sets a new password", async () => {
      const first = await addMember(server, owner, {
        email: "leaver@example.com",
        displayName: "Lee",
        password: "leaver first passphrase",
      });
      expect((await ask("RemoveMember", { accountId: first.accountId })).status).toBe(200);
      const again = await invite(server, owner, { email: "leaver@example.com", displayName: "Lee" });
      expect((await dashboardAuthRpc(server, "SignIn", { email: "leaver@example.com", password: "leaver first passphrase" })).status).toBe(
        401,
      );
      const reopened = await createInvitedAccount(server, again.token, "leaver second passphrase", "Lee Again");
      expect(reopened.accountId).toBe(first.accountId);
      expect((await dashboardAuthRpc(server, "SignIn", { email: "leaver@example.com", password: "leaver first passphrase" })).status).toBe(
        401,
      );
      expect((await dashboardAuthRpc(server, "SignIn", { email: "leaver@example.com", password: "leaver second passphrase" })).status).toBe(
        200,
      );
    });

    test("the last admin can be neither demoted nor removed", async () => {
      const me = await myAccountId(owner);
      const demote = await ask("ChangeMemberRole", { accountId: me, role: "ROLE_MEMBER" });
      expect(demote.status).toBe(400);
      expect(reason(demote.body)).toBe("last_admin");
      const remove = await ask("RemoveMember", { accountId: me });
      expect(remove.status).toBe(400);
      expect(reason(remove.body)).toBe("last_admin");
    });

    test("members and pending invitations come one page at a time in e-mail order, each once", async () => {
      for (const name of ["pager.z", "pager.a", "pager.m"]) {
        await addMember(server, owner, { email: `${name}@example.com`, displayName: name, password: "a pager passphrase" });
        await invite(server, owner, { email: `invited.${name}@example.com` });
      }
      for (const [method, list] of [
        ["ListMembers", "members"],
        ["ListInvitations", "invitations"],
      ] as const) {
        type Page = Record<string, { email: string }[] | string | undefined>;
        const rows = (page: Page) => (page[list] as { email: string }[] | undefined) ?? [];
        const whole = rows((await ask<Page>(method, { pageSize: 100 })).body).map((m) => m.email);
        expect(whole.length).toBeGreaterThan(2);
        const seen: string[] = [];
        let token = "";
        do {
          const page = await ask<Page>(method, { pageSize: 1, pageToken: token });
          seen.push(...rows(page.body).map((m) => m.email));
          token = (page.body.nextPageToken as string | undefined) ?? "";
        } while (token !== "" && seen.length <= whole.length);
        expect(seen).toEqual(whole);
        expect([...whole].sort()).toEqual(whole);
      }
      const otherList = await ask("ListInvitations", {
        pageToken: Buffer.from(JSON.stringify(["members", "a@example.com"])).toString("base64url"),
      });
      expect(otherList.status).toBe(400);
    });

    test("two admins demoting each other at once leave one admin", async () => {
      const second = await addMember(server, owner, {
        email: "second@example.com",
        displayName: "Second",
        role: "ROLE_ADMIN",
        password: "second good passphrase",
      });
      const me = await myAccountId(owner);
      const [a, b] = await Promise.all([
        ask("ChangeMemberRole", { accountId: second.accountId, role: "ROLE_MEMBER" }),
        ask("ChangeMemberRole", { accountId: me, role: "ROLE_MEMBER" }, second.cookie),
      ]);
      // One wins; the other is refused as the last admin (400) or, when it runs second, as no longer an admin (403).
      const statuses = [a.status, b.status].sort();
      expect(statuses[0]).toBe(200);
      expect([400, 403]).toContain(statuses[1]);
      const listed = await ask<{ members: { role: string }[] }>("ListMembers", { pageSize: 100 });
      expect(listed.body.members.filter((m) => m.role === "ROLE_ADMIN")).toHaveLength(1);
      // Back to the starting point for the other tests.
      const admins = await ask<{ members: { accountId: string; email: string; role: string }[] }>("ListMembers", { pageSize: 100 });
      const owners = admins.body.members.find((m) => m.email === "owner@example.com");
      if (owners?.role !== "ROLE_ADMIN") {
        await ask("ChangeMemberRole", { accountId: me, role: "ROLE_ADMIN" }, second.cookie);
        owner = await signIn(server, "owner@example.com", ownerPassword);
      }
    });
  });
});
