import { Validator } from "@seriousme/openapi-schema-validator";
import { randomUUID } from "node:crypto";
import { createPlatformOpenApi } from "../../src/rest/openapi/platform-openapi.js";
import { restRoutes } from "../../src/rest/routes.js";
import { createApiKey } from "../support/credentials.js";
import { enablePasswords, goodPassword, newIdentifier } from "../support/identity-client.js";
import { createSchemaChecker, deref, escapePointer, operationById, type Json, type JsonObject } from "../support/openapi-document.js";
import { createClientKeyPair, sealPlain } from "../support/secrets-client.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * GET /openapi.json on the platform port, and the document against the real
 * server: requests built from the documented parameters and body schemas get
 * answers whose status, media type, headers and body the document describes.
 */
const publicUrl = "https://gatehouse.example.com";
let server: TestServer;
let document: JsonObject;
let checker: ReturnType<typeof createSchemaChecker>;
let served: Response;
let servedText: string;

beforeAll(async () => {
  server = await startTestServer({ env: { PUBLIC_URL: publicUrl } });
  served = await server.call("/openapi.json");
  servedText = await served.text();
  document = JSON.parse(servedText) as JsonObject;
  checker = createSchemaChecker(document);
});
afterAll(() => server.close());

describe("GET /openapi.json", () => {
  test("serves the document built at start: OpenAPI 3.1 that the validator accepts, naming PUBLIC_URL", async () => {
    expect(served.status).toBe(200);
    expect(served.headers.get("content-type")).toBe("application/json");
    expect(document.openapi).toBe("3.1.0");
    expect(document.servers).toEqual([{ url: publicUrl, description: expect.any(String) }]);
    const validator = new Validator();
    const result = await validator.validate(structuredClone(document) as Record<string, unknown>);
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    const config = server.app.config;
    const version = (document.info as JsonObject).version as string;
    expect(version).toMatch(/^\d+\.\d+\.\d+/);
    expect(servedText).toBe(
      JSON.stringify(createPlatformOpenApi({ routes: restRoutes, publicUrl: config.publicUrl, limits: config.limits, version })),
    );
  });

  test("carries a strong ETag of its bytes and cache headers; a client holding it revalidates with If-None-Match and gets 304", async () => {
    const etag = served.headers.get("etag");
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{43}"$/);
    expect(served.headers.get("cache-control")).toBe("public, max-age=300");
    expect(served.headers.get("access-control-allow-origin")).toBe("*");
    const again = await server.call("/openapi.json");
    expect(again.headers.get("etag")).toBe(etag);
    expect(await again.text()).toBe(servedText);

    for (const ifNoneMatch of [etag!, `W/${etag}`, `"other", ${etag}`, "*"]) {
      const cached = await server.call("/openapi.json", { headers: { "if-none-match": ifNoneMatch } });
      expect({ ifNoneMatch, status: cached.status, body: await cached.text(), etag: cached.headers.get("etag") }).toEqual({
        ifNoneMatch,
        status: 304,
        body: "",
        etag,
      });
    }
    const stale = await server.call("/openapi.json", { headers: { "if-none-match": '"an-older-document"' } });
    expect(stale.status).toBe(200);
    expect(await stale.text()).toBe(servedText);
  });

  test("HEAD has the headers without the body; other methods are 405 with Allow and the error body", async () => {
    const head = await server.call("/openapi.json", { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("etag")).toBe(served.headers.get("etag"));
    expect(head.headers.get("content-length")).toBe(String(Buffer.byteLength(servedText)));
    expect(await head.text()).toBe("");
    for (const method of ["POST", "PUT", "DELETE"]) {
      const refused = await server.call("/openapi.json", { method, body: method === "DELETE" ? undefined : "{}" });
      expect({ method, status: refused.status, allow: refused.headers.get("allow") }).toEqual({ method, status: 405, allow: "GET, HEAD" });
      expect(checker.errors("#/components/responses/MethodNotAllowed/content/application~1json/schema", await refused.json())).toEqual([]);
    }
  });

  test("needs no credential, and ignores one", async () => {
    const withKey = await server.call("/openapi.json", { bearer: "not-a-key" });
    expect(withKey.status).toBe(200);
    expect(await withKey.text()).toBe(servedText);
  });
});

/** A request described in the document's words: parameters by name, a body by property names. */
interface Example {
  params?: Record<string, string>;
  query?: Record<string, string | string[] | boolean>;
  /** Documented header parameters (If-Match). */
  headers?: Record<string, string>;
  bearer?: string;
  /** JSON bodies: values by documented property name; YAML bodies: the text. */
  body?: Record<string, Json> | string;
  /** The documented media type to send (the first documented one by default). */
  mediaType?: string;
  /** What is deliberately outside the document, to provoke a documented error. */
  undocumented?: { query?: string; contentType?: string };
}

interface Answer {
  status: number;
  headers: Headers;
  body: Json | string;
}

/** Which documented statuses the examples reached, per operation. */
const reached = new Map<string, Set<string>>();

const pointerOf = (segments: string[]) => `#/${segments.map((s) => encodeURIComponent(escapePointer(s))).join("/")}`;

/** Builds a JSON body from the documented schema: only documented properties, in the document's order. */
function bodyFromSchema(schema: JsonObject, values: Record<string, Json>): { body: Record<string, Json>; branch: number | undefined } {
  const branches = (schema.oneOf as JsonObject[] | undefined) ?? [schema];
  const index = branches.findIndex((b) => Object.keys(values).every((name) => name in (b.properties as JsonObject)));
  const chosen = branches[index];
  if (!chosen) throw new Error(`no documented body has the properties ${Object.keys(values).join(", ")}`);
  const body: Record<string, Json> = {};
  for (const name of Object.keys(chosen.properties as JsonObject)) if (name in values) body[name] = values[name] as Json;
  return { body, branch: schema.oneOf ? index : undefined };
}

/** Calls an operation as the document describes it and checks that the document describes the answer. */
async function call(operationId: string, example: Example = {}): Promise<Answer> {
  const { path, method, operation } = operationById(document, operationId);
  const parameters = ((operation.parameters ?? []) as JsonObject[]).map((p) => deref(document, p));
  const documented = (where: string, name: string) => {
    const parameter = parameters.find((p) => p.in === where && String(p.name).toLowerCase() === name.toLowerCase());
    if (!parameter) throw new Error(`${operationId} documents no ${where} parameter ${name}`);
    return parameter;
  };
  let url = path.replace(/\{(\w+)\}/g, (_m, name: string) => {
    documented("path", name);
    const value = example.params?.[name];
    if (value === undefined) throw new Error(`${operationId}: no value for {${name}}`);
    return encodeURIComponent(value);
  });
  const query: string[] = [];
  for (const parameter of parameters.filter((p) => p.in === "query" && p.required === true)) {
    if (example.query?.[parameter.name as string] === undefined)
      throw new Error(`${operationId}: the required query parameter ${parameter.name} is missing`);
  }
  for (const [name, value] of Object.entries(example.query ?? {})) {
    const parameter = documented("query", name);
    // style form, explode false: a list is one comma-separated value.
    const text = Array.isArray(value) ? value.join(",") : String(value);
    expect(
      checker.errors(pointerOf(["paths", path, method, "parameters", String(parameters.indexOf(parameter)), "schema"]), value),
    ).toEqual([]);
    query.push(`${encodeURIComponent(name)}=${encodeURIComponent(text)}`);
  }
  if (example.undocumented?.query) query.push(example.undocumented.query);
  if (query.length > 0) url += `?${query.join("&")}`;

  const headers = new Headers();
  for (const [name, value] of Object.entries(example.headers ?? {})) {
    documented("header", name);
    headers.set(name, value);
  }
  let body: string | undefined;
  if (example.body !== undefined) {
    const requestBody = deref(document, operation.requestBody as Json);
    const content = requestBody.content as Record<string, JsonObject>;
    const mediaType = example.mediaType ?? (Object.keys(content)[0] as string);
    const at = ["paths", path, method, "requestBody", "content", mediaType, "schema"];
    if (!content[mediaType]) throw new Error(`${operationId} documents no ${mediaType} body`);
    if (typeof example.body === "string") {
      expect(checker.errors(pointerOf(at), example.body)).toEqual([]);
      body = example.body;
    } else {
      const built = bodyFromSchema(content[mediaType]!.schema as JsonObject, example.body);
      expect(checker.errors(pointerOf(at), built.body)).toEqual([]);
      body = JSON.stringify(built.body);
    }
    headers.set("content-type", example.undocumented?.contentType ?? mediaType);
  }
  if (example.bearer !== undefined) {
    expect((operation.security as JsonObject[]).length).toBeGreaterThan(0);
    headers.set("authorization", `Bearer ${example.bearer}`);
  }
  const response = await fetch(server.url + url, { method: method.toUpperCase(), headers, ...(body !== undefined ? { body } : {}) });
  const text = await response.text();
  const status = String(response.status);
  const answered = `${operationId} answered ${status}: ${text.slice(0, 300)}`;

  // The status is documented for the operation; its media type, headers and body are as documented.
  const raw = (operation.responses as JsonObject)[status];
  expect({ answered, documented: raw !== undefined }).toEqual({ answered, documented: true });
  const documentedAnswer = deref(document, raw);
  for (const [name, header] of Object.entries((documentedAnswer.headers ?? {}) as JsonObject)) {
    if (deref(document, header).required === true)
      expect({ answered, header: name, present: response.headers.has(name) }).toEqual({ answered, header: name, present: true });
  }
  let parsed: Json | string = text;
  const content = documentedAnswer.content as Record<string, JsonObject> | undefined;
  if (content) {
    const mediaType = (response.headers.get("content-type") ?? "").split(";")[0]!.trim();
    expect({ answered, mediaType, documented: mediaType in content }).toEqual({ answered, mediaType, documented: true });
    const schemaAt =
      typeof raw === "object" && raw !== null && !Array.isArray(raw) && typeof raw.$ref === "string"
        ? `${raw.$ref}/content/${encodeURIComponent(escapePointer(mediaType))}/schema`
        : pointerOf(["paths", path, method, "responses", status, "content", mediaType, "schema"]);
    parsed = mediaType === "application/json" ? (JSON.parse(text) as Json) : text;
    expect({ answered, errors: checker.errors(schemaAt, parsed) }).toEqual({ answered, errors: [] });
  }
  const statuses = reached.get(operationId) ?? new Set<string>();
  statuses.add(status);
  reached.set(operationId, statuses);
  return { status: response.status, headers: response.headers, body: parsed };
}

const field = (answer: Answer, name: string) => (answer.body as JsonObject)[name];

describe("requests built from the document get the documented answers", () => {
  let org: string;
  let admin: string;
  beforeAll(() => {
    org = server.credentials.organization_id;
    admin = server.credentials.api_key;
  });

  test("probes", async () => {
    expect((await call("getHealthz")).body).toEqual({ status: "SERVING" });
    expect((await call("getReadyz")).body).toEqual({ status: "SERVING" });
    expect((await call("getHealthz", { undocumented: { query: "verbose=1" } })).status).toBe(400);
  });

  test("secrets: public key, store, list, retrieve, delete, and the credential and not-found refusals", async () => {
    const key = await call("getPublicKey", { params: { organization_id: org }, bearer: admin });
    expect(key.status).toBe(200);
    const pem = field(key, "public_key_pem") as string;
    const put = await call("putSecret", {
      params: { organization_id: org },
      bearer: admin,
      body: {
        name: "DATABASE_URL",
        environment: "production",
        encrypted_value: sealPlain(pem, "postgres://app@db/app"),
        sealed: true,
        tags: ["db"],
      },
    });
    expect(put.status).toBe(200);
    expect(field(put, "version")).toBe(1);
    const list = await call("listSecrets", { params: { organization_id: org }, bearer: admin, query: { env: "production", tags: ["db"] } });
    expect((field(list, "secrets") as JsonObject[]).map((s) => s.name)).toEqual(["DATABASE_URL"]);
    const client = createClientKeyPair();
    const retrieved = await call("retrieveSecrets", {
      params: { organization_id: org },
      bearer: admin,
      body: { environment: "production", names: ["DATABASE_URL"], public_key_pem: client.publicKeyPem },
    });
    expect(retrieved.status).toBe(200);
    const missing = await call("retrieveSecrets", {
      params: { organization_id: org },
      bearer: admin,
      body: { environment: "production", names: ["NOPE"], public_key_pem: client.publicKeyPem },
    });
    expect(missing.status).toBe(404);

    expect((await call("putSecret", { params: { organization_id: org }, body: { name: "X", environment: "production" } })).status).toBe(
      401,
    );
    expect(
      (await call("putSecret", { params: { organization_id: org }, bearer: server.credentials.publishable_key, body: { name: "X" } }))
        .status,
    ).toBe(403);
    const member = await createApiKey(server, "member");
    expect((await call("getPublicKey", { params: { organization_id: org }, bearer: member.apiKey })).status).toBe(403);
    expect((await call("getPublicKey", { params: { organization_id: randomUUID() }, bearer: admin })).status).toBe(404);
    expect(
      (
        await call("listSecrets", {
          params: { organization_id: org },
          bearer: admin,
          query: { env: "production" },
          undocumented: { query: "tag=db" },
        })
      ).status,
    ).toBe(400);

    // A secret the configuration references cannot be deleted (409); once the reference is gone it can (200), once (then 404).
    const referencing = [
      "version: 1",
      "plugins:",
      "  - name: db-header",
      "    type: request-headers",
      `    config: {set: {x-db: '\${secret:production/DATABASE_URL}'}}`,
      "routes:",
      "  - name: db",
      "    path: /db",
      "    upstream: http://127.0.0.1:9",
      "    plugins: [db-header]",
      "",
    ].join("\n");
    expect((await call("applyConfig", { params: { organization_id: org }, bearer: admin, body: referencing })).status).toBe(200);
    const remove = { params: { organization_id: org, name: "DATABASE_URL" }, bearer: admin, query: { env: "production" } };
    expect((await call("deleteSecret", remove)).status).toBe(409);
    expect(
      (await call("applyConfig", { params: { organization_id: org }, bearer: admin, query: { strict: true }, body: "version: 1\n" }))
        .status,
    ).toBe(200);
    expect((await call("deleteSecret", remove)).status).toBe(200);
    expect((await call("deleteSecret", remove)).status).toBe(404);
  });

  test("configuration: YAML in every documented media type, the ETag, If-Match, dry runs, and the refusals", async () => {
    const document = [
      "version: 1",
      "plugins:",
      "  - name: rl-default",
      "    type: rate-limit",
      "    config: {requests: 100, window_seconds: 60}",
      "routes:",
      "  - name: create-plant",
      "    path: /plants",
      "    methods: [POST]",
      "    upstream: http://127.0.0.1:8081",
      "    plugins: [rl-default]",
      "",
    ].join("\n");
    const params = { organization_id: server.credentials.organization_id };
    const bearer = server.credentials.api_key;
    for (const mediaType of ["application/yaml", "application/x-yaml", "text/yaml"]) {
      expect((await call("applyConfig", { params, bearer, body: document, mediaType })).status).toBe(200);
    }
    const exported = await call("getConfig", { params, bearer });
    expect(exported.status).toBe(200);
    expect(exported.body).toContain("name: create-plant");
    const etag = exported.headers.get("etag")!;
    expect(etag).toMatch(/^"\d+"$/);
    const dryRun = await call("applyConfig", {
      params,
      bearer,
      body: "version: 1\n",
      query: { strict: true, dry_run: true },
      headers: { "If-Match": etag },
    });
    expect(field(dryRun, "applied")).toBe(false);
    expect((await call("applyConfig", { params, bearer, body: document, headers: { "If-Match": '"999999"' } })).status).toBe(412);
    expect((await call("applyConfig", { params, bearer, body: document, undocumented: { contentType: "text/plain" } })).status).toBe(415);
    expect((await call("applyConfig", { params, bearer, body: document, undocumented: { query: "dryrun=true" } })).status).toBe(400);
    expect((await call("applyConfig", { params, bearer, body: "version: 1\nroutes: [{name: Bad_Name}]\n" })).status).toBe(400);
    expect((await call("getConfig", { params })).headers.get("www-authenticate")).toMatch(/^Bearer/);
    expect((await call("getConfig", { params, bearer: server.credentials.secret_key })).status).toBe(403);
  });

  test("identity: register, log in and reset by password on both path families, and the refusals", async () => {
    const pk = server.credentials.publishable_key;
    const sk = server.credentials.secret_key;
    const identifier = newIdentifier("openapi");
    // Password authentication is off by default: 403, as documented.
    expect((await call("registerPassword", { bearer: pk, body: { identifier, password: goodPassword } })).status).toBe(403);
    await enablePasswords(server);
    const registered = await call("registerPassword", { bearer: pk, body: { identifier, password: goodPassword } });
    expect(registered.status).toBe(200);
    expect((await call("registerPassword", { bearer: pk, body: { identifier, password: goodPassword } })).status).toBe(409);
    const email = newIdentifier("openapi-v1");
    expect((await call("registerPasswordV1", { bearer: pk, body: { email, password: goodPassword } })).status).toBe(200);
    expect((await call("loginPasswordV1", { bearer: pk, body: { username: email, password: goodPassword } })).status).toBe(200);

    const requested = await call("resetPasswordV1", { bearer: sk, body: { identifier: email } });
    expect(Object.keys(requested.body as JsonObject).sort()).toEqual(["expires_at", "token"]);
    const spent = await call("resetPasswordV1", {
      bearer: pk,
      body: { token: field(requested, "token") as string, new_password: `${goodPassword}!` },
    });
    expect(Object.keys(spent.body as JsonObject)).toEqual(["identity_id"]);
    expect((await call("resetPasswordV1", { bearer: pk, body: { token: "A".repeat(43), new_password: `${goodPassword}!` } })).status).toBe(
      404,
    );

    for (let attempt = 1; attempt <= 5; attempt++) {
      expect((await call("loginPassword", { bearer: pk, body: { identifier, password: "wrong password!" } })).status).toBe(401);
    }
    const locked = await call("loginPassword", { bearer: pk, body: { identifier, password: goodPassword } });
    expect(locked.status).toBe(429);
    expect(Number(locked.headers.get("retry-after"))).toBeGreaterThan(0);

    const oversize = "x".repeat(server.app.config.limits.jsonBody + 1);
    expect((await call("registerPassword", { bearer: pk, body: { identifier: newIdentifier(), password: oversize } })).status).toBe(413);
    expect((await call("loginPassword", { bearer: pk, body: { identifier }, undocumented: { contentType: "text/plain" } })).status).toBe(
      415,
    );
    expect((await call("loginPassword", { bearer: "pk_malformed", body: { identifier } })).status).toBe(401);
  });

  test("passkeys: a usernameless login begins with an empty body; an existing identifier cannot begin registration", async () => {
    const pk = server.credentials.publishable_key;
    const begun = await call("beginPasskeyLogin", { bearer: pk, body: {} });
    expect(begun.status).toBe(200);
    expect(typeof field(begun, "ceremony_id")).toBe("string");
    const identifier = newIdentifier("passkey");
    await enablePasswords(server);
    expect((await call("registerPassword", { bearer: pk, body: { identifier, password: goodPassword } })).status).toBe(200);
    expect((await call("beginPasskeyRegistration", { bearer: pk, body: { identifier } })).status).toBe(409);
  });

  test("a known path with a method it does not serve is the documented 405", async () => {
    const refused = await server.call("/healthz", { method: "PUT", body: "{}" });
    expect(refused.status).toBe(405);
    expect(refused.headers.get("allow")).toBe("GET");
    expect(checker.errors("#/components/responses/MethodNotAllowed/content/application~1json/schema", await refused.json())).toEqual([]);
  });

  test("together, the examples reached every error status of docs/errors.md on some path", () => {
    const statuses = new Set([...reached.values()].flatMap((s) => [...s]));
    for (const status of ["200", "400", "401", "403", "404", "409", "412", "413", "415", "429"]) {
      expect({ status, reached: statuses.has(status) }).toEqual({ status, reached: true });
    }
    expect(reached.size).toBeGreaterThanOrEqual(15);
  });
});
