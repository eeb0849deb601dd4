import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";

/**
 * Reading and checking an OpenAPI 3.1 document in tests: JSON pointers, $refs,
 * operations by id, and JSON Schema 2020-12 validation (ajv, strict mode, so a
 * keyword or format ajv does not know fails the test instead of passing
 * silently; only `required` inside `oneOf`/`not`, as oneofs and aliases use it,
 * may name properties declared elsewhere) of values against the schemas at any
 * place in the document.
 */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export interface Operation {
  path: string;
  method: string;
  operation: JsonObject;
}

const documentId = "urn:gatehouse:platform-openapi";

/** OpenAPI's own fields: annotations to ajv, which reads the document as one big schema. */
const openApiKeywords = [
  "openapi",
  "info",
  "servers",
  "paths",
  "components",
  "security",
  "tags",
  "discriminator",
  "xml",
  "example",
  "externalDocs",
  "x-rpc",
];

/** The formats the platform document uses, checked as the JSON mapping writes them. */
const stringFormats: Record<string, RegExp> = {
  int64: /^-?[0-9]{1,19}$/,
  uint64: /^[0-9]{1,20}$/,
  byte: /^[A-Za-z0-9+/]*={0,2}$/,
  // RFC 3339 in UTC, as protobuf's Timestamp JSON is written.
  "date-time": /^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?Z$/,
};
const numberFormats: Record<string, (value: number) => boolean> = {
  int32: (value) => Number.isInteger(value) && value >= -(2 ** 31) && value < 2 ** 31,
  float: (value) => Number.isFinite(value),
  double: (value) => Number.isFinite(value),
};

export const escapePointer = (segment: string) => segment.replace(/~/g, "~0").replace(/\//g, "~1");

/** The value at a JSON pointer (RFC 6901) such as `#/components/schemas/Secret`; undefined when nothing is there. */
export function resolvePointer(document: Json, pointer: string): Json | undefined {
  if (!pointer.startsWith("#")) throw new Error(`not a local reference: ${pointer}`);
  let node: Json | undefined = document;
  for (const raw of pointer.slice(1).split("/").slice(1)) {
    const key = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
    if (node === null || typeof node !== "object") return undefined;
    node = Array.isArray(node) ? node[Number(key)] : node[key];
  }
  return node;
}

/** Follows `$ref`s until an object that is not one (Response, Header and Parameter objects). */
export function deref(document: Json, node: Json | undefined): JsonObject {
  let current = node;
  for (let hops = 0; hops < 10; hops++) {
    if (current === null || typeof current !== "object" || Array.isArray(current)) throw new Error("not an object");
    const ref = current.$ref;
    if (typeof ref !== "string") return current;
    current = resolvePointer(document, ref);
  }
  throw new Error("too many $ref hops");
}

/** Every `$ref` in the document, with where it is. */
export function refsOf(node: Json, at = "#"): { at: string; ref: string }[] {
  if (node === null || typeof node !== "object") return [];
  const entries = Array.isArray(node) ? node.map((value, i) => [String(i), value] as const) : Object.entries(node);
  return entries.flatMap(([key, value]) => {
    const here = `${at}/${escapePointer(key)}`;
    return key === "$ref" && typeof value === "string" ? [{ at: here, ref: value }] : refsOf(value, here);
  });
}

/** Every operation of the document. */
export function operationsOf(document: JsonObject): Operation[] {
  const paths = document.paths as Record<string, Record<string, JsonObject>>;
  return Object.entries(paths).flatMap(([path, item]) => Object.entries(item).map(([method, operation]) => ({ path, method, operation })));
}

export function operationById(document: JsonObject, operationId: string): Operation {
  const found = operationsOf(document).find((op) => op.operation.operationId === operationId);
  if (!found) throw new Error(`the document has no operation ${operationId}`);
  return found;
}

/** Validates values against the schemas of a document, at JSON pointers into it. */
export function createSchemaChecker(document: JsonObject) {
  const ajv = new Ajv2020({ allErrors: true, strict: true, strictRequired: false });
  ajv.addVocabulary(openApiKeywords);
  for (const [name, pattern] of Object.entries(stringFormats)) ajv.addFormat(name, { type: "string", validate: pattern });
  for (const [name, validate] of Object.entries(numberFormats)) ajv.addFormat(name, { type: "number", validate });
  ajv.addSchema(document, documentId);
  const compiled = new Map<string, ValidateFunction>();
  return {
    /** ajv's findings for a value against the schema at a pointer (`#/components/schemas/X` or path segments); [] when valid. */
    errors(at: string | string[], value: unknown): string[] {
      const pointer = typeof at === "string" ? at : `#/${at.map((s) => encodeURIComponent(escapePointer(s))).join("/")}`;
      let check = compiled.get(pointer);
      if (!check) {
        check = ajv.compile({ $ref: `${documentId}${pointer}` });
        compiled.set(pointer, check);
      }
      return check(value) ? [] : (check.errors ?? []).map((e) => `${e.instancePath || "(body)"} ${e.message ?? e.keyword}`);
    },
  };
}
