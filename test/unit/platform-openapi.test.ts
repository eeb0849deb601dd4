import { Validator } from "@seriousme/openapi-schema-validator";
import { createFileRegistry, fromJson, ScalarType, toJson, type DescMessage, type DescMethod, type JsonValue } from "@bufbuild/protobuf";
import {
  file_google_protobuf_duration,
  file_google_protobuf_struct,
  file_google_protobuf_timestamp,
  FileDescriptorProtoSchema,
} from "@bufbuild/protobuf/wkt";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { Credential, Role } from "../../gen/svc/v1/auth_pb.js";
import { HealthCheckResponseSchema } from "../../gen/grpc/health/v1/health_pb.js";
import { GetConfigResponseSchema } from "../../gen/svc/v1/config_pb.js";
import { authRuleOf } from "../../src/interceptors/auth.js";
import { createMessageSchemas, reflow } from "../../src/rest/openapi/message-schemas.js";
import { createPlatformOpenApi } from "../../src/rest/openapi/platform-openapi.js";
import { protoComments } from "../../src/rest/openapi/proto-comments.js";
import { restRoutes, type RestRoute } from "../../src/rest/routes.js";
import { decodeJson } from "../../src/server/message-codec.js";
import {
  createSchemaChecker,
  deref,
  operationById,
  operationsOf,
  refsOf,
  resolvePointer,
  type Json,
  type JsonObject,
} from "../support/openapi-document.js";

/**
 * The platform's OpenAPI document (src/rest/openapi): valid OpenAPI 3.1, one
 * operation per REST route with its parameters, body, security and statuses,
 * schemas that match the protobuf JSON mapping the REST door reads and writes,
 * descriptions from the proto comments, and the same bytes on every build.
 * test/http/platform-openapi.test.ts checks it against a real server.
 */
const limits = { jsonBody: 1024 * 1024, configBody: 5 * 1024 * 1024 };
const build = (publicUrl = "https://auth.example.com") =>
  createPlatformOpenApi({ routes: restRoutes, publicUrl, limits, version: "9.8.7" }) as unknown as JsonObject;
const document = build();
const checker = createSchemaChecker(document);
/** How the REST door writes answers (src/rest/shim.ts): proto field names, implicit fields always. */
const restWrite = { useProtoFieldName: true, alwaysEmitImplicit: true } as const;

const methodsOf = (route: RestRoute): DescMethod[] => (typeof route.rpc === "function" ? (route.candidates ?? []) : [route.rpc]);
const operationOf = (route: RestRoute) => {
  const operation = (document.paths as Record<string, Record<string, JsonObject>>)[route.pattern]?.[route.method.toLowerCase()];
  if (!operation) throw new Error(`${route.method} ${route.pattern} is not documented`);
  return operation;
};
const routeName = (route: RestRoute) => `${route.method} ${route.pattern}`;
const placeholders = (pattern: string) => [...pattern.matchAll(/\{(\w+)\}/g)].map((m) => m[1] as string);
/** Request fields the path, query, headers or fixed values carry, so not the body. */
const carriedElsewhere = (route: RestRoute) =>
  new Set([
    ...placeholders(route.pattern),
    ...Object.values(route.query ?? {}).map((q) => q.field),
    ...(route.ifMatchField ? [route.ifMatchField] : []),
    ...Object.keys(route.fixed ?? {}),
    ...(route.yamlField ? [route.yamlField] : []),
  ]);

/** A message's JSON (proto names) with every field set: the first member of each oneof unless `pick` names another. */
function fullJson(desc: DescMessage, depth = 2, pick: ReadonlySet<string> = new Set()): { [key: string]: JsonValue } {
  const json: { [key: string]: JsonValue } = {};
  const oneofsDone = new Set<string>();
  for (const field of desc.fields) {
    if (field.oneof) {
      const chosen = field.oneof.fields.find((f) => pick.has(f.name)) ?? field.oneof.fields[0];
      if (oneofsDone.has(field.oneof.name) || chosen !== field) continue;
      oneofsDone.add(field.oneof.name);
    }
    const single = (): JsonValue | undefined => {
      switch (field.fieldKind) {
        case "scalar":
          return scalarSample(field.scalar);
        case "enum":
          return field.enum.values[field.enum.values.length - 1]?.name ?? 0;
        case "message":
          return messageSample(field.message, depth);
        case "list":
          return field.listKind === "scalar"
            ? scalarSample(field.scalar)
            : field.listKind === "enum"
              ? (field.enum.values[1]?.name ?? 0)
              : messageSample(field.message, depth);
        case "map":
          return field.mapKind === "scalar"
            ? scalarSample(field.scalar)
            : field.mapKind === "enum"
              ? (field.enum.values[1]?.name ?? 0)
              : messageSample(field.message, depth);
      }
    };
    const value = single();
    if (value === undefined) continue;
    if (field.fieldKind === "list") json[field.name] = [value, value];
    else if (field.fieldKind === "map") {
      json[field.name] = { [field.mapKey === ScalarType.STRING ? "key" : field.mapKey === ScalarType.BOOL ? "true" : "-42"]: value };
    } else json[field.name] = value;
  }
  return json;
}

function scalarSample(scalar: ScalarType): JsonValue {
  switch (scalar) {
    case ScalarType.STRING:
      return "text ✓";
    case ScalarType.BOOL:
      return true;
    case ScalarType.BYTES:
      return "AQID";
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return -7;
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return 4294967295;
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return "-9223372036854775808";
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return "18446744073709551615";
    case ScalarType.FLOAT:
      return 1.5;
    case ScalarType.DOUBLE:
      return "Infinity";
  }
}

const wellKnownSamples: Record<string, JsonValue> = {
  "google.protobuf.Timestamp": "2026-11-22T10:00:00.123Z",
  "google.protobuf.Duration": "1.500s",
  "google.protobuf.Struct": { rpId: "example.com", challenge: "abc", nested: [true, null, 3] },
  "google.protobuf.Value": { any: "json" },
  "google.protobuf.ListValue": [1, "two"],
  "google.protobuf.Empty": {},
  "google.protobuf.FieldMask": "a.b",
};

function messageSample(desc: DescMessage, depth: number): JsonValue | undefined {
  const known = wellKnownSamples[desc.typeName];
  if (known !== undefined) return known;
  return depth > 0 ? fullJson(desc, depth - 1) : {};
}

/** A message as the REST door writes it: full, and empty (every implicit field at its zero value). */
function answersOf(desc: DescMessage): JsonValue[] {
  const samples = [fullJson(desc), {}];
  for (const oneof of desc.oneofs) for (const member of oneof.fields) samples.push(fullJson(desc, 2, new Set([member.name])));
  return samples.map((json) => toJson(desc, fromJson(desc, json), restWrite));
}

/** The schema location of an operation's answer of a status and media type. */
function answerSchemaAt(route: RestRoute, status: string, mediaType: string): string[] {
  return ["paths", route.pattern, route.method.toLowerCase(), "responses", status, "content", mediaType, "schema"];
}

describe("the document", () => {
  test("is OpenAPI 3.1.0 that the 3.1 schema validator accepts", async () => {
    expect(document.openapi).toBe("3.1.0");
    const validator = new Validator();
    const result = await validator.validate(structuredClone(document) as Record<string, unknown>);
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
  });

  test("every $ref resolves inside the document", () => {
    const refs = refsOf(document);
    expect(refs.length).toBeGreaterThan(50);
    for (const { at, ref } of refs) {
      expect({ at, ref, local: ref.startsWith("#/") }).toEqual({ at, ref, local: true });
      expect({ at, ref, resolved: resolvePointer(document, ref) !== undefined }).toEqual({ at, ref, resolved: true });
    }
  });

  test("every schema compiles in strict JSON Schema 2020-12 (known keywords and formats only)", () => {
    const schemaPlaces = (node: Json, at: string[]): string[][] => {
      if (node === null || typeof node !== "object" || Array.isArray(node)) return [];
      return Object.entries(node).flatMap(([key, value]) => (key === "schema" ? [[...at, key]] : schemaPlaces(value, [...at, key])));
    };
    const places = [
      ...Object.keys((document.components as JsonObject).schemas as JsonObject).map((name) => ["components", "schemas", name]),
      ...schemaPlaces(document.paths as Json, ["paths"]),
      ...schemaPlaces((document.components as JsonObject).responses as Json, ["components", "responses"]),
    ];
    expect(places.length).toBeGreaterThan(100);
    for (const place of places) expect({ place, compiles: Array.isArray(checker.errors(place, null)) }).toEqual({ place, compiles: true });
  });

  test("is the same, byte for byte, on every build; only the server changes with PUBLIC_URL", () => {
    const text = JSON.stringify(document);
    expect(JSON.stringify(build())).toBe(text);
    const other = build("http://127.0.0.1:9999");
    expect(other.servers).toEqual([{ url: "http://127.0.0.1:9999", description: expect.any(String) }]);
    expect(JSON.stringify({ ...other, servers: document.servers })).toBe(text);
    // Components are sorted by name: the order in which routes use them does not matter.
    const components = Object.keys((document.components as JsonObject).schemas as JsonObject);
    expect(components).toEqual([...components].sort());
  });

  test("names the server by PUBLIC_URL and carries the given version", () => {
    expect(document.servers).toEqual([{ url: "https://auth.example.com", description: expect.any(String) }]);
    expect((document.info as JsonObject).version).toBe("9.8.7");
  });
});

describe("paths", () => {
  test("every REST route appears with its method, its RPC and a unique operationId, and nothing else does", () => {
    const documented = operationsOf(document).map((op) => `${op.method.toUpperCase()} ${op.path}`);
    expect(documented.sort()).toEqual([...restRoutes.map(routeName), "GET /openapi.json"].sort());
    for (const route of restRoutes) {
      const rpcs = methodsOf(route).map((m) => `${m.parent.typeName}/${m.name}`);
      expect({ route: routeName(route), rpc: operationOf(route)["x-rpc"] }).toEqual({
        route: routeName(route),
        rpc: rpcs.length === 1 ? rpcs[0] : rpcs,
      });
    }
    const ids = operationsOf(document).map((op) => op.operation.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    expect(
      operationOf(restRoutes.find((r) => r.pattern === "/organization/{organization_id}/secrets" && r.method === "PUT")!).operationId,
    ).toBe("putSecret");
  });

  test("a route that reuses another's operationId is refused when the document is built", () => {
    const twice = [restRoutes[2]!, { ...restRoutes[2]!, pattern: "/copy/{organization_id}/config" }];
    expect(() => createPlatformOpenApi({ routes: twice, publicUrl: "http://x", limits, version: "1" })).toThrow(
      /operationId getConfig is taken/,
    );
  });

  test.each(restRoutes.map((route) => [routeName(route), route] as const))(
    "%s documents its path, query and header parameters",
    (_name, route) => {
      const parameters = ((operationOf(route).parameters ?? []) as JsonObject[]).map((p) => deref(document, p));
      const expected = [
        ...placeholders(route.pattern).map((name) => ({ name, in: "path", required: true })),
        ...Object.entries(route.query ?? {}).map(([name, q]) => ({ name, in: "query", required: q.required === true })),
        ...(route.ifMatchField ? [{ name: "If-Match", in: "header", required: false }] : []),
      ];
      expect(parameters.map(({ name, in: where, required }) => ({ name, in: where, required }))).toEqual(expected);
      for (const [name, q] of Object.entries(route.query ?? {})) {
        const parameter = parameters.find((p) => p.name === name)!;
        const expectedSchema =
          q.kind === "boolean"
            ? { type: "boolean" }
            : q.kind === "list"
              ? { type: "array", items: { type: "string" } }
              : q.kind === "integer"
                ? { type: "integer", minimum: 0 }
                : { type: "string" };
        expect(parameter.schema).toEqual(expectedSchema);
        if (q.kind === "list") expect(parameter).toMatchObject({ style: "form", explode: false });
      }
    },
  );

  test("query and list parameters are described by their request fields' comments", () => {
    const list = operationById(document, "listSecrets").operation.parameters as JsonObject[];
    expect(list.find((p) => p.name === "env")?.description).toBe(reflow(protoComments["svc.v1.ListSecretsRequest.environment"]!));
    expect(list.find((p) => p.name === "tags")?.description).toBe(reflow(protoComments["svc.v1.ListSecretsRequest.tags"]!));
  });

  test.each(restRoutes.filter((r) => r.body === "json").map((route) => [routeName(route), route] as const))(
    "%s: the JSON body holds the request fields the path, query and headers do not carry",
    (_name, route) => {
      const body = deref(document, operationOf(route).requestBody as Json);
      expect(Object.keys(body.content as JsonObject)).toEqual(["application/json"]);
      const schema = (body.content as Record<string, JsonObject>)["application/json"]!.schema as JsonObject;
      const branches = (schema.oneOf as JsonObject[] | undefined) ?? [schema];
      const omit = carriedElsewhere(route);
      methodsOf(route).forEach((method, i) => {
        const branch = branches[i]!;
        const fields = method.input.fields.map((f) => f.name).filter((name) => !omit.has(name));
        const aliases = Object.entries(route.aliases ?? {}).map(([alias]) => alias);
        expect(Object.keys(branch.properties as JsonObject).sort()).toEqual([...fields, ...aliases].sort());
        expect(branch.additionalProperties).toBe(false);
      });
    },
  );

  test("an alias of a /v1 path is documented next to the field it stands for, and not both may be sent", () => {
    const register = operationById(document, "registerPasswordV1").operation;
    const body = (((register.requestBody as JsonObject).content as JsonObject)["application/json"] as JsonObject).schema as JsonObject;
    expect(body.not).toEqual({ required: ["email", "identifier"] });
    const at = ["paths", "/v1/identity/register", "post", "requestBody", "content", "application/json", "schema"];
    expect(checker.errors(at, { email: "a@example.com", password: "p" })).toEqual([]);
    expect(checker.errors(at, { identifier: "a@example.com", password: "p" })).toEqual([]);
    expect(checker.errors(at, { email: "a@example.com", identifier: "a@example.com", password: "p" })).not.toEqual([]);
  });

  test("the path that picks its RPC from the body documents one body per RPC, and each documented body picks its RPC", () => {
    const route = restRoutes.find((r) => typeof r.rpc === "function")!;
    const schema = (((operationOf(route).requestBody as JsonObject).content as JsonObject)["application/json"] as JsonObject)
      .schema as JsonObject;
    const branches = schema.oneOf as JsonObject[];
    expect(branches).toHaveLength(route.candidates!.length);
    route.candidates!.forEach((method, i) => {
      const example = Object.fromEntries(Object.keys(branches[i]!.properties as JsonObject).map((name) => [name, "x"]));
      const at = ["paths", route.pattern, "post", "requestBody", "content", "application/json", "schema"];
      expect(checker.errors(at, example)).toEqual([]);
      expect((route.rpc as (body: typeof example) => DescMethod)(example)).toBe(method);
    });
  });

  test("the configuration PUT takes its document as YAML text in any of the three YAML media types", () => {
    const body = operationById(document, "applyConfig").operation.requestBody as JsonObject;
    expect(body.required).toBe(true);
    expect(Object.keys(body.content as JsonObject)).toEqual(["application/yaml", "application/x-yaml", "text/yaml"]);
    for (const media of Object.values(body.content as Record<string, JsonObject>)) expect(media.schema).toEqual({ type: "string" });
    expect(body.description).toBe(reflow(protoComments["svc.v1.ApplyConfigRequest.yaml"]!));
  });
});

describe("security follows each RPC's (svc.v1.auth) rule", () => {
  const schemeOf: Partial<Record<Credential, string>> = {
    [Credential.API_KEY]: "apiKey",
    [Credential.PUBLISHABLE_KEY]: "publishableKey",
    [Credential.SECRET_KEY]: "secretKey",
    [Credential.GATEWAY_KEY]: "gatewayKey",
  };

  test.each(restRoutes.map((route) => [routeName(route), route] as const))("%s", (_name, route) => {
    const expected: Record<string, string[]>[] = [];
    for (const method of methodsOf(route)) {
      const rule = authRuleOf(method);
      for (const credential of rule.credentials) {
        const scheme = schemeOf[credential];
        if (credential === Credential.NONE || !scheme || expected.some((e) => scheme in e)) continue;
        expected.push({ [scheme]: credential === Credential.API_KEY && rule.role === Role.ADMIN ? ["admin"] : [] });
      }
    }
    expect(operationOf(route).security).toEqual(expected);
  });

  test('as docs/api.md, "Credentials and roles", states it for a few paths', () => {
    const security = (id: string) => operationById(document, id).operation.security;
    expect(security("getHealthz")).toEqual([]);
    expect(security("getConfig")).toEqual([{ apiKey: [] }, { gatewayKey: [] }]);
    expect(security("applyConfig")).toEqual([{ apiKey: [] }]);
    expect(security("putSecret")).toEqual([{ apiKey: ["admin"] }]);
    expect(security("retrieveSecrets")).toEqual([{ apiKey: ["admin"] }, { gatewayKey: [] }]);
    expect(security("loginPassword")).toEqual([{ publishableKey: [] }]);
    expect(security("resetPasswordV1")).toEqual([{ publishableKey: [] }, { secretKey: [] }]);
  });

  test("the schemes are bearer credentials with the documented prefixes, described by the proto's Credential comments", () => {
    const schemes = (document.components as JsonObject).securitySchemes as Record<string, JsonObject>;
    expect(Object.keys(schemes)).toEqual(["apiKey", "publishableKey", "secretKey", "gatewayKey"]);
    for (const [name, prefix] of [
      ["apiKey", "gk_"],
      ["publishableKey", "pk_"],
      ["secretKey", "sk_"],
      ["gatewayKey", "gw_"],
    ] as const) {
      expect(schemes[name]).toMatchObject({ type: "http", scheme: "bearer", bearerFormat: `${prefix} + 43 base64url characters` });
    }
    expect(schemes.publishableKey!.description).toContain(reflow(protoComments["svc.v1.Credential.CREDENTIAL_PUBLISHABLE_KEY"]!));
  });
});

describe("statuses", () => {
  const contractStatuses = new Set(["200", "304", "400", "401", "403", "404", "409", "412", "413", "415", "429", "500", "503"]);
  const codesOf: Record<string, string[]> = {
    "400": ["invalid_argument", "failed_precondition", "out_of_range"],
    "401": ["unauthenticated"],
    "403": ["permission_denied"],
    "404": ["not_found"],
    "405": ["unimplemented"],
    "409": ["already_exists", "aborted"],
    "412": ["failed_precondition"],
    "413": ["resource_exhausted"],
    "415": ["invalid_argument"],
    "429": ["resource_exhausted"],
    "500": ["internal", "unknown", "data_loss"],
  };
  const errorBody = (status: string) => ({
    "application/json": {
      schema: {
        allOf: [
          { $ref: "#/components/schemas/ConnectError" },
          { type: "object", properties: { code: { type: "string", enum: codesOf[status] } } },
        ],
      },
    },
  });

  test("every documented status is one of docs/errors.md's, and every error is the Connect error body with that status's codes", () => {
    for (const { path, method, operation } of operationsOf(document)) {
      for (const [status, raw] of Object.entries(operation.responses as JsonObject)) {
        const where = `${method.toUpperCase()} ${path} ${status}`;
        expect({ where, known: contractStatuses.has(status) }).toEqual({ where, known: true });
        const response = deref(document, raw);
        expect({ where, description: typeof response.description }).toEqual({ where, description: "string" });
        if (Number(status) >= 400 && status !== "503")
          expect({ where, content: response.content }).toEqual({ where, content: errorBody(status) });
      }
    }
    const methodNotAllowed = (document.components as JsonObject).responses as Record<string, JsonObject>;
    expect(methodNotAllowed.MethodNotAllowed).toMatchObject({
      headers: { Allow: { $ref: "#/components/headers/Allow" } },
      content: errorBody("405"),
    });
  });

  test("401 names WWW-Authenticate and 429 Retry-After, wherever they are documented", () => {
    for (const { operation } of operationsOf(document)) {
      const responses = operation.responses as JsonObject;
      if (responses["401"])
        expect(deref(document, responses["401"]).headers).toEqual({
          "WWW-Authenticate": { $ref: "#/components/headers/WWW-Authenticate" },
        });
      if (responses["429"])
        expect(deref(document, responses["429"]).headers).toEqual({ "Retry-After": { $ref: "#/components/headers/Retry-After" } });
    }
  });

  test.each(restRoutes.map((route) => [routeName(route), route] as const))(
    "%s documents what its door, rule and route imply",
    (_name, route) => {
      const statuses = Object.keys(operationOf(route).responses as JsonObject);
      const secured = methodsOf(route).some((m) => !authRuleOf(m).credentials.includes(Credential.NONE));
      const expected = new Set(["200", "400", "500"]);
      if (secured) for (const s of ["401", "403"]) expected.add(s);
      if (route.pattern.includes("{organization_id}")) expected.add("404");
      if (route.body !== "none") for (const s of ["413", "415"]) expected.add(s);
      if (route.ifMatchField) expected.add("412");
      for (const s of Object.keys(route.errors ?? {})) expected.add(s);
      for (const s of Object.keys(route.rendered?.statuses ?? {})) expected.add(s);
      expect(statuses.sort()).toEqual([...expected].sort());
    },
  );

  test("the limits of the configuration and JSON bodies are stated on their 413s", () => {
    expect(deref(document, (operationById(document, "applyConfig").operation.responses as JsonObject)["413"]).description).toContain(
      "5 MiB",
    );
    expect(deref(document, (operationById(document, "putSecret").operation.responses as JsonObject)["413"]).description).toContain("1 MiB");
  });
});

describe("schemas follow the JSON mapping the REST door writes and reads", () => {
  test.each(restRoutes.filter((r) => !r.rendered?.bodyField).map((route) => [routeName(route), route] as const))(
    "%s: answers the RPC can give validate against the documented 200",
    (_name, route) => {
      const media = route.rendered?.contentType ?? "application/json";
      for (const method of methodsOf(route)) {
        for (const answer of answersOf(method.output)) {
          expect({ answer, errors: checker.errors(answerSchemaAt(route, "200", media), answer) }).toEqual({ answer, errors: [] });
        }
      }
    },
  );

  test.each(restRoutes.filter((r) => r.body === "json").map((route) => [routeName(route), route] as const))(
    "%s: request bodies the schema accepts decode as the RPC's request, and unknown fields are refused by both",
    (_name, route) => {
      const at = ["paths", route.pattern, route.method.toLowerCase(), "requestBody", "content", "application/json", "schema"];
      const omit = carriedElsewhere(route);
      for (const method of methodsOf(route)) {
        const full = toJson(method.input, fromJson(method.input, fullJson(method.input)), { useProtoFieldName: true }) as Record<
          string,
          JsonValue
        >;
        const body = Object.fromEntries(Object.entries(full).filter(([name]) => !omit.has(name)));
        // A /v1 path documents its alias: send that instead of the field.
        for (const [alias, field] of Object.entries(route.aliases ?? {})) {
          body[alias] = body[field] as JsonValue;
          delete body[field];
        }
        expect({ body, errors: checker.errors(at, body) }).toEqual({ body, errors: [] });
        const decoded = { ...body };
        for (const [alias, field] of Object.entries(route.aliases ?? {})) {
          decoded[field] = decoded[alias] as JsonValue;
          delete decoded[alias];
        }
        expect(() => decodeJson(method.input, decoded)).not.toThrow();
        expect(checker.errors(at, { ...body, unknown_field: 1 })).not.toEqual([]);
        expect(() => decodeJson(method.input, { ...decoded, unknown_field: 1 })).toThrow(/does not define/);
      }
    },
  );

  test("timestamps are RFC 3339 strings, enums their names, Struct any JSON object", () => {
    const schemas = (document.components as JsonObject).schemas as Record<string, JsonObject>;
    expect((schemas.Secret!.properties as JsonObject).updated_at).toMatchObject({ type: "string", format: "date-time" });
    expect(schemas["HealthCheckResponse.ServingStatus"]).toMatchObject({
      type: "string",
      enum: ["UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"],
    });
    expect((schemas.BeginPasskeyLoginResponse!.properties as JsonObject).options).toMatchObject({
      type: "object",
      additionalProperties: true,
    });
    expect(
      checker.errors("#/components/schemas/Secret", { name: "a", environment: "b", version: 1, tags: [], updated_at: "yesterday" }),
    ).not.toEqual([]);
  });

  test("an answer lists as required exactly the fields the REST door always writes", () => {
    const schemas = (document.components as JsonObject).schemas as Record<string, JsonObject>;
    // alwaysEmitImplicit: implicit-presence fields always; message fields (updated_at, session) only when set.
    expect(schemas.Secret!.required).toEqual(["name", "environment", "version", "tags"]);
    expect(schemas.LoginPasswordResponse!.required).toEqual(["identity_id"]);
    expect(checker.errors("#/components/schemas/Secret", { name: "a", environment: "b", version: 1 })).not.toEqual([]);
  });
});

describe("message schemas of every field kind (a test message beyond what the REST paths use)", () => {
  const file = fromJson(FileDescriptorProtoSchema, {
    name: "test/v1/everything.proto",
    package: "test.v1",
    syntax: "proto3",
    dependency: ["google/protobuf/duration.proto", "google/protobuf/timestamp.proto", "google/protobuf/struct.proto"],
    enumType: [
      {
        name: "Colour",
        value: [
          { name: "COLOUR_UNSPECIFIED", number: 0 },
          { name: "COLOUR_RED", number: 1 },
        ],
      },
    ],
    messageType: [
      {
        name: "Everything",
        field: [
          { name: "count", number: 1, label: "LABEL_OPTIONAL", type: "TYPE_INT64", jsonName: "count" },
          { name: "big", number: 2, label: "LABEL_OPTIONAL", type: "TYPE_UINT64", jsonName: "big" },
          { name: "ratio", number: 3, label: "LABEL_OPTIONAL", type: "TYPE_DOUBLE", jsonName: "ratio" },
          { name: "small", number: 4, label: "LABEL_OPTIONAL", type: "TYPE_UINT32", jsonName: "small" },
          { name: "blob", number: 5, label: "LABEL_OPTIONAL", type: "TYPE_BYTES", jsonName: "blob" },
          { name: "colour", number: 6, label: "LABEL_OPTIONAL", type: "TYPE_ENUM", typeName: ".test.v1.Colour", jsonName: "colour" },
          {
            name: "wait",
            number: 7,
            label: "LABEL_OPTIONAL",
            type: "TYPE_MESSAGE",
            typeName: ".google.protobuf.Duration",
            jsonName: "wait",
          },
          { name: "at", number: 8, label: "LABEL_OPTIONAL", type: "TYPE_MESSAGE", typeName: ".google.protobuf.Timestamp", jsonName: "at" },
          {
            name: "extra",
            number: 9,
            label: "LABEL_OPTIONAL",
            type: "TYPE_MESSAGE",
            typeName: ".google.protobuf.Struct",
            jsonName: "extra",
          },
          {
            name: "labels",
            number: 10,
            label: "LABEL_REPEATED",
            type: "TYPE_MESSAGE",
            typeName: ".test.v1.Everything.LabelsEntry",
            jsonName: "labels",
          },
          {
            name: "by_number",
            number: 11,
            label: "LABEL_REPEATED",
            type: "TYPE_MESSAGE",
            typeName: ".test.v1.Everything.ByNumberEntry",
            jsonName: "byNumber",
          },
          { name: "name", number: 12, label: "LABEL_OPTIONAL", type: "TYPE_STRING", oneofIndex: 0, jsonName: "name" },
          { name: "code", number: 13, label: "LABEL_OPTIONAL", type: "TYPE_INT32", oneofIndex: 0, jsonName: "code" },
          {
            name: "maybe",
            number: 14,
            label: "LABEL_OPTIONAL",
            type: "TYPE_STRING",
            oneofIndex: 1,
            proto3Optional: true,
            jsonName: "maybe",
          },
          { name: "tags", number: 15, label: "LABEL_REPEATED", type: "TYPE_STRING", jsonName: "tags" },
          { name: "colours", number: 16, label: "LABEL_REPEATED", type: "TYPE_ENUM", typeName: ".test.v1.Colour", jsonName: "colours" },
        ],
        nestedType: [
          {
            name: "LabelsEntry",
            field: [
              { name: "key", number: 1, label: "LABEL_OPTIONAL", type: "TYPE_STRING", jsonName: "key" },
              { name: "value", number: 2, label: "LABEL_OPTIONAL", type: "TYPE_INT64", jsonName: "value" },
            ],
            options: { mapEntry: true },
          },
          {
            name: "ByNumberEntry",
            field: [
              { name: "key", number: 1, label: "LABEL_OPTIONAL", type: "TYPE_INT32", jsonName: "key" },
              {
                name: "value",
                number: 2,
                label: "LABEL_OPTIONAL",
                type: "TYPE_MESSAGE",
                typeName: ".test.v1.Everything",
                jsonName: "value",
              },
            ],
            options: { mapEntry: true },
          },
        ],
        oneofDecl: [{ name: "choice" }, { name: "_maybe" }],
      },
    ],
  });
  const wellKnown = [file_google_protobuf_duration, file_google_protobuf_timestamp, file_google_protobuf_struct];
  const registry = createFileRegistry(file, (name) => wellKnown.find((f) => f.name === name.replace(/\.proto$/, "")));
  const everything = registry.getMessage("test.v1.Everything")!;
  const schemas = createMessageSchemas();
  schemas.messageRef(everything, "response");
  schemas.messageRef(everything, "request");
  const components = schemas.components();
  const check = createSchemaChecker({ openapi: "3.1.0", components: { schemas: components } } as unknown as JsonObject);
  // The form of error details' `debug` (default toJson options), on its own: it shares the response form's names.
  const debugSchemas = createMessageSchemas();
  debugSchemas.messageRef(everything, "detail");
  const debugCheck = createSchemaChecker({ openapi: "3.1.0", components: { schemas: debugSchemas.components() } } as unknown as JsonObject);

  test("64-bit integers are decimal strings, unsigned 32-bit a bounded integer, doubles numbers or NaN/Infinity, bytes base64", () => {
    const properties = components.Everything!.properties as Record<string, JsonObject>;
    expect(properties.count).toMatchObject({ type: "string", format: "int64" });
    expect(properties.big).toMatchObject({ type: "string", format: "uint64" });
    expect(properties.small).toMatchObject({ type: "integer", minimum: 0, maximum: 4294967295 });
    expect(properties.ratio).toMatchObject({ anyOf: [{ type: "number" }, { type: "string", enum: ["NaN", "Infinity", "-Infinity"] }] });
    expect(properties.blob).toMatchObject({ type: "string", contentEncoding: "base64" });
    expect(properties.wait).toMatchObject({ type: "string" });
    expect(properties.labels).toMatchObject({ type: "object", additionalProperties: { type: "string", format: "int64" } });
    expect(properties.by_number).toMatchObject({
      type: "object",
      propertyNames: { pattern: "^-?[0-9]+$" },
      additionalProperties: { $ref: "#/components/schemas/Everything" },
    });
    expect(properties.colours).toEqual({ type: "array", items: { $ref: "#/components/schemas/Colour" } });
  });

  test("every way protobuf-es writes the message validates, in the REST form and the default form", () => {
    for (const answer of answersOf(everything))
      expect({ answer, errors: check.errors("#/components/schemas/Everything", answer) }).toEqual({ answer, errors: [] });
    for (const json of [fullJson(everything), {}]) {
      const message = fromJson(everything, json);
      const debug = toJson(everything, message);
      expect({ debug, errors: debugCheck.errors("#/components/schemas/Everything", debug) }).toEqual({ debug, errors: [] });
      const request = toJson(everything, message, { useProtoFieldName: true });
      expect({ request, errors: check.errors("#/components/schemas/EverythingInput", request) }).toEqual({ request, errors: [] });
    }
  });

  test("a oneof sets at most one of its fields; an explicit-presence field is never required", () => {
    const answer = toJson(everything, fromJson(everything, {}), restWrite) as Record<string, JsonValue>;
    expect(check.errors("#/components/schemas/Everything", { ...answer, name: "a" })).toEqual([]);
    expect(check.errors("#/components/schemas/Everything", { ...answer, name: "a", code: 1 })).not.toEqual([]);
    expect(components.Everything!.required).toEqual([
      "count",
      "big",
      "ratio",
      "small",
      "blob",
      "colour",
      "labels",
      "by_number",
      "tags",
      "colours",
    ]);
  });

  test("the request form refuses unknown fields and requires nothing; the default form names fields in lowerCamelCase", () => {
    expect(components.EverythingInput).toMatchObject({ additionalProperties: false });
    expect(components.EverythingInput!.required).toBeUndefined();
    expect(check.errors("#/components/schemas/EverythingInput", { nope: 1 })).not.toEqual([]);
    expect(Object.keys(components.Everything!.properties as JsonObject)).toContain("by_number");
    expect(Object.keys(debugSchemas.components().Everything!.properties as JsonObject)).toContain("byNumber");
    expect(debugSchemas.components().Everything!.required).toBeUndefined();
  });

  test("two types that would share a component name are refused", () => {
    const clash = fromJson(FileDescriptorProtoSchema, {
      name: "other/v1/x.proto",
      package: "other.v1",
      syntax: "proto3",
      messageType: [{ name: "Everything" }],
    });
    const other = createFileRegistry(clash, () => undefined).getMessage("other.v1.Everything")!;
    expect(() => schemas.messageRef(other, "response")).toThrow(/would both be named Everything/);
  });
});

describe("descriptions are the proto comments", () => {
  test("the committed comments are those proto/ holds now", () => {
    const result = spawnSync(process.execPath, ["scripts/build-proto-comments.mjs", "--check"], { cwd: process.cwd(), encoding: "utf8" });
    expect({ status: result.status, stderr: result.stderr }).toEqual({ status: 0, stderr: "" });
  });

  test("operations, fields, tags and enums are described by their comments", () => {
    const put = operationById(document, "putSecret").operation;
    expect(put.summary).toBe("Creates a secret or stores a new version of it");
    expect(put.description).toContain(reflow(protoComments["svc.v1.SecretsService.PutSecret"]!));
    const body = (((put.requestBody as JsonObject).content as JsonObject)["application/json"] as JsonObject).schema as JsonObject;
    expect((body.properties as Record<string, JsonObject>).encrypted_value!.description).toBe(
      reflow(protoComments["svc.v1.PutSecretRequest.encrypted_value"]!),
    );
    expect(reflow(protoComments["svc.v1.PutSecretRequest.encrypted_value"]!)).not.toContain("\n");
    const tags = document.tags as JsonObject[];
    expect(tags.find((t) => t.name === "SecretsService")?.description).toBe(reflow(protoComments["svc.v1.SecretsService"]!));
    const status = ((document.components as JsonObject).schemas as Record<string, JsonObject>)["HealthCheckResponse.ServingStatus"]!;
    expect(status.description).toContain(
      `- \`NOT_SERVING\`: ${protoComments["grpc.health.v1.HealthCheckResponse.ServingStatus.NOT_SERVING"]}`,
    );
  });

  test("the generated file says how it was made and is not edited by hand", () => {
    const text = readFileSync("src/rest/openapi/proto-comments.ts", "utf8");
    expect(text.startsWith("// @generated by scripts/build-proto-comments.mjs")).toBe(true);
  });
});

describe("rendered answers: what render sends is what the document says", () => {
  test("every route that renders its answer documents how", () => {
    for (const route of restRoutes)
      expect({ route: routeName(route), documented: Boolean(route.render) === Boolean(route.rendered) }).toEqual({
        route: routeName(route),
        documented: true,
      });
  });

  const health = (status: string) => toJson(HealthCheckResponseSchema, fromJson(HealthCheckResponseSchema, { status }), restWrite);
  /** Answers each rendering route's RPC gives (the process probe asks for "", which is always SERVING). */
  const rendered: [string, JsonValue[]][] = [
    ["/healthz", [health("SERVING")]],
    ["/readyz", [health("SERVING"), health("NOT_SERVING")]],
    ["/organization/{organization_id}/config", answersOf(GetConfigResponseSchema)],
  ];

  test.each(rendered)("GET %s", (pattern, answers) => {
    const route = restRoutes.find((r) => r.pattern === pattern && r.method === "GET")!;
    const operation = operationOf(route);
    const ok = deref(document, (operation.responses as JsonObject)["200"]);
    const statuses = new Set<string>();
    for (const json of answers) {
      const answer = route.render!(json as never);
      const status = String(answer.status);
      statuses.add(status);
      const documented = deref(document, (operation.responses as JsonObject)[status]);
      expect(Object.keys(documented.content as JsonObject)).toEqual([answer.headers["content-type"]!.split(";")[0]]);
      const headers = Object.keys((ok.headers as JsonObject | undefined) ?? {}).map((h) => h.toLowerCase());
      if (status === "200") expect(headers.every((h) => h in answer.headers)).toBe(true);
      if (route.rendered!.bodyField) {
        expect(answer.body).toBe((json as Record<string, string>)[route.rendered!.bodyField]);
      } else {
        expect(checker.errors(answerSchemaAt(route, status, route.rendered!.contentType), JSON.parse(answer.body))).toEqual([]);
      }
    }
    expect([...statuses].sort()).toEqual(["200", ...Object.keys(route.rendered!.statuses ?? {})].sort());
  });

  test("an ETag carries the revision as a strong entity tag", () => {
    const route = restRoutes.find((r) => r.rendered?.headers?.etag)!;
    expect(route.render!({ revision: 7, yaml: "version: 1\n" }).headers.etag).toBe('"7"');
  });
});
