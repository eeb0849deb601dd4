import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import type { Violation } from "../domain/errors.js";
import { isInt32, isInt64, validationView, type ExactJson } from "./exact-json.js";

/**
 * Request validation driven by an OpenAPI 3.1 document: ajv (JSON Schema
 * 2020-12, the dialect of OpenAPI 3.1 Schema Objects) compiles the request
 * body schema of each operation straight out of the document, `$ref`s
 * included. Whether a body is required and which media types are accepted
 * come from the document's requestBody too. Nothing here knows a field name.
 */

/** Top-level OpenAPI fields and the OpenAPI vocabulary of Schema Objects: annotations to ajv. */
const openApiKeywords = [
  "openapi",
  "info",
  "jsonSchemaDialect",
  "servers",
  "paths",
  "webhooks",
  "components",
  "security",
  "tags",
  "externalDocs",
  "discriminator",
  "xml",
  "example",
];

const documentId = "urn:gatehouse:openapi";

/** The OpenAPI Format Registry formats a number can carry, checked exactly (see exact-json.ts). */
const numberFormats: Record<string, (value: number) => boolean> = { int64: isInt64, int32: isInt32 };

const formatWords: Record<string, string> = {
  int64: "an int64 (-9223372036854775808 to 9223372036854775807)",
  int32: "an int32 (-2147483648 to 2147483647)",
};

interface OpenApiDocument {
  paths: Record<string, Record<string, { requestBody?: { required?: boolean; content: Record<string, unknown> } }>>;
}

/** What a request body check needs to know about one operation. */
export interface BodyValidator {
  /** Media types the operation accepts, lower-case, from the document. */
  readonly mediaTypes: readonly string[];
  readonly required: boolean;
  /** Every violation of the body, each naming its field ("name", "id", "body" for the whole). */
  validate(body: ExactJson): Violation[];
}

export interface RequestValidator {
  /** The body validator of one operation (path as in the document, lower-case method). */
  body(path: string, method: string, mediaType?: string): BodyValidator;
}

/** Builds the validators of a document; throws when the document's schemas do not compile (strict mode). */
export function createRequestValidator(document: object): RequestValidator {
  const ajv = new Ajv2020({ allErrors: true, strict: true });
  ajv.addVocabulary(openApiKeywords);
  for (const [name, validate] of Object.entries(numberFormats)) ajv.addFormat(name, { type: "number", validate });
  ajv.addSchema(document, documentId);
  const paths = (document as OpenApiDocument).paths;

  return {
    body(path, method, mediaType = "application/json") {
      const requestBody = paths[path]?.[method]?.requestBody;
      if (!requestBody) throw new Error(`the document has no request body for ${method.toUpperCase()} ${path}`);
      const pointer = ["paths", path, method, "requestBody", "content", mediaType, "schema"].map(escapePointer).join("/");
      const check = ajv.compile({ $ref: `${documentId}#/${pointer}` });
      return {
        mediaTypes: Object.keys(requestBody.content).map((type) => type.toLowerCase()),
        required: requestBody.required === true,
        validate: (body) => violationsOf(check, validationView(body)),
      };
    },
  };
}

function violationsOf(check: ValidateFunction, view: unknown): Violation[] {
  if (check(view)) return [];
  const byField = new Map<string, string>();
  for (const error of check.errors ?? []) {
    const field = fieldOf(error);
    // The first verdict on a field is the one to fix (a string id is "must be
    // an integer", not also "must be an int64").
    if (!byField.has(field)) byField.set(field, describe(error));
  }
  return [...byField].map(([field, description]) => ({ field, description }));
}

/** The dotted path of the field an error is about; "body" for the body itself. */
function fieldOf(error: ErrorObject): string {
  const parts = error.instancePath
    .split("/")
    .slice(1)
    .map((part) => part.replace(/~1/g, "/").replace(/~0/g, "~"));
  if (error.keyword === "required") parts.push(String((error.params as { missingProperty: string }).missingProperty));
  return parts.length === 0 ? "body" : parts.join(".");
}

function describe(error: ErrorObject): string {
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case "required":
      return "is required";
    case "type": {
      const type = String(params.type);
      return `must be ${/^[aeiou]/.test(type) ? "an" : "a"} ${type}`;
    }
    case "minimum":
      return `must be at least ${String(params.limit)}`;
    case "maximum":
      return `must be at most ${String(params.limit)}`;
    case "format": {
      const format = String(params.format);
      return `must be ${formatWords[format] ?? `in the ${format} format`}`;
    }
    case "pattern":
      return `must match the pattern ${String(params.pattern)}`;
    default:
      return error.message ?? `breaks the ${error.keyword} rule`;
  }
}

/** A JSON Pointer segment (RFC 6901), percent-encoded for use in a URI fragment. */
function escapePointer(segment: string): string {
  return encodeURIComponent(segment.replace(/~/g, "~0").replace(/\//g, "~1"));
}
