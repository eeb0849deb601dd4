import { constants, createCipheriv, generateKeyPairSync, publicEncrypt, randomBytes } from "node:crypto";
import { createTenancyStore } from "../../src/storage/tenancy-store.js";
import { connectCall, createApiKey, createOtherOrganization } from "../support/credentials.js";
import { createClientKeyPair, errorOf, sealHybrid, sealPlain, secretsApi } from "../support/secrets-client.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * Every refusal of the secrets API: plaintext, values that are not sealed to
 * the organisation key, names, environments and tags outside their patterns,
 * oversize values, bad client keys, and every credential and role case. A
 * refused write stores nothing.
 */
let server: TestServer;
let api: ReturnType<typeof secretsApi>;
let pem: string;
let other: Awaited<ReturnType<typeof createOtherOrganization>>;
let otherPem: string;

beforeAll(async () => {
  server = await startTestServer();
  api = secretsApi(server, server.credentials.api_key);
  other = await createOtherOrganization(server);
  [pem, otherPem] = await Promise.all([api.pem(), secretsApi(server, other.adminKey, other.organizationId).pem()]);
});
afterAll(() => server.close());

const base = () => ({ name: "REFUSED", environment: "refusals", sealed: true, tags: [] as string[] });

async function expectNothingStored() {
  expect(await api.list("refusals")).toEqual([]);
  const client = server.app.database.client;
  expect(await client.secret.count({ where: { organizationId: server.credentials.organization_id } })).toBe(0);
  expect(await client.secretAuditEvent.count({ where: { organizationId: server.credentials.organization_id, action: "write" } })).toBe(0);
}

function hybridWith(parts: { block?: Buffer; aesKey?: Buffer; tamper?: boolean; value?: Buffer }): string {
  const aesKey = parts.aesKey ?? randomBytes(32);
  const iv = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", aesKey, iv);
  const body = Buffer.concat([cipher.update(parts.value ?? Buffer.from("hybrid value")), cipher.final()]);
  const tag = cipher.getAuthTag();
  if (parts.tamper) tag[0] = (tag[0] as number) ^ 1;
  const block = parts.block ?? publicEncrypt({ key: pem, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha256" }, aesKey);
  return Buffer.concat([block, iv, body, tag]).toString("base64");
}

describe("a write that is not a sealed value is refused with 400 and stores nothing", () => {
  test.each([
    {
      label: "sealed: false",
      body: () => ({ ...base(), sealed: false, encrypted_value: sealPlain(pem, "v") }),
      reason: "plaintext_refused",
      fields: ["sealed"],
      says: /must be true/,
    },
    {
      label: "sealed missing",
      body: () => ({ name: "REFUSED", environment: "refusals", encrypted_value: sealPlain(pem, "v") }),
      reason: "plaintext_refused",
      fields: ["sealed"],
      says: /is required and must be true/,
    },
    {
      label: "a value field beside a sealed value",
      body: () => ({ ...base(), encrypted_value: sealPlain(pem, "v"), value: "plain-text-secret" }),
      reason: "plaintext_refused",
      fields: ["value"],
      says: /plaintext values are refused/,
    },
    {
      label: "a plaintext value alone",
      body: () => ({ name: "REFUSED", environment: "refusals", value: "plain-text-secret" }),
      reason: "plaintext_refused",
      fields: ["sealed", "value", "encrypted_value"],
      says: /plaintext values are refused/,
    },
    {
      label: "encrypted_value that is not base64",
      body: () => ({ ...base(), encrypted_value: "not base64 at all!" }),
      reason: "value_not_sealed",
      fields: ["encrypted_value"],
      says: /is not base64/,
    },
    {
      label: "a plaintext value in encrypted_value",
      body: () => ({ ...base(), encrypted_value: Buffer.from("plain-text-secret").toString("base64") }),
      reason: "value_not_sealed",
      fields: ["encrypted_value"],
      says: /is 17 bytes after base64 decoding/,
    },
    {
      label: "512 random bytes",
      body: () => ({ ...base(), encrypted_value: randomBytes(512).toString("base64") }),
      reason: "value_not_sealed",
      fields: ["encrypted_value"],
      says: /does not decrypt with the organisation's key .*RSA-OAEP with SHA-256/,
    },
    {
      label: "PKCS#1 v1.5 padding instead of OAEP",
      body: () => ({
        ...base(),
        encrypted_value: publicEncrypt({ key: pem, padding: constants.RSA_PKCS1_PADDING }, Buffer.from("v")).toString("base64"),
      }),
      reason: "value_not_sealed",
      fields: ["encrypted_value"],
      says: /not PKCS#1 v1.5/,
    },
    {
      label: "OAEP with SHA-1",
      body: () => ({
        ...base(),
        encrypted_value: publicEncrypt(
          { key: pem, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha1" },
          Buffer.from("v"),
        ).toString("base64"),
      }),
      reason: "value_not_sealed",
      fields: ["encrypted_value"],
      says: /not SHA-1/,
    },
    {
      label: "a value sealed to another organisation's key",
      body: () => ({ ...base(), encrypted_value: sealPlain(otherPem, "v") }),
      reason: "value_not_sealed",
      fields: ["encrypted_value"],
      says: /does not decrypt/,
    },
    {
      label: "hybrid whose GCM tag was altered",
      body: () => ({ ...base(), encrypted_value: hybridWith({ tamper: true }) }),
      reason: "value_not_sealed",
      fields: ["encrypted_value"],
      says: /AES-256-GCM part does not authenticate/,
    },
    {
      label: "hybrid whose RSA block holds a 16-byte key",
      body: () => ({
        ...base(),
        encrypted_value: hybridWith({
          block: publicEncrypt({ key: pem, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha256" }, randomBytes(16)),
        }),
      }),
      reason: "value_not_sealed",
      fields: ["encrypted_value"],
      says: /holds 16 bytes instead of a 32-byte AES-256 key/,
    },
    {
      label: "hybrid with a value of 64 KiB + 1 byte",
      body: () => ({ ...base(), encrypted_value: sealHybrid(pem, Buffer.alloc(64 * 1024 + 1, 0x61)) }),
      reason: "value_not_sealed",
      fields: ["encrypted_value"],
      says: /65537-byte value; values are limited to 65536 bytes/,
    },
    {
      label: "a value that is not UTF-8",
      body: () => ({ ...base(), encrypted_value: sealPlain(pem, Buffer.from([0xff, 0xfe, 0x00, 0xc3])) }),
      reason: "value_not_sealed",
      fields: ["encrypted_value"],
      says: /not UTF-8/,
    },
    {
      label: "name, environment and tags outside their patterns, all reported at once",
      body: () => ({
        ...base(),
        name: "1BAD NAME",
        environment: "Prod",
        tags: ["ok", "Not-OK", ...Array.from({ length: 32 }, (_, i) => `t${i}`)],
        encrypted_value: sealPlain(pem, "v"),
      }),
      reason: "invalid_argument",
      fields: ["name", "environment", "tags[1]", "tags"],
      says: /\^\[A-Za-z_\]\[A-Za-z0-9_.-\]\{0,127\}\$/,
    },
    {
      label: "a name of 129 characters and an empty environment",
      body: () => ({ ...base(), name: `N${"x".repeat(128)}`, environment: "", encrypted_value: sealPlain(pem, "v") }),
      reason: "invalid_argument",
      fields: ["name", "environment"],
      says: /is not a valid secret name/,
    },
  ])("$label", async ({ body, reason, fields, says }) => {
    const error = await errorOf(await api.putResponse(body()));
    expect(error).toMatchObject({ status: 400, code: "invalid_argument", reason });
    expect(error.violations.map((v) => v.field)).toEqual(fields);
    expect(error.message).toMatch(says);
    expect(error.text).not.toContain("plain-text-secret");
    await expectNothingStored();
  });

  test("a body over the JSON limit is 413", async () => {
    const response = await api.putResponse({ ...base(), encrypted_value: randomBytes(1024 * 1024).toString("base64") });
    expect(response.status).toBe(413);
    expect((await errorOf(response)).code).toBe("resource_exhausted");
    await expectNothingStored();
  });

  test("an unknown field is refused", async () => {
    const error = await errorOf(await api.putResponse({ ...base(), encrypted_value: sealPlain(pem, "v"), secret: "x" }));
    expect(error).toMatchObject({ status: 400, code: "invalid_argument" });
    await expectNothingStored();
  });

  test("the Connect path refuses plaintext the same way", async () => {
    const response = await connectCall(
      server,
      "/svc.v1.SecretsService/PutSecret",
      {
        organizationId: server.credentials.organization_id,
        name: "REFUSED",
        environment: "refusals",
        value: "plain-text-secret",
        sealed: false,
      },
      server.credentials.api_key,
    );
    const error = await errorOf(response);
    expect(error).toMatchObject({ status: 400, code: "invalid_argument", reason: "plaintext_refused" });
    expect(error.violations.map((v) => v.field)).toEqual(["sealed", "value", "encrypted_value"]);
    await expectNothingStored();
  });

  test("no refused value reaches the log", () => {
    expect(server.logs.join("\n")).not.toContain("plain-text-secret");
  });
});

describe("a retrieve with a bad client key is refused with 400", () => {
  const rsa1024 = () => generateKeyPairSync("rsa", { modulusLength: 1024 }).publicKey.export({ type: "spki", format: "pem" }).toString();
  test.each([
    { label: "no key", key: () => "", says: /is required/ },
    { label: "text that is not a key", key: () => "hello", says: /SPKI PEM/ },
    { label: "a broken SPKI PEM", key: () => "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", says: /not a readable/ },
    {
      label: "a private key",
      key: () => createClientKeyPair(2048).privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
      says: /SPKI PEM/,
    },
    { label: "a 1024-bit RSA key", key: rsa1024, says: /1024-bit RSA key; send one of 2048/ },
    {
      label: "an EC key",
      key: () => generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({ type: "spki", format: "pem" }).toString(),
      says: /ec key/,
    },
    {
      label: "an RSA-PSS key",
      key: () => generateKeyPairSync("rsa-pss", { modulusLength: 2048 }).publicKey.export({ type: "spki", format: "pem" }).toString(),
      says: /RSA-PSS/,
    },
  ])("$label", async ({ key, says }) => {
    const error = await errorOf(await api.retrieveResponse({ environment: "refusals", public_key_pem: key() }));
    expect(error).toMatchObject({ status: 400, code: "invalid_argument" });
    expect(error.violations.map((v) => v.field)).toEqual(["public_key_pem"]);
    expect(error.message).toMatch(says);
  });

  test("a PKCS#1 RSA public key, with how to convert it", async () => {
    const { publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
    const error = await errorOf(
      await api.retrieveResponse({
        environment: "refusals",
        public_key_pem: publicKey.export({ type: "pkcs1", format: "pem" }).toString(),
      }),
    );
    expect(error.message).toMatch(/PKCS#1 key \(BEGIN RSA PUBLIC KEY\); send it as SPKI PEM/);
  });

  test("environment, names and tags are checked too, all at once", async () => {
    const error = await errorOf(
      await api.retrieveResponse({ environment: "", names: ["ok", "bad name"], tags: ["BAD"], public_key_pem: "x" }),
    );
    expect(error.status).toBe(400);
    expect(error.violations.map((v) => v.field)).toEqual(["environment", "names[1]", "tags[0]", "public_key_pem"]);
  });
});

describe("credentials and roles on every secrets endpoint", () => {
  let memberKey: string;
  let revokedKey: string;
  beforeAll(async () => {
    memberKey = (await createApiKey(server, "member")).apiKey;
    const revoked = await createApiKey(server, "admin");
    await createTenancyStore(server.app.database.client).revokeApiKey(revoked.id, new Date());
    revokedKey = revoked.apiKey;
  });

  const org = () => server.credentials.organization_id;
  const endpoints: { label: string; call: (bearer: string | undefined, organizationId: string) => Promise<Response> }[] = [
    { label: "REST GET public-key", call: (bearer, id) => server.call(`/organization/${id}/secrets/public-key`, bearer ? { bearer } : {}) },
    {
      label: "REST PUT secrets",
      call: (bearer, id) =>
        server.call(`/organization/${id}/secrets`, {
          method: "PUT",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ ...base(), encrypted_value: sealPlain(pem, "v") }),
          ...(bearer ? { bearer } : {}),
        }),
    },
    { label: "REST GET secrets", call: (bearer, id) => server.call(`/organization/${id}/secrets?env=refusals`, bearer ? { bearer } : {}) },
    {
      label: "REST POST retrieve",
      call: (bearer, id) =>
        server.call(`/organization/${id}/secrets/retrieve`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ environment: "refusals", public_key_pem: createClientKeyPairCached() }),
          ...(bearer ? { bearer } : {}),
        }),
    },
    {
      label: "REST DELETE secret",
      call: (bearer, id) => server.call(`/organization/${id}/secrets/X?env=refusals`, { method: "DELETE", ...(bearer ? { bearer } : {}) }),
    },
    ...["GetPublicKey", "PutSecret", "ListSecrets", "RetrieveSecrets", "DeleteSecret", "ListSecretVersions", "ListSecretAuditEvents"].map(
      (method) => ({
        label: `Connect ${method}`,
        call: (bearer: string | undefined, id: string) =>
          connectCall(server, `/svc.v1.SecretsService/${method}`, { organizationId: id }, bearer),
      }),
    ),
  ];

  const cases: { label: string; bearer: () => string | undefined; org: () => string; status: number; reason: string }[] = [
    { label: "no credential", bearer: () => undefined, org, status: 401, reason: "credential_missing" },
    { label: "malformed credential", bearer: () => "Basic abc", org, status: 401, reason: "credential_malformed" },
    { label: "unknown API key", bearer: () => `gk_${"A".repeat(43)}`, org, status: 401, reason: "credential_unknown" },
    { label: "revoked API key", bearer: () => revokedKey, org, status: 401, reason: "credential_revoked" },
    { label: "publishable key", bearer: () => server.credentials.publishable_key, org, status: 403, reason: "wrong_credential_kind" },
    { label: "secret key", bearer: () => server.credentials.secret_key, org, status: 403, reason: "wrong_credential_kind" },
    { label: "member API key", bearer: () => memberKey, org, status: 403, reason: "role_insufficient" },
    { label: "admin of another organisation", bearer: () => other.adminKey, org, status: 404, reason: "organization_not_found" },
    {
      label: "organisation that does not exist",
      bearer: () => server.credentials.api_key,
      org: () => "00000000-0000-4000-8000-000000000000",
      status: 404,
      reason: "organization_not_found",
    },
  ];

  test.each(endpoints.map((e) => [e.label, e] as const))("%s", async (_label, endpoint) => {
    for (const c of cases) {
      const error = await errorOf(await endpoint.call(c.bearer(), c.org()));
      expect({ case: c.label, status: error.status, reason: error.reason }).toEqual({ case: c.label, status: c.status, reason: c.reason });
    }
    await expectNothingStored();
  });
});

let cachedClientPem: string | undefined;
function createClientKeyPairCached(): string {
  cachedClientPem ??= createClientKeyPair(2048).publicKeyPem;
  return cachedClientPem;
}
