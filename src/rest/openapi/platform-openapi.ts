import type { DescField, DescMessage, DescMethod } from "@bufbuild/protobuf";
import { FeatureSet_FieldPresence } from "@bufbuild/protobuf/wkt";
import { Credential, Role } from "../../../gen/svc/v1/auth_pb.js";
import { ErrorDetailSchema } from "../../../gen/svc/v1/errors_pb.js";
import { authRuleOf } from "../../interceptors/auth.js";
import type { RestRoute } from "../routes.js";
import { commentOf, createMessageSchemas, type JsonSchema } from "./message-schemas.js";

export interface PlatformOpenApiOptions {
  /** The REST routes table (src/rest/routes.ts). */
  routes: readonly RestRoute[];
  /** PUBLIC_URL: the server the document names. */
  publicUrl: string;
  /** Body limits in bytes (the 413 answers say them). */
  limits: { jsonBody: number; configBody: number };
  /** info.version: the package version. */
  version: string;
}

/** The OpenAPI 3.1 document as plain JSON data. */
export type OpenApiDocument = { openapi: "3.1.0" } & JsonSchema;

/** Where this document is served on the platform port. */
export const openApiPath = "/openapi.json";

/** The security scheme of each credential kind an RPC may take (docs/api.md, "Credentials and roles"). */
const credentialSchemes: Partial<Record<Credential, { scheme: string; prefix: string; valueName: string }>> = {
  [Credential.API_KEY]: { scheme: "apiKey", prefix: "gk_", valueName: "CREDENTIAL_API_KEY" },
  [Credential.PUBLISHABLE_KEY]: { scheme: "publishableKey", prefix: "pk_", valueName: "CREDENTIAL_PUBLISHABLE_KEY" },
  [Credential.SECRET_KEY]: { scheme: "secretKey", prefix: "sk_", valueName: "CREDENTIAL_SECRET_KEY" },
  [Credential.GATEWAY_KEY]: { scheme: "gatewayKey", prefix: "gw_", valueName: "CREDENTIAL_GATEWAY_KEY" },
};

const credentialWords: Partial<Record<Credential, string>> = {
  [Credential.API_KEY]: "an API key (`gk_`)",
  [Credential.PUBLISHABLE_KEY]: "a publishable key (`pk_`)",
  [Credential.SECRET_KEY]: "a secret key (`sk_`)",
  [Credential.GATEWAY_KEY]: "a gateway key (`gw_`) of the organisation",
};

/**
 * The error statuses of docs/errors.md, "Statuses": each with its Connect codes
 * (the body's `code`), what it means on every path, and the headers it carries.
 */
const errorStatuses: Record<number, { name: string; codes: string[]; description: string; headers?: string[] }> = {
  400: {
    name: "BadRequest",
    codes: ["invalid_argument", "failed_precondition", "out_of_range"],
    description:
      "The request is invalid: a malformed body, an unknown or repeated query parameter, broken percent-encoding, or a value that breaks a rule. " +
      "A validation error lists every violation with its field path in `details[].debug.violations`.",
  },
  401: {
    name: "Unauthenticated",
    codes: ["unauthenticated"],
    description: "The credential is missing, malformed, unknown or revoked.",
    headers: ["WWW-Authenticate"],
  },
  403: {
    name: "PermissionDenied",
    codes: ["permission_denied"],
    description: "The credential is of a kind this operation does not take, or its role in the organisation is insufficient.",
  },
  404: { name: "NotFound", codes: ["not_found"], description: "Not found." },
  405: {
    name: "MethodNotAllowed",
    codes: ["unimplemented"],
    description: "The path exists but does not serve this method; `Allow` lists the methods it serves.",
    headers: ["Allow"],
  },
  409: { name: "Conflict", codes: ["already_exists", "aborted"], description: "The request conflicts with the current state." },
  412: {
    name: "PreconditionFailed",
    codes: ["failed_precondition"],
    description:
      "`If-Match` matches none of the current revision's entity tags (strong comparison, RFC 9110 §13.1.1: `W/` tags never match); nothing changed.",
  },
  413: { name: "ContentTooLarge", codes: ["resource_exhausted"], description: "The body is over the limit (counted after decompression)." },
  415: {
    name: "UnsupportedMediaType",
    codes: ["invalid_argument"],
    description: "The `Content-Type` is not one this operation takes, or the `Content-Encoding` is not `gzip`, `br` or `identity`.",
  },
  429: {
    name: "TooManyRequests",
    codes: ["resource_exhausted"],
    description: "Too many requests; `Retry-After` says when to try again.",
    headers: ["Retry-After"],
  },
  500: {
    name: "InternalError",
    codes: ["internal", "unknown", "data_loss"],
    description: "An internal error; its cause is logged on the server, never shown.",
  },
};

const yamlMediaTypes = ["application/yaml", "application/x-yaml", "text/yaml"];

const lowerFirst = (text: string) => text.charAt(0).toLowerCase() + text.slice(1);
const upperFirst = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);
const mebibytes = (bytes: number) => (bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : `${bytes} bytes`);

/** The first sentence of an RPC's comment without the RPC's own name: "GetConfig exports ..." -> "Exports ...". */
function summaryOf(method: DescMethod): string {
  const comment = commentOf(`${method.parent.typeName}.${method.name}`) ?? method.name;
  const sentence = /^(.*?)\.(\s|$)/s.exec(comment)?.[1] ?? comment;
  return upperFirst(sentence.startsWith(`${method.name} `) ? sentence.slice(method.name.length + 1) : sentence);
}

function fieldOf(message: DescMessage, name: string, route: RestRoute): DescField {
  const field = message.fields.find((f) => f.name === name);
  if (!field) throw new Error(`REST route ${route.method} ${route.pattern}: ${message.typeName} has no field ${name}`);
  return field;
}

/** Path placeholders, in order. */
const placeholdersOf = (pattern: string) => [...pattern.matchAll(/\{(\w+)\}/g)].map((m) => m[1] as string);

/**
 * Builds the OpenAPI 3.1.0 document of the platform's REST paths from the
 * routes table and the descriptors and proto comments of the RPCs behind
 * them: nothing in it is written by hand but the prose about the conventions
 * every path shares. The same inputs always give the same document, byte for
 * byte (`JSON.stringify`).
 */
export function createPlatformOpenApi(options: PlatformOpenApiOptions): OpenApiDocument {
  const schemas = createMessageSchemas();
  const usedSchemes = new Set<Credential>();
  const tags = new Map<string, string | undefined>();
  const operationIds = new Set<string>();
  const paths: Record<string, Record<string, JsonSchema>> = {};

  for (const route of options.routes) {
    const methods = typeof route.rpc === "function" ? (route.candidates ?? []) : [route.rpc];
    const first = methods[0];
    if (!first) throw new Error(`REST route ${route.method} ${route.pattern} picks its RPC from the body but lists no candidates`);
    const operationId = route.operationId ?? lowerFirst(first.name);
    if (operationIds.has(operationId)) {
      throw new Error(`REST route ${route.method} ${route.pattern}: operationId ${operationId} is taken; give the route an operationId`);
    }
    operationIds.add(operationId);
    const service = first.parent;
    if (!tags.has(service.name)) tags.set(service.name, commentOf(service.typeName));

    // What the path, query and headers carry is not in the body.
    const placeholders = placeholdersOf(route.pattern);
    const omit = new Set<string>([
      ...placeholders,
      ...Object.values(route.query ?? {}).map((q) => q.field),
      ...(route.ifMatchField ? [route.ifMatchField] : []),
      ...Object.keys(route.fixed ?? {}),
      ...(route.yamlField ? [route.yamlField] : []),
    ]);

    const parameters: JsonSchema[] = [];
    for (const name of placeholders) {
      const { description, ...schema } = schemas.fieldSchema(fieldOf(first.input, name, route), "request");
      parameters.push({ name, in: "path", required: true, ...(description ? { description } : {}), schema });
    }
    for (const [name, param] of Object.entries(route.query ?? {})) {
      const { description, ...fieldSchema } = schemas.fieldSchema(fieldOf(first.input, param.field, route), "request");
      const common = { name, in: "query", required: param.required === true, ...(description ? { description } : {}) };
      if (param.kind === "boolean") parameters.push({ ...common, schema: { type: "boolean" } });
      else if (param.kind === "integer") parameters.push({ ...common, schema: { type: "integer", minimum: 0 } });
      else if (param.kind === "list") {
        parameters.push({ ...common, style: "form", explode: false, schema: { type: "array", items: { type: "string" } } });
      } else parameters.push({ ...common, schema: fieldSchema });
    }
    if (route.ifMatchField) {
      const { description } = schemas.fieldSchema(fieldOf(first.input, route.ifMatchField, route), "request");
      parameters.push({
        name: "If-Match",
        in: "header",
        required: false,
        ...(description ? { description } : {}),
        schema: { type: "string" },
      });
    }

    let requestBody: JsonSchema | undefined;
    if (route.body === "yaml") {
      const field = fieldOf(first.input, route.yamlField ?? "yaml", route);
      const { description, ...schema } = schemas.fieldSchema(field, "request");
      requestBody = {
        required: true,
        ...(description ? { description } : {}),
        content: Object.fromEntries(yamlMediaTypes.map((type) => [type, { schema }])),
      };
    } else if (route.body === "json") {
      const bodies = methods.map((method) => schemas.messageSchema(method.input, "request", { omit, renames: route.aliases ?? {} }));
      const schema = bodies.length === 1 ? bodies[0] : { oneOf: bodies.map((body) => ({ ...body, minProperties: 1 })) };
      // An empty body reads as {}: it is required when some field has no explicit presence (proto3 `optional`).
      const required =
        methods.length > 1 ||
        first.input.fields.some(
          (f) => !omit.has(f.name) && !f.oneof && f.fieldKind !== "message" && f.presence === FeatureSet_FieldPresence.IMPLICIT,
        );
      requestBody = { required, content: { "application/json": { schema } } };
    }

    // Security: one requirement per accepted credential (any of them will do); roles name what an API key's account needs.
    const security: Record<string, string[]>[] = [];
    const words: string[] = [];
    for (const method of methods) {
      const rule = authRuleOf(method);
      for (const credential of rule.credentials) {
        // The dashboard's session (a cookie) reaches RPCs that also take a key; its pages call them over Connect.
        if (credential === Credential.NONE || credential === Credential.DASHBOARD_SESSION) continue;
        const scheme = credentialSchemes[credential];
        if (!scheme)
          throw new Error(`REST route ${route.pattern}: ${method.name} takes ${Credential[credential]}, which no REST caller has`);
        usedSchemes.add(credential);
        const roles = credential === Credential.API_KEY && rule.role === Role.ADMIN ? ["admin"] : [];
        if (!security.some((s) => scheme.scheme in s)) security.push({ [scheme.scheme]: roles });
        const phrase =
          credential === Credential.API_KEY
            ? `${credentialWords[credential]} whose account is ${rule.role === Role.ADMIN ? "an admin" : "a member"} of the organisation`
            : (credentialWords[credential] ?? "");
        if (!words.includes(phrase)) words.push(phrase);
      }
    }

    // Error statuses: those every REST path has, those its credential rule and body imply, and those the route adds.
    const errors = new Map<number, string[]>([
      [400, []],
      [500, []],
    ]);
    const add = (status: number, text?: string) => {
      const texts = errors.get(status) ?? [];
      if (text) texts.push(text);
      errors.set(status, texts);
    };
    if (security.length > 0) {
      add(401);
      add(403);
    }
    if (placeholders.includes("organization_id")) {
      add(404, "The organisation does not exist, or the key's account is not a member of it (the two are indistinguishable).");
    }
    if (route.body !== "none") {
      add(413, `The limit here is ${mebibytes(route.limit === "config" ? options.limits.configBody : options.limits.jsonBody)}.`);
      add(
        415,
        route.body === "yaml" ? "It takes `application/yaml`, `application/x-yaml` or `text/yaml`." : "It takes `application/json`.",
      );
    }
    if (route.ifMatchField) add(412);
    for (const [status, text] of Object.entries(route.errors ?? {})) add(Number(status), text);

    const responses: Record<string, JsonSchema> = {};
    const outputs = methods.map((method) => schemas.messageRef(method.output, "response"));
    const output = outputs.length === 1 ? (outputs[0] as JsonSchema) : { oneOf: outputs };
    const answer = methods.map((method) => commentOf(method.output.typeName) ?? `The answer of ${method.name}.`).join(" Or: ");
    if (route.rendered) {
      const rendered = route.rendered;
      const body = rendered.bodyField ? schemas.fieldSchema(fieldOf(first.output, rendered.bodyField, route), "response") : output;
      const headers: Record<string, JsonSchema> = {};
      for (const [header, field] of Object.entries(rendered.headers ?? {})) {
        const said = commentOf(`${first.output.typeName}.${field}`) ?? field;
        const name = header === "etag" ? "ETag" : header;
        headers[name] = {
          required: true,
          description: header === "etag" ? `${said} As a strong entity tag (\`"7"\`): send it back in \`If-Match\`.` : said,
          schema: { type: "string" },
        };
      }
      const content = { [rendered.contentType]: { schema: body } };
      responses["200"] = { description: answer, ...(Object.keys(headers).length > 0 ? { headers } : {}), content };
      for (const [status, text] of Object.entries(rendered.statuses ?? {})) responses[status] = { description: text, content };
    } else {
      responses["200"] = { description: answer, content: { "application/json": { schema: output } } };
    }
    for (const [status, texts] of errors) {
      const known = errorStatuses[status];
      if (!known) throw new Error(`REST route ${route.pattern}: status ${status} is not one of the error statuses of docs/errors.md`);
      responses[String(status)] =
        texts.length === 0
          ? { $ref: `#/components/responses/${known.name}` }
          : { ...errorResponse(status), description: [known.description, ...texts].join(" ") };
    }

    const description = [
      ...methods.map((method) => commentOf(`${method.parent.typeName}.${method.name}`)).filter((c): c is string => c !== undefined),
      words.length > 0 ? `Credential: ${words.join(", or ")}.` : "No credential needed.",
    ].join("\n\n");
    const operation: JsonSchema = {
      operationId,
      summary: route.summary ?? summaryOf(first),
      description,
      tags: [service.name],
      "x-rpc": methods.length === 1 ? `${service.typeName}/${first.name}` : methods.map((m) => `${m.parent.typeName}/${m.name}`),
      security,
      ...(parameters.length > 0 ? { parameters } : {}),
      ...(requestBody ? { requestBody } : {}),
      responses,
    };
    const item = paths[route.pattern] ?? {};
    item[route.method.toLowerCase()] = operation;
    paths[route.pattern] = item;
  }

  paths[openApiPath] = {
    get: {
      operationId: "getOpenApiDocument",
      summary: "This document",
      description: "The OpenAPI 3.1.0 document of the platform's REST paths, built once when the server starts.",
      security: [],
      parameters: [
        {
          name: "If-None-Match",
          in: "header",
          required: false,
          description: "The ETag of a copy already held: 304 when it is current (RFC 9110 §13.1.2).",
          schema: { type: "string" },
        },
      ],
      responses: {
        "200": {
          description: "This document.",
          headers: {
            ETag: { required: true, description: "Strong entity tag of the document's bytes.", schema: { type: "string" } },
            "Cache-Control": {
              required: true,
              description: "How long a copy may be used before it is revalidated.",
              schema: { type: "string" },
            },
          },
          content: { "application/json": { schema: { type: "object" } } },
        },
        "304": { description: "The copy named by `If-None-Match` is current." },
      },
    },
  };

  const errorComponents = Object.fromEntries(
    Object.keys(errorStatuses)
      .map(Number)
      .map((status) => [errorStatuses[status]?.name as string, errorResponse(status)]),
  );
  schemas.add("ConnectError", {
    type: "object",
    description: "The Connect JSON error body (https://connectrpc.com/docs/protocol#error-end-stream) of every platform path.",
    required: ["code"],
    properties: {
      code: {
        type: "string",
        description: "The Connect code (https://connectrpc.com/docs/protocol#error-codes).",
        enum: [...new Set(Object.values(errorStatuses).flatMap((s) => s.codes))].sort(),
      },
      message: {
        type: "string",
        description: "Says what to fix. Never a stack trace, a secret value, a key, a password, or text the request carried.",
      },
      details: { type: "array", items: { $ref: "#/components/schemas/ConnectErrorDetail" } },
    },
  });
  schemas.add("ConnectErrorDetail", {
    type: "object",
    description: "One detail of an error: on Gatehouse errors an `svc.v1.ErrorDetail`.",
    required: ["type", "value"],
    properties: {
      type: { type: "string", description: "The detail's message type, e.g. `svc.v1.ErrorDetail`." },
      value: {
        type: "string",
        contentEncoding: "base64",
        description: "The detail's binary protobuf encoding, standard base64 without padding.",
      },
      debug: {
        ...schemas.messageRef(ErrorDetailSchema, "detail"),
        description: "The detail as protobuf JSON (lowerCamelCase names; zero values left out).",
      },
    },
  });
  const securitySchemes = Object.fromEntries(
    [...usedSchemes]
      .sort((a, b) => a - b)
      .map((credential) => {
        const scheme = credentialSchemes[credential] as { scheme: string; prefix: string; valueName: string };
        return [
          scheme.scheme,
          {
            type: "http",
            scheme: "bearer",
            bearerFormat: `${scheme.prefix} + 43 base64url characters`,
            description: `${commentOf(`svc.v1.Credential.${scheme.valueName}`) ?? ""} Sent as \`Authorization: Bearer <key>\`.`.trim(),
          },
        ];
      }),
  );

  return {
    openapi: "3.1.0",
    info: {
      title: "Gatehouse platform REST API",
      version: options.version,
      description: [
        "The REST paths of the Gatehouse platform port. Each is a thin door onto a Connect RPC (named by `x-rpc`; the same RPCs " +
          "are served at `/<package.Service>/<Method>` over Connect, gRPC-Web and gRPC), generated from the REST routes table and the proto comments.",
        "Field names are snake_case; timestamps are RFC 3339 strings in UTC; 64-bit integers are decimal strings; enums are their value names. " +
          "Request bodies may be compressed with `Content-Encoding: gzip` or `br`. Unknown fields and query parameters are refused (400).",
        "Every error has the Connect JSON error body `{code, message, details}`. A path that does not exist is 404; a path that exists " +
          "with a method it does not serve is 405 with `Allow` (components/responses/MethodNotAllowed). Every answer carries `X-Request-Id`.",
      ].join("\n\n"),
      license: { name: "Apache-2.0", identifier: "Apache-2.0" },
    },
    servers: [{ url: options.publicUrl, description: "This Gatehouse platform (PUBLIC_URL)." }],
    tags: [...tags].map(([name, description]) => ({ name, ...(description ? { description } : {}) })),
    paths,
    components: {
      schemas: schemas.components(),
      responses: errorComponents,
      headers: {
        "WWW-Authenticate": {
          required: true,
          description: 'The scheme to authenticate with: `Bearer realm="gatehouse"` (RFC 9110 §11.6.1).',
          schema: { type: "string" },
        },
        "Retry-After": {
          required: true,
          description: "Seconds after which the request may be repeated (RFC 9110 §10.2.3).",
          schema: { type: "integer", minimum: 1 },
        },
        Allow: { required: true, description: "The methods the path serves (RFC 9110 §10.2.1).", schema: { type: "string" } },
      },
      securitySchemes,
    },
  };
}

/** An error answer of a status: the Connect error body with the status's codes, and its headers. */
function errorResponse(status: number): JsonSchema {
  const known = errorStatuses[status];
  if (!known) throw new Error(`no error status ${status}`);
  return {
    description: known.description,
    ...(known.headers ? { headers: Object.fromEntries(known.headers.map((h) => [h, { $ref: `#/components/headers/${h}` }])) } : {}),
    content: {
      "application/json": {
        schema: {
          allOf: [
            { $ref: "#/components/schemas/ConnectError" },
            { type: "object", properties: { code: { type: "string", enum: known.codes } } },
          ],
        },
      },
    },
  };
}
