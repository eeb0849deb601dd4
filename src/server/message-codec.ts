import { fromBinary, fromJson, toBinary, toJson, type DescMessage, type JsonValue, type Message } from "@bufbuild/protobuf";
import { DomainError } from "../domain/errors.js";
import { parseJsonBody } from "./json-body.js";

/** How a message travels: protobuf JSON or the binary encoding. */
export type Codec = "json" | "binary";

const jsonRead = { ignoreUnknownFields: false } as const;

/**
 * Decodes one request message. Every failure is invalid_argument with a
 * message that names the field and what it must be, and never repeats what
 * the request carried (protobuf-es quotes the offending value: "expected
 * string, got hunter2").
 */
export function decodeMessage(desc: DescMessage, codec: Codec, bytes: Uint8Array): Message {
  if (codec === "binary") {
    try {
      return fromBinary(desc, bytes);
    } catch (error) {
      throw new DomainError(
        "invalid_argument",
        "malformed_request",
        `the request is not a valid binary ${desc.typeName} message (${binaryProblem(error)})`,
      );
    }
  }
  return decodeJson(desc, bytes.length === 0 ? {} : parseJsonBody(bytes));
}

/** Decodes a message from a JSON value already parsed (the REST door builds it from path, query and body). */
export function decodeJson(desc: DescMessage, json: JsonValue): Message {
  try {
    return fromJson(desc, json, jsonRead);
  } catch (error) {
    throw new DomainError("invalid_argument", "malformed_request", describeJsonProblem(desc, error));
  }
}

export function encodeMessage(desc: DescMessage, codec: Codec, message: Message): Uint8Array {
  return codec === "binary" ? toBinary(desc, message) : Buffer.from(JSON.stringify(toJson(desc, message)));
}

/**
 * An answer's body as the Connect door writes it: JSON as text, binary as
 * bytes. Text is handed to Node as a string on purpose: Node then writes the
 * headers and a string body in one write(), where a Buffer body takes a
 * writev() of two chunks, a measurable share of a cheap call.
 */
export function encodeBody(desc: DescMessage, codec: Codec, message: Message): Uint8Array | string {
  return codec === "binary" ? toBinary(desc, message) : JSON.stringify(toJson(desc, message));
}

function binaryProblem(error: unknown): string {
  const text = error instanceof Error ? error.message : "";
  // protobuf-es describes wire problems by offset and wire type ("premature EOF", "invalid wire type 7"), never by content.
  return /^[\w\s:.,()-]{1,120}$/.test(text) ? text : "malformed protobuf encoding";
}

/**
 * protobuf-es reports `cannot decode field svc.v1.X.password from JSON:
 * expected string, got hunter2` or `key "..." is unknown`; keep the schema's
 * words (field name, expected type), drop the request's.
 */
function describeJsonProblem(desc: DescMessage, error: unknown): string {
  const text = error instanceof Error ? error.message : "";
  const field = /cannot decode field ([\w.]+) from JSON: (.*)$/s.exec(text);
  if (field) {
    const path = field[1] as string;
    const name = path.slice(path.lastIndexOf(".") + 1);
    const expected = /^expected ([\w ]{1,40})(?:,|$)/.exec(field[2] as string)?.[1];
    return expected ? `field "${name}" must be ${article(expected)}` : `field "${name}" has a value it cannot take`;
  }
  if (/key ".*" is unknown/s.test(text)) {
    const known = desc.fields.map((f) => f.jsonName);
    return known.length === 0
      ? `the request has a field that ${desc.typeName} does not define (it takes no fields)`
      : `the request has a field that ${desc.typeName} does not define; its fields are: ${known.join(", ")}`;
  }
  const enumValue = /cannot decode enum ([\w.]+) from JSON/.exec(text);
  if (enumValue) return `a value of ${enumValue[1]} is not one of its names`;
  return `the request does not match ${desc.typeName}`;
}

function article(type: string): string {
  if (/^(object|array)\b/.test(type)) return `an ${type}`;
  if (/^(string|number|boolean|integer)\b/.test(type)) return `a ${type}`;
  return type;
}
