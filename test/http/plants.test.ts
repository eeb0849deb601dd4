import { request } from "node:http";
import { connect } from "node:net";
import { Validator } from "@seriousme/openapi-schema-validator";
import { createRequestValidator } from "../../src/plants/request-validator.js";
import { createOtherOrganization } from "../support/credentials.js";
import { callIdentity, newIdentifier, setIdentitySettings } from "../support/identity-client.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * docs/plants.md, "The sample plant API" (its records: Plant, NewPlant and
 * Error) and "`id` is an int64, kept exactly": GET /openapi.json, POST /plants with exact int64 ids, every
 * failure as the document's Error. (Bearer refusals: plants-auth.test.ts.)
 */
let server: TestServer;
let token: string;

type Answer = { status: number; headers: Headers; text: string; body: Record<string, unknown> };

/** The parts of the OpenAPI document these tests read. */
interface SchemaJson {
  type?: string;
  required?: string[];
  properties?: Record<string, Record<string, unknown>>;
  allOf?: SchemaJson[];
  $ref?: string;
}
type ContentJson = Record<string, { schema: SchemaJson }>;
interface DocumentJson {
  openapi: string;
  info: { version: string };
  paths: Record<
    string,
    Record<
      string,
      { security?: unknown; requestBody: { required?: boolean; content: ContentJson }; responses: Record<string, { content: ContentJson }> }
    >
  >;
  components: { schemas: Record<string, SchemaJson>; securitySchemes: Record<string, unknown> };
}

/** Signs an identity in through the backend magic-link flow (secret key): the session the sample API takes. */
async function signIn(secretKey = server.credentials.secret_key): Promise<{ token: string; identityId: string }> {
  const generated = await callIdentity<{ token: string }>(
    server,
    "GenerateMagicLink",
    { identifier: newIdentifier("gardener") },
    secretKey,
  );
  expect(generated.status).toBe(200);
  const verified = await callIdentity<{ identityId: string; session: { token: string } }>(
    server,
    "VerifyMagicLink",
    { token: generated.body.token },
    secretKey,
  );
  expect(verified.status).toBe(200);
  return { token: verified.body.session.token, identityId: verified.body.identityId };
}

async function sample(path: string, init: RequestInit = {}): Promise<Answer> {
  const response = await fetch(server.sampleUrl + path, init);
  const text = await response.text();
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    body = { unparsed: text };
  }
  return { status: response.status, headers: response.headers, text, body };
}

/** POSTs raw JSON text to /plants, so tests control every digit. */
function postPlant(json: string | Blob, headers: Record<string, string> = {}, bearer = token): Promise<Answer> {
  return sample("/plants", {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${bearer}`, ...headers },
    body: json,
  });
}

let nextId = 1000n;
const freshId = () => String(nextId++);

/** The stored row's id as the database's own text, not through a JS number. */
async function storedIdText(id: bigint, organizationId = server.credentials.organization_id): Promise<string | undefined> {
  const rows = await server.app.database.client.$queryRaw<{ id: string }[]>`
    SELECT CAST("id" AS TEXT) AS "id" FROM "Plant" WHERE "organizationId" = ${organizationId} AND "id" = ${id}`;
  return rows[0]?.id;
}

function expectError(answer: Answer, status: number, ...words: string[]) {
  expect(answer.status).toBe(status);
  expect(answer.headers.get("content-type")).toBe("application/json");
  expect(Object.keys(answer.body).sort()).toEqual(["error", "message"]);
  expect(answer.body.error).toBe(status);
  for (const word of words) expect(answer.body.message).toContain(word);
}

beforeAll(async () => {
  server = await startTestServer();
  await setIdentitySettings(server, { ipLimitPerMinute: 100_000 });
  token = (await signIn()).token;
});
afterAll(() => server.close());

describe("GET /openapi.json", () => {
  let document: DocumentJson;
  beforeAll(async () => {
    const answer = await sample("/openapi.json");
    expect(answer.status).toBe(200);
    expect(answer.headers.get("content-type")).toBe("application/json");
    document = answer.body as unknown as DocumentJson;
  });

  test("is an OpenAPI 3.1.0 document, version 1.0.0, that a 3.1 validator accepts with every $ref resolved", async () => {
    expect(document.openapi).toBe("3.1.0");
    expect(document.info.version).toBe("1.0.0");
    const validator = new Validator();
    const result = await validator.validate(structuredClone(document) as unknown as Record<string, unknown>);
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
    const resolved = validator.resolveRefs() as unknown as DocumentJson;
    expect(resolved.paths["/plants"]!.post!.requestBody.content["application/json"]!.schema.allOf![0]!.required).toEqual(["name"]);
  });

  test("Plant, NewPlant and Error are the records docs/plants.md describes", () => {
    const { Plant, NewPlant, Error: ErrorSchema } = document.components.schemas as Record<string, SchemaJson>;
    expect(Plant).toMatchObject({ type: "object", required: ["name"], properties: { name: { type: "string" }, tag: { type: "string" } } });
    expect(Object.keys(Plant.properties ?? {}).sort()).toEqual(["name", "tag"]);
    expect(NewPlant.allOf?.[0]).toEqual({ $ref: "#/components/schemas/Plant" });
    expect(NewPlant.allOf?.[1]).toMatchObject({
      type: "object",
      required: ["id"],
      properties: { id: { type: "integer", format: "int64", minimum: 1 } },
    });
    expect(ErrorSchema).toMatchObject({
      type: "object",
      required: ["error", "message"],
      properties: { error: { type: "integer", format: "int32" }, message: { type: "string" } },
    });
  });

  test("POST /plants takes NewPlant with bearer auth and answers 200 Plant, 400 and 401 Error", () => {
    expect(document.components.securitySchemes.bearerAuth).toMatchObject({ type: "http", scheme: "bearer" });
    const post = document.paths["/plants"].post;
    expect(post.security).toEqual([{ bearerAuth: [] }]);
    expect(post.requestBody).toMatchObject({
      required: true,
      content: { "application/json": { schema: { $ref: "#/components/schemas/NewPlant" } } },
    });
    expect(post.responses["200"].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/Plant" });
    for (const status of ["400", "401"])
      expect(post.responses[status].content["application/json"].schema).toEqual({ $ref: "#/components/schemas/Error" });
  });

  test("HEAD answers the headers only; other methods are 405 with Allow", async () => {
    const head = await fetch(`${server.sampleUrl}/openapi.json`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(Number(head.headers.get("content-length"))).toBeGreaterThan(1000);
    const put = await sample("/openapi.json", { method: "PUT", body: "{}" });
    expectError(put, 405, "PUT", "GET");
    expect(put.headers.get("allow")).toBe("GET, HEAD");
  });
});

describe("POST /plants", () => {
  test("creates a plant in the session's organisation and answers the Plant, name and tag", async () => {
    const session = await signIn();
    const answer = await postPlant(`{"id": 42, "name": "Monstera", "tag": "aroid"}`, {}, session.token);
    expect(answer.status).toBe(200);
    expect(answer.headers.get("content-type")).toBe("application/json");
    expect(answer.body).toEqual({ name: "Monstera", tag: "aroid" });
    const row = await server.app.database.client.plant.findUnique({
      where: { organizationId_id: { organizationId: server.credentials.organization_id, id: 42n } },
    });
    expect(row).toMatchObject({ id: 42n, name: "Monstera", tag: "aroid", identityId: session.identityId });
  });

  test("tag is optional: without one the answer has none and the row holds null", async () => {
    const id = freshId();
    const answer = await postPlant(`{"name": "Fern", "id": ${id}}`);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ name: "Fern" });
    const row = await server.app.database.client.plant.findFirst({ where: { id: BigInt(id) } });
    expect(row?.tag).toBeNull();
  });

  test("a duplicate id is 400 naming id, and the first plant is unchanged", async () => {
    const id = freshId();
    expect((await postPlant(`{"name": "first", "id": ${id}}`)).status).toBe(200);
    expectError(await postPlant(`{"name": "second", "id": ${id}}`), 400, "id", id);
    const row = await server.app.database.client.plant.findFirst({ where: { id: BigInt(id) } });
    expect(row?.name).toBe("first");
  });

  test("of simultaneous creates with one id, exactly one succeeds and the others are 400", async () => {
    const id = freshId();
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => postPlant(`{"name": "racer ${i}", "id": ${id}}`)));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 400, 400, 400, 400, 400, 400, 400]);
    for (const answer of answers.filter((a) => a.status === 400)) expectError(answer, 400, "id");
  });

  test("ids belong to an organisation: another organisation may use the same id, and its plant is stored there", async () => {
    const id = freshId();
    expect((await postPlant(`{"name": "ours", "id": ${id}}`)).status).toBe(200);
    const other = await createOtherOrganization(server);
    await setIdentitySettings(server, { ipLimitPerMinute: 100_000 }, other.organizationId);
    const theirs = await signIn(other.secretKey);
    const answer = await postPlant(`{"name": "theirs", "id": ${id}}`, {}, theirs.token);
    expect(answer.status).toBe(200);
    const rows = await server.app.database.client.plant.findMany({ where: { id: BigInt(id) }, orderBy: { name: "asc" } });
    expect(rows.map((r) => [r.organizationId, r.name])).toEqual([
      [server.credentials.organization_id, "ours"],
      [other.organizationId, "theirs"],
    ]);
  });
});

describe("id is an int64, kept exactly", () => {
  const accepted = [
    ["1", 1n],
    ["2^53 + 1", 2n ** 53n + 1n],
    ["2^63 - 1", 9223372036854775807n],
    ["2^63 - 2", 9223372036854775806n],
  ] as const;
  test.each(accepted)("%s is accepted as a JSON number and read back from the database digit for digit", async (_label, id) => {
    const answer = await postPlant(`{"name": "exact", "id": ${id}}`);
    expect(answer.status).toBe(200);
    expect(await storedIdText(id)).toBe(id.toString());
    const row = await server.app.database.client.plant.findUnique({
      where: { organizationId_id: { organizationId: server.credentials.organization_id, id } },
    });
    expect(row?.id).toBe(id);
  });

  test("neighbours that doubles cannot tell apart stay distinct rows", async () => {
    const base = 2n ** 53n;
    for (const id of [base + 2n, base + 3n]) expect((await postPlant(`{"name": "twin", "id": ${id}}`)).status).toBe(200);
    expect(await storedIdText(base + 2n)).toBe((base + 2n).toString());
    expect(await storedIdText(base + 3n)).toBe((base + 3n).toString());
  });

  const refused: [string, string][] = [
    ["0", "at least 1"],
    ["-1", "at least 1"],
    ["-9223372036854775808", "at least 1"],
    ["1.5", "integer"],
    ["9007199254740993.5", "integer"],
    ["1e-400", "integer"],
    ['"7"', "integer"],
    ['"9223372036854775807"', "integer"],
    ["9223372036854775808", "int64"],
    ["18446744073709551615", "int64"],
    ["1e19", "int64"],
    ["1e400", "int64"],
    ["null", "integer"],
    ["true", "integer"],
    ["[1]", "integer"],
  ];
  test.each(refused)("%s is 400 naming id", async (literal, words) => {
    const before = await server.app.database.client.plant.count();
    const answer = await postPlant(`{"name": "refused", "id": ${literal}}`);
    expectError(answer, 400, "id", words);
    expect(answer.body.message).toMatch(/^id: /);
    expect(await server.app.database.client.plant.count()).toBe(before);
  });

  test("an integral value in any JSON number spelling is that integer (JSON Schema: a zero fractional part is an integer)", async () => {
    // Decided and documented: 1.0 and 1e3 are the integers 1 and 1000, as JSON
    // Schema's `type: integer` counts them; a fraction never is.
    const cases = [
      ["70.0", 70n],
      ["7.1e1", 71n],
      ["7200e-2", 72n],
      ["9.223372036854775807e18", 9223372036854775807n],
    ] as const;
    await server.app.database.client.plant.deleteMany({ where: { id: 9223372036854775807n } });
    for (const [literal, id] of cases) {
      const answer = await postPlant(`{"name": "spelled", "id": ${literal}}`);
      expect(answer.status).toBe(200);
      expect(await storedIdText(id)).toBe(id.toString());
    }
  });
});

describe("schema-driven refusals", () => {
  // One request per rule of the document's NewPlant; the rule list itself is
  // read from the served document, so a rule added there without a case here fails.
  const breaking: Record<string, { json: string; field: string }> = {
    "body:type": { json: `["name", "id"]`, field: "body" },
    "name:required": { json: `{"id": 1}`, field: "name" },
    "name:type": { json: `{"name": 7, "id": 1}`, field: "name" },
    "name:pattern": { json: `{"name": "nul\\u0000here", "id": 1}`, field: "name" },
    "tag:type": { json: `{"name": "x", "tag": ["a"], "id": 1}`, field: "tag" },
    "tag:pattern": { json: `{"name": "x", "tag": "\\ud800", "id": 1}`, field: "tag" },
    "id:required": { json: `{"name": "x"}`, field: "id" },
    "id:type": { json: `{"name": "x", "id": "1"}`, field: "id" },
    "id:minimum": { json: `{"name": "x", "id": 0}`, field: "id" },
    "id:format": { json: `{"name": "x", "id": 9223372036854775808}`, field: "id" },
  };

  test("every rule of NewPlant in the document has a breaking request here", async () => {
    const document = (await sample("/openapi.json")).body as unknown as DocumentJson;
    const schemas = document.components.schemas;
    const parts = schemas.NewPlant!.allOf!.map((part) => (part.$ref ? schemas[part.$ref.split("/").pop()!]! : part));
    const rules = new Set<string>();
    for (const part of parts) {
      if (part.type) rules.add("body:type");
      for (const field of part.required ?? []) rules.add(`${field}:required`);
      for (const [field, schema] of Object.entries(part.properties ?? {})) {
        for (const keyword of ["type", "pattern", "minimum", "maximum", "format", "minLength", "maxLength", "enum"]) {
          if (keyword in schema) rules.add(`${field}:${keyword}`);
        }
      }
    }
    expect([...rules].sort()).toEqual(Object.keys(breaking).sort());
  });

  test.each(Object.entries(breaking))("%s: 400 with a message naming the field, nothing stored", async (_rule, { json, field }) => {
    const before = await server.app.database.client.plant.count();
    const answer = await postPlant(json);
    expectError(answer, 400, field);
    expect(answer.body.message).toMatch(new RegExp(`^${field}: `));
    expect(await server.app.database.client.plant.count()).toBe(before);
  });

  test("every violation is listed at once", async () => {
    const answer = await postPlant(`{"name": 1, "tag": 2, "id": "3"}`);
    expectError(answer, 400, "3 problems", "name: must be a string", "tag: must be a string", "id: must be an integer");
  });

  test("the validator follows the document it is given, not field names of its own", () => {
    const document = {
      openapi: "3.1.0",
      info: { title: "t", version: "1" },
      paths: {
        "/x": {
          post: {
            requestBody: {
              required: true,
              content: {
                "application/json": {
                  schema: { type: "object", required: ["size"], properties: { size: { type: "integer", format: "int32" } } },
                },
              },
            },
            responses: {},
          },
        },
      },
    };
    const body = createRequestValidator(document).body("/x", "post");
    expect(body.mediaTypes).toEqual(["application/json"]);
    expect(body.validate({})).toEqual([{ field: "size", description: "is required" }]);
    expect(body.validate({ size: "2147483648" })).toEqual([{ field: "size", description: "must be an integer" }]);
  });
});

describe("the envelope of a request", () => {
  test("malformed JSON, an empty body and invalid UTF-8 are 400 naming the body", async () => {
    expectError(await postPlant(`{"name": "x", "id": 1`), 400, "body", "JSON");
    expectError(await postPlant(``), 400, "body", "required");
    expectError(await postPlant(`{"name": "a", "name": "b", "id": 1}`), 400, "body", "Duplicate key");
    const invalidUtf8 = Buffer.concat([Buffer.from(`{"name": "`), Buffer.from([0xc3, 0x28]), Buffer.from(`", "id": 1}`)]);
    expectError(await postPlant(new Blob([new Uint8Array(invalidUtf8)])), 400, "body", "UTF-8");
  });

  test("JSON nested beyond reason is 400, not a crash", async () => {
    expectError(await postPlant("[".repeat(60_000) + "]".repeat(60_000)), 413, "body");
    expectError(await postPlant("[".repeat(30_000) + "]".repeat(30_000)), 400, "body");
  });

  test("a body over 64 KiB is 413, declared or streamed", async () => {
    const big = JSON.stringify({ name: "x".repeat(64 * 1024), id: 1 });
    expectError(await postPlant(big), 413, "64 KiB");
    const streamed = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(`${server.sampleUrl}/plants`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}`, "transfer-encoding": "chunked" },
      });
      req.on("response", (res) => {
        let body = "";
        res.on("data", (chunk: Buffer) => (body += chunk.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on("error", reject);
      for (let i = 0; i < 20; i++) req.write("x".repeat(8 * 1024));
      req.end();
    });
    expect(streamed.status).toBe(413);
    expect(JSON.parse(streamed.body)).toEqual({ error: 413, message: expect.stringContaining("64 KiB") });
  });

  test("a body that is not application/json (UTF-8) is 415", async () => {
    const json = `{"name": "x", "id": ${freshId()}}`;
    expectError(await postPlant(json, { "content-type": "text/plain" }), 415, "application/json");
    expectError(await postPlant(json, { "content-type": "application/x-www-form-urlencoded" }), 415);
    expectError(await postPlant(json, { "content-type": "application/json; charset=latin1" }), 415);
    const none = await sample("/plants", { method: "POST", headers: { authorization: `Bearer ${token}` }, body: new Blob([json]) });
    expectError(none, 415, "none");
    expect((await postPlant(json, { "content-type": "Application/JSON; charset=UTF-8" })).status).toBe(200);
  });

  test("other methods are 405 with Allow: POST; other paths are 404; both as Error", async () => {
    for (const method of ["GET", "PUT", "DELETE", "PATCH"]) {
      const answer = await sample("/plants", { method, headers: { authorization: `Bearer ${token}` } });
      expectError(answer, 405, method, "POST");
      expect(answer.headers.get("allow")).toBe("POST");
    }
    for (const path of ["/", "/plants/1", "/plant", "/openapi.yaml", "/healthz"]) expectError(await sample(path), 404, path);
    expect((await postPlant(`{"name": "q", "id": ${freshId()}}`, {}, token)).status).toBe(200);
    expect(
      (
        await sample(`/plants?x=1`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
          body: `{"name": "q", "id": ${freshId()}}`,
        })
      ).status,
    ).toBe(200);
  });

  test("requests node's HTTP parser refuses still get the Error body", async () => {
    const raw = (bytes: string) =>
      new Promise<string>((resolve, reject) => {
        const { hostname, port } = new URL(server.sampleUrl);
        const socket = connect(Number(port), hostname, () => socket.write(bytes));
        let text = "";
        socket.on("data", (chunk: Buffer) => (text += chunk.toString()));
        socket.on("end", () => resolve(text));
        socket.on("error", reject);
      });
    const garbage = await raw("NOT HTTP AT ALL\r\n\r\n");
    expect(garbage).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(garbage.split("\r\n\r\n")[1]!)).toEqual({ error: 400, message: expect.any(String) });
    const huge = await raw(`POST /plants HTTP/1.1\r\nhost: x\r\nx-filler: ${"a".repeat(20_000)}\r\n\r\n`);
    expect(huge).toMatch(/^HTTP\/1\.1 431 /);
    expect(JSON.parse(huge.split("\r\n\r\n")[1]!)).toEqual({ error: 431, message: expect.any(String) });
  });

  test("a refused request leaves the connection usable (keep-alive)", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      statuses.push((await postPlant(`{"name": "x", "id": -1}`)).status);
      statuses.push((await postPlant(`{"name": "x", "id": ${freshId()}}`)).status);
    }
    expect(statuses).toEqual([400, 200, 400, 200, 400, 200, 400, 200, 400, 200]);
  });

  test("no request in this file was answered 500, and no error was logged", () => {
    expect(server.logs.filter((line) => line.includes("plant API request failed"))).toEqual([]);
  });
});

describe("when storage fails", () => {
  // Runs last in this file: it takes the plants table away.
  test("the answer is 503 with the Error body and Retry-After; the cause is logged without the token", async () => {
    await server.app.database.client.$executeRawUnsafe(`DROP TABLE "Plant"`);
    const answer = await postPlant(`{"name": "lost", "id": ${freshId()}}`);
    expectError(answer, 503, "try again");
    expect(answer.headers.get("retry-after")).toBe("1");
    expect(answer.text).not.toMatch(/prisma|sql|table|"Plant"/i);
    const logged = server.logs.filter((line) => line.includes("plant API request failed"));
    expect(logged).toHaveLength(1);
    expect(logged[0]).not.toContain(token);
  });
});
