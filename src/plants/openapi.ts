/**
 * The OpenAPI 3.1.0 document of the sample plant API: the single source of
 * truth. GET /openapi.json serves it as is, and every request body is
 * validated against its schemas (request-validator.ts), so the document and
 * the behaviour cannot drift apart.
 *
 * Schemas as docs/plants.md, "The sample plant API", describes them: Plant
 * {name required, tag}, NewPlant = Plant plus a required int64 id, Error
 * {error int32, message} both required. Two constraints are added where the
 * accepted ids or the storage decide:
 * - `id` has `minimum: 1` (docs/plants.md, "`id` is an int64, kept exactly":
 *   every integer from 1 to 9223372036854775807 is accepted, anything else
 *   is 400); the upper bound is the int64 format itself, checked exactly.
 * - `name` and `tag` exclude U+0000 and unpaired surrogates: PostgreSQL text
 *   cannot hold NUL and UTF-8 cannot carry a lone surrogate, so such a string
 *   could not be stored as sent.
 */
export const plantApiVersion = "1.0.0";

/** Text that every supported database stores exactly: no NUL, no unpaired surrogate. */
const storableText = "^[^\\u0000\\uD800-\\uDFFF]*$";

export const plantApiDocument = {
  openapi: "3.1.0",
  info: {
    title: "Gatehouse sample plant store",
    version: plantApiVersion,
    description:
      "A small API protected by Gatehouse sessions: POST a plant with a session token issued by the platform. " +
      "`id` is an int64 sent as a JSON number and kept exactly, up to 9223372036854775807.",
    license: { name: "Apache-2.0", identifier: "Apache-2.0" },
  },
  security: [{ bearerAuth: [] }],
  paths: {
    "/plants": {
      post: {
        operationId: "addPlant",
        summary: "Creates a plant",
        description: "Stores a plant in the organisation of the session. An `id` already taken in that organisation is refused with 400.",
        security: [{ bearerAuth: [] }],
        requestBody: {
          description: "The plant to add.",
          required: true,
          content: { "application/json": { schema: { $ref: "#/components/schemas/NewPlant" } } },
        },
        responses: {
          "200": {
            description: "The plant as stored.",
            content: { "application/json": { schema: { $ref: "#/components/schemas/Plant" } } },
          },
          "400": {
            description: "The body is not a valid NewPlant, or its id is taken; the message names the field.",
            content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
          },
          "401": {
            description: "No valid session token: missing, malformed, expired, revoked or not signed by this platform.",
            content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
          },
          default: {
            description: "Any other failure: 404 unknown path, 405 method, 413 body over 64 KiB, 415 not application/json.",
            content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
          },
        },
      },
    },
    "/openapi.json": {
      get: {
        operationId: "getOpenApiDocument",
        summary: "This document",
        security: [],
        responses: {
          "200": {
            description: "The OpenAPI 3.1.0 document of this API.",
            content: { "application/json": { schema: { type: "object" } } },
          },
        },
      },
    },
  },
  components: {
    schemas: {
      Plant: {
        type: "object",
        required: ["name"],
        properties: {
          name: { type: "string", description: "Name of the plant.", pattern: storableText },
          tag: { type: "string", description: "Tag that specifies the type.", pattern: storableText },
        },
      },
      NewPlant: {
        allOf: [
          { $ref: "#/components/schemas/Plant" },
          {
            type: "object",
            required: ["id"],
            properties: {
              id: { type: "integer", format: "int64", minimum: 1, description: "Identification number of the plant." },
            },
          },
        ],
      },
      Error: {
        type: "object",
        required: ["error", "message"],
        properties: {
          error: { type: "integer", format: "int32", description: "The HTTP status of the response." },
          message: { type: "string", description: "What went wrong, naming the field at fault." },
        },
      },
    },
    securitySchemes: {
      bearerAuth: {
        type: "http",
        scheme: "bearer",
        bearerFormat: "JWT",
        description: "A session token (ES256 JWT) issued by this Gatehouse platform, e.g. by VerifyMagicLink or a password login.",
      },
    },
  },
} as const;

/** The document's JSON as served. */
export const plantApiDocumentJson = JSON.stringify(plantApiDocument);
