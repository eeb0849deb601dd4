import { ScalarType, type DescEnum, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { FeatureSet_FieldPresence } from "@bufbuild/protobuf/wkt";
import { protoComments } from "./proto-comments.js";

/** A JSON Schema (2020-12, the dialect of OpenAPI 3.1) as plain data. */
export type JsonSchema = { [keyword: string]: unknown };

/**
 * The JSON form a message travels in (https://protobuf.dev/programming-guides/json/).
 * - `response`: what the REST door writes: proto field names (`useProtoFieldName`)
 *   and every implicit-presence field even when zero (`alwaysEmitImplicit`), so
 *   those fields are `required`.
 * - `request`: what the REST door reads: proto field names, unknown fields refused
 *   (`ignoreUnknownFields: false`), every field optional.
 * - `detail`: an error detail's `debug`, written with the default options:
 *   lowerCamelCase names, zero values left out.
 */
export type JsonForm = "response" | "request" | "detail";

const componentSuffix: Record<JsonForm, string> = { response: "", request: "Input", detail: "" };

/** Joins the hard-wrapped lines of a proto comment into paragraphs (list items keep their lines). */
export function reflow(comment: string): string {
  return comment
    .split(/\n\s*\n/)
    .map((paragraph) => paragraph.replace(/\n(?![-*] )/g, " "))
    .join("\n\n");
}

/** The comment of a proto element by full name, reflowed; undefined when it has none. */
export function commentOf(fullName: string): string | undefined {
  const text = protoComments[fullName];
  return text === undefined ? undefined : reflow(text);
}

const describe = (schema: JsonSchema, description: string | undefined): JsonSchema =>
  description === undefined ? schema : { ...schema, description };

/** 64-bit integers are JSON strings of decimal digits (the JSON mapping: they do not fit a double). */
const int64 = { type: "string", format: "int64", pattern: "^-?[0-9]{1,19}$" };
const uint64 = { type: "string", format: "uint64", pattern: "^[0-9]{1,20}$" };
/** float and double: a number, or one of the strings the JSON mapping uses for the values a number cannot hold. */
const floating = (format: string): JsonSchema => ({
  anyOf: [
    { type: "number", format },
    { type: "string", enum: ["NaN", "Infinity", "-Infinity"] },
  ],
});

function scalarSchema(scalar: ScalarType): JsonSchema {
  switch (scalar) {
    case ScalarType.STRING:
      return { type: "string" };
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.BYTES:
      // Standard base64 with padding (RFC 4648 §4); URL-safe base64 is accepted on input too.
      return { type: "string", format: "byte", contentEncoding: "base64" };
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return { type: "integer", format: "int32" };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return { type: "integer", minimum: 0, maximum: 4294967295 };
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return { ...int64 };
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return { ...uint64 };
    case ScalarType.FLOAT:
      return floating("float");
    case ScalarType.DOUBLE:
      return floating("double");
  }
}

/** The well-known types have JSON forms of their own (https://protobuf.dev/programming-guides/json/). */
function wellKnownSchema(message: DescMessage): JsonSchema | undefined {
  switch (message.typeName) {
    case "google.protobuf.Timestamp":
      // RFC 3339, always UTC ("Z") on output, fractional seconds as needed.
      return { type: "string", format: "date-time" };
    case "google.protobuf.Duration":
      return { type: "string", pattern: "^-?[0-9]+(\\.[0-9]{1,9})?s$" };
    case "google.protobuf.FieldMask":
      return { type: "string" };
    case "google.protobuf.Struct":
      return { type: "object", additionalProperties: true };
    case "google.protobuf.Value":
      return {};
    case "google.protobuf.ListValue":
      return { type: "array" };
    case "google.protobuf.Empty":
      return { type: "object", additionalProperties: false };
    case "google.protobuf.Any":
      return { type: "object", required: ["@type"], properties: { "@type": { type: "string" } } };
    case "google.protobuf.DoubleValue":
    case "google.protobuf.FloatValue":
    case "google.protobuf.Int64Value":
    case "google.protobuf.UInt64Value":
    case "google.protobuf.Int32Value":
    case "google.protobuf.UInt32Value":
    case "google.protobuf.BoolValue":
    case "google.protobuf.StringValue":
    case "google.protobuf.BytesValue": {
      const value = message.fields[0];
      return value?.fieldKind === "scalar" ? scalarSchema(value.scalar) : undefined;
    }
    default:
      return undefined;
  }
}

/** The name of a type without its package (nested types keep their parents: `HealthCheckResponse.ServingStatus`). */
function shortName(desc: DescMessage | DescEnum): string {
  const pkg = desc.file.proto.package;
  return pkg ? desc.typeName.slice(pkg.length + 1) : desc.typeName;
}

/**
 * JSON Schemas of protobuf messages and enums, from their descriptors and
 * proto comments. Messages and enums become components (`#/components/schemas/<Name>`,
 * `<Name>Input` for a message in its request form), collected as they are
 * referenced; well-known types are inlined in their JSON form.
 */
export function createMessageSchemas() {
  const components = new Map<string, JsonSchema>();
  /** Which type and form owns each component name, so that two never share one. */
  const owners = new Map<string, string>();

  function claim(name: string, owner: string): boolean {
    const current = owners.get(name);
    if (current === owner) return false;
    if (current !== undefined) throw new Error(`OpenAPI components: ${owner} and ${current} would both be named ${name}`);
    owners.set(name, owner);
    return true;
  }

  function enumRef(desc: DescEnum): JsonSchema {
    const name = shortName(desc);
    if (claim(name, desc.typeName)) {
      const values = desc.values.map((value) => {
        const comment = commentOf(`${desc.typeName}.${value.name}`);
        return comment === undefined ? `- \`${value.name}\`` : `- \`${value.name}\`: ${comment}`;
      });
      const intro = commentOf(desc.typeName);
      components.set(name, {
        type: "string",
        enum: desc.values.map((value) => value.name),
        description: [...(intro === undefined ? [] : [intro, ""]), ...values].join("\n"),
      });
    }
    return { $ref: `#/components/schemas/${name}` };
  }

  /** The schema of a message in a form: a well-known type inline, any other a $ref to its component. */
  function messageRef(desc: DescMessage, form: JsonForm): JsonSchema {
    const known = wellKnownSchema(desc);
    if (known) return known;
    const name = shortName(desc) + componentSuffix[form];
    if (claim(name, `${desc.typeName} (${form})`)) {
      // Claimed before it is built, so that a recursive message refers to itself.
      components.set(name, {});
      components.set(name, messageSchema(desc, form, { omit: new Set(), renames: {} }));
    }
    return { $ref: `#/components/schemas/${name}` };
  }

  function valueSchema(field: DescField, form: JsonForm): JsonSchema {
    switch (field.fieldKind) {
      case "scalar":
        return scalarSchema(field.scalar);
      case "enum":
        return field.enum.typeName === "google.protobuf.NullValue" ? { type: "null" } : enumRef(field.enum);
      case "message":
        return messageRef(field.message, form);
      case "list": {
        const items =
          field.listKind === "scalar"
            ? scalarSchema(field.scalar)
            : field.listKind === "enum"
              ? enumRef(field.enum)
              : messageRef(field.message, form);
        return { type: "array", items };
      }
      case "map": {
        const values =
          field.mapKind === "scalar"
            ? scalarSchema(field.scalar)
            : field.mapKind === "enum"
              ? enumRef(field.enum)
              : messageRef(field.message, form);
        // Map keys are JSON object keys: integer and boolean keys are written as their decimal or "true"/"false" text.
        const keys =
          field.mapKey === ScalarType.STRING
            ? undefined
            : field.mapKey === ScalarType.BOOL
              ? { enum: ["true", "false"] }
              : { pattern: "^-?[0-9]+$" };
        return { type: "object", ...(keys ? { propertyNames: keys } : {}), additionalProperties: values };
      }
    }
  }

  /** The schema of one field in a form, described by its proto comment. */
  function fieldSchema(field: DescField, form: JsonForm): JsonSchema {
    return describe(valueSchema(field, form), commentOf(`${field.parent.typeName}.${field.name}`));
  }

  /** A field is always present in a response written with `alwaysEmitImplicit` unless it has explicit presence. */
  function alwaysWritten(field: DescField): boolean {
    if (field.oneof) return false;
    if (field.fieldKind === "list" || field.fieldKind === "map") return true;
    return field.fieldKind !== "message" && field.presence === FeatureSet_FieldPresence.IMPLICIT;
  }

  /**
   * The schema of a message in a form. `omit` leaves out fields the path,
   * query or headers carry; `renames` gives a field another name (an alias
   * accepted instead of it: both are documented, and sending both is refused).
   */
  function messageSchema(
    desc: DescMessage,
    form: JsonForm,
    shape: { omit: ReadonlySet<string>; renames: Record<string, string> },
  ): JsonSchema {
    const nameOf = (field: DescField) => (form === "detail" ? field.jsonName : field.name);
    const properties: Record<string, JsonSchema> = {};
    const required: string[] = [];
    const constraints: JsonSchema[] = [];
    for (const field of desc.fields) {
      const name = nameOf(field);
      if (shape.omit.has(field.name)) continue;
      const alias = Object.entries(shape.renames).find(([, target]) => target === field.name)?.[0];
      if (alias !== undefined) {
        const schema = fieldSchema(field, form);
        const said = typeof schema.description === "string" ? `${schema.description} ` : "";
        properties[alias] = { ...schema, description: `${said}(\`${field.name}\` is accepted instead; send one of the two.)` };
        constraints.push({ not: { required: [alias, name] } });
      }
      properties[name] = fieldSchema(field, form);
      if (form === "response" && alwaysWritten(field)) required.push(name);
    }
    // A oneof sets at most one of its fields.
    for (const oneof of desc.oneofs) {
      const members = oneof.fields.map((field) => nameOf(field)).filter((name) => name in properties);
      if (members.length < 2) continue;
      constraints.push({
        oneOf: [...members.map((name) => ({ required: [name] })), { not: { anyOf: members.map((name) => ({ required: [name] })) } }],
      });
    }
    const schema: JsonSchema = { type: "object" };
    const comment = commentOf(desc.typeName);
    if (comment !== undefined) schema.description = comment;
    schema.properties = properties;
    if (required.length > 0) schema.required = required;
    if (form === "request") schema.additionalProperties = false;
    if (constraints.length === 1) Object.assign(schema, constraints[0]);
    else if (constraints.length > 1) schema.allOf = constraints;
    return schema;
  }

  return {
    /** Adds a component that is not a message (the error body). */
    add(name: string, schema: JsonSchema): void {
      if (!claim(name, name)) throw new Error(`OpenAPI components: ${name} is added twice`);
      components.set(name, schema);
    },
    messageRef,
    messageSchema,
    fieldSchema,
    /** The components collected so far, by name (sorted, so that the document does not depend on the order of use). */
    components(): Record<string, JsonSchema> {
      return Object.fromEntries([...components].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    },
  };
}

export type MessageSchemas = ReturnType<typeof createMessageSchemas>;
