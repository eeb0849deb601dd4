import type { JsonValue } from "@bufbuild/protobuf";
import { DomainError } from "../domain/errors.js";

/** Nesting deeper than this in a JSON body is refused with a 4xx, never a 5xx (the limit YAML documents have too). */
export const maxJsonDepth = 64;

const openBrace = 0x7b;
const closeBrace = 0x7d;
const openBracket = 0x5b;
const closeBracket = 0x5d;
const quote = 0x22;
const backslash = 0x5c;

/**
 * Parses a JSON request body. Errors say where the problem is (byte offset,
 * line and column) and what was expected, never the text around it: a
 * malformed body may hold a password, and V8's own message quotes the bytes
 * near the error.
 *
 * The depth is checked before parsing, in one pass over the bytes that counts
 * brackets outside strings: V8 parses any depth, but what reads the value
 * afterwards (protobuf-es on a Struct, our own walkers) recurses.
 */
export function parseJsonBody(bytes: Uint8Array, what = "request body"): JsonValue {
  // Nesting deeper than maxJsonDepth takes more brackets than a shorter body holds.
  const depthError = bytes.length <= maxJsonDepth ? -1 : findExcessiveDepth(bytes);
  if (depthError !== -1) {
    throw malformed(what, bytes, depthError, `nesting is deeper than ${maxJsonDepth} levels`);
  }
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
  try {
    return JSON.parse(text) as JsonValue;
  } catch {
    const problem = locateJsonError(text);
    throw malformed(what, bytes, problem.offset, problem.expected);
  }
}

/** The byte offset at which nesting first exceeds maxJsonDepth, or -1. */
function findExcessiveDepth(bytes: Uint8Array): number {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i] as number;
    if (inString) {
      if (byte === backslash) i++;
      else if (byte === quote) inString = false;
    } else if (byte === quote) inString = true;
    else if (byte === openBrace || byte === openBracket) {
      if (++depth > maxJsonDepth) return i;
    } else if (byte === closeBrace || byte === closeBracket) depth--;
  }
  return -1;
}

function malformed(what: string, bytes: Uint8Array, charOffset: number, expected: string): DomainError {
  const { line, column } = positionOf(bytes, charOffset);
  return new DomainError(
    "invalid_argument",
    "malformed_json",
    `${what} is not valid JSON: ${expected} at line ${line}, column ${column} (byte ${charOffset})`,
    [{ field: "body", description: `is not valid JSON: ${expected}`, line, column }],
  );
}

/** 1-based line and column of an offset, counting line feeds. */
function positionOf(bytes: Uint8Array, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  const end = Math.min(offset, bytes.length);
  for (let i = 0; i < end; i++) {
    if (bytes[i] === 0x0a) {
      line++;
      lineStart = i + 1;
    }
  }
  return { line, column: end - lineStart + 1 };
}

/**
 * Finds where a text that JSON.parse refused goes wrong (RFC 8259 grammar),
 * and what was expected there. Runs only on the error path.
 */
export function locateJsonError(text: string): { offset: number; expected: string } {
  let i = 0;
  const n = text.length;
  const fail = (expected: string): never => {
    throw { offset: i, expected };
  };
  const ws = () => {
    while (i < n && (text[i] === " " || text[i] === "\t" || text[i] === "\n" || text[i] === "\r")) i++;
  };
  const literal = (word: string) => {
    for (const ch of word) {
      if (text[i] !== ch) fail(`expected "${word}"`);
      i++;
    }
  };
  const string = () => {
    i++; // opening quote
    while (i < n) {
      const ch = text.charCodeAt(i);
      if (ch === 0x22) {
        i++;
        return;
      }
      if (ch < 0x20) fail("a control character must be escaped inside a string");
      if (ch === 0x5c) {
        i++;
        const esc = text[i];
        if (esc === "u") {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(i + 1, i + 5))) fail("expected four hex digits after \\u");
          i += 5;
        } else if (esc !== undefined && '"\\/bfnrt'.includes(esc)) i++;
        else fail("invalid escape sequence in a string");
      } else i++;
    }
    fail("unterminated string");
  };
  const number = () => {
    const match = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/.exec(text.slice(i, i + 400));
    if (!match || match[0].length === 0 || match[0] === "-") fail("expected a value (string, number, object, array, true, false or null)");
    i += (match as RegExpExecArray)[0].length;
  };
  // An explicit stack instead of recursion: the depth was bounded before, but stay iterative anyway.
  const value = () => {
    const stack: ("object" | "array")[] = [];
    for (;;) {
      ws();
      const ch = text[i];
      if (ch === "{") {
        i++;
        ws();
        if (text[i] === "}") i++;
        else {
          stack.push("object");
          if (text[i] !== '"') fail('expected a member name in double quotes or "}"');
          string();
          ws();
          if (text[i] !== ":") fail('expected ":" after a member name');
          i++;
          continue;
        }
      } else if (ch === "[") {
        i++;
        ws();
        if (text[i] === "]") i++;
        else {
          stack.push("array");
          continue;
        }
      } else if (ch === '"') string();
      else if (ch === "t") literal("true");
      else if (ch === "f") literal("false");
      else if (ch === "n") literal("null");
      else if (ch !== undefined && (ch === "-" || (ch >= "0" && ch <= "9"))) number();
      else
        fail(
          ch === undefined
            ? "unexpected end of input: expected a value"
            : "expected a value (string, number, object, array, true, false or null)",
        );
      // After a value: close containers or move to the next element.
      for (;;) {
        const top = stack[stack.length - 1];
        if (top === undefined) return;
        ws();
        if (text[i] === ",") {
          i++;
          if (top === "object") {
            ws();
            if (text[i] !== '"') fail("expected a member name in double quotes");
            string();
            ws();
            if (text[i] !== ":") fail('expected ":" after a member name');
            i++;
          }
          break;
        }
        if ((top === "object" && text[i] === "}") || (top === "array" && text[i] === "]")) {
          i++;
          stack.pop();
          continue;
        }
        fail(top === "object" ? 'expected "," or "}"' : 'expected "," or "]"');
      }
    }
  };
  try {
    value();
    ws();
    if (i < n) fail("unexpected text after the JSON value");
    // JSON.parse refused what this grammar accepts (it should not happen): point at the start.
    return { offset: 0, expected: "malformed JSON" };
  } catch (problem) {
    if (problem && typeof problem === "object" && "offset" in problem) {
      const found = problem as { offset: number; expected: string };
      // The offset is in UTF-16 code units; report bytes, as the body arrived.
      return { offset: Buffer.byteLength(text.slice(0, found.offset)), expected: found.expected };
    }
    throw problem;
  }
}
