import { readFileSync } from "node:fs";
import { join } from "node:path";
import { hashToken } from "../../src/crypto/tokens.js";
import { createDashboardStore } from "../../src/storage/dashboard-store.js";
import { createTenancyStore } from "../../src/storage/tenancy-store.js";
import { connectCall, createApiKey } from "../support/credentials.js";
import { createManualClock, startTestServer, type TestServer } from "../support/server.js";

/**
 * Authentication keeps what it read about a key for a few seconds (CREDENTIAL_CACHE_MS).
 * Nothing that takes access away may wait for that: a revocation, rotation or
 * membership removal announced through the app reaches this instance and every
 * other instance sharing the database at once; only a write nobody announced
 * waits for the time to live.
 */
const manual = createManualClock();
let first: TestServer;
let second: TestServer;

beforeAll(async () => {
  first = await startTestServer({ clock: manual.clock });
  const masterKeyBase64 = readFileSync(join(first.db.dataDir, "master.key"), "utf8").trim();
  second = await startTestServer({ clock: manual.clock, db: first.db, masterKeyBase64 });
});
afterAll(async () => {
  await second.close();
  await first.close();
});

const org = () => first.credentials.organization_id;
const getConfig = (server: TestServer, bearer: string) => server.call(`/organization/${org()}/config`, { bearer });

async function reasonOf(response: Response): Promise<string | undefined> {
  const text = await response.text();
  if (response.ok) return undefined;
  return (JSON.parse(text) as { details?: { debug?: { reason?: string } }[]; reason?: string }).details?.[0]?.debug?.reason ?? text;
}

/** Polls until the server refuses the key (notifications between instances are prompt, not synchronous). */
async function refusedWithin(server: TestServer, bearer: string, ms: number): Promise<number> {
  const deadline = Date.now() + ms;
  for (;;) {
    const response = await getConfig(server, bearer);
    await response.arrayBuffer();
    if (response.status !== 200 || Date.now() > deadline) return response.status;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

test("a revoked key is refused at once by the instance that revoked it and promptly by every other", async () => {
  const key = await createApiKey(first, "member");
  // Both instances have now authenticated the key (and cached it).
  expect((await getConfig(first, key.apiKey)).status).toBe(200);
  expect((await getConfig(second, key.apiKey)).status).toBe(200);

  await createTenancyStore(first.app.database.client).revokeApiKey(key.id, manual.clock());
  await first.app.credentialsChanged();

  const here = await getConfig(first, key.apiKey);
  expect(here.status).toBe(401);
  expect(await here.text()).toContain("credential_revoked");
  expect(await refusedWithin(second, key.apiKey, 5_000)).toBe(401);
});

test("a revocation nobody announced still takes effect once the time to live has passed", async () => {
  const key = await createApiKey(first, "member");
  expect((await getConfig(first, key.apiKey)).status).toBe(200);
  // Written behind the app's back, as an operator command in another process on SQLite would.
  await createTenancyStore(first.app.database.client).revokeApiKey(key.id, manual.clock());
  // Within the time to live the cached key is trusted: this is what the announcements above are for.
  expect((await getConfig(first, key.apiKey)).status).toBe(200);
  manual.advance(first.app.config.credentialCacheMs + 1);
  expect((await getConfig(first, key.apiKey)).status).toBe(401);
});

test("removing an account's membership is announced: its key gets 404 for that organisation on every instance", async () => {
  const key = await createApiKey(first, "member");
  expect((await getConfig(first, key.apiKey)).status).toBe(200);
  expect((await getConfig(second, key.apiKey)).status).toBe(200);
  const record = await createTenancyStore(first.app.database.client).findApiKeyByHash(hashToken(key.apiKey));
  await createDashboardStore(first.app.database.client).removeMembership(org(), record?.accountId ?? "");
  await first.app.credentialsChanged();
  expect((await getConfig(first, key.apiKey)).status).toBe(404);
  expect(await refusedWithin(second, key.apiKey, 5_000)).toBe(404);
});

test("a key is never hidden by an earlier refusal: a membership added after a 404 works at once", async () => {
  const other = await first.app.tenancy.createOrganization("Later membership");
  const key = await createApiKey(first, "member");
  const refused = await first.call(`/organization/${other.organizationId}/config`, { bearer: key.apiKey });
  expect(refused.status).toBe(404);
  const record = await createTenancyStore(first.app.database.client).findApiKeyByHash(hashToken(key.apiKey));
  await createTenancyStore(first.app.database.client).addMembership({
    organizationId: other.organizationId,
    accountId: record?.accountId ?? "",
    role: "member",
  });
  expect((await first.call(`/organization/${other.organizationId}/config`, { bearer: key.apiKey })).status).toBe(200);
});

test("rotating the secret key refuses the old one on every instance", async () => {
  const old = await first.app.tenancy.rotateOrganizationKey(org(), "secret");
  const validate = (server: TestServer, bearer: string) =>
    connectCall(server, "/svc.v1.IdentityService/ValidateSession", { token: "not-a-session" }, bearer);
  const before = [await reasonOf(await validate(first, old)), await reasonOf(await validate(second, old))];
  expect(before).not.toContain("credential_revoked");

  const fresh = await first.app.tenancy.rotateOrganizationKey(org(), "secret");
  expect(await (await validate(first, old)).text()).toContain("credential_revoked");
  const deadline = Date.now() + 5_000;
  let text = "";
  while (Date.now() < deadline) {
    text = await (await validate(second, old)).text();
    if (text.includes("credential_revoked")) break;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  expect(text).toContain("credential_revoked");
  expect(await (await validate(second, fresh)).text()).not.toContain("credential_revoked");
});

test("with the cache, a key's last use is still recorded", async () => {
  const key = await createApiKey(first, "member");
  for (let i = 0; i < 3; i++) expect((await getConfig(first, key.apiKey)).status).toBe(200);
  await new Promise((resolve) => setTimeout(resolve, 50));
  const keys = await createTenancyStore(first.app.database.client).listApiKeys(org());
  expect(keys.find((k) => k.id === key.id)?.lastUsedAt?.getTime()).toBe(manual.clock().getTime());
});
