import { compareResources, resourceKinds, type CanonicalResource, type ResourceKind } from "./config-document.js";

/**
 * Writes a configuration as a version 1 YAML document. The output depends on
 * the state only: resources sorted by kind (in the order of the format), then
 * by name; fields in canonical order, each on one line (a list of mappings,
 * such as an upstream's targets, one entry per line); one spelling per scalar. Reading it back
 * gives the same canonical resources, so export is a fixed point of import.
 */
export function renderConfigDocument(resources: readonly CanonicalResource[]): string {
  const byKind: Record<ResourceKind, CanonicalResource[]> = { domains: [], upstreams: [], plugins: [], rules: [], routes: [] };
  for (const resource of resources) byKind[resource.kind].push(resource);
  // A resource's YAML is about as long as its canonical JSON: one buffer of that size rarely needs to grow.
  let expected = 64;
  for (const resource of resources) expected += resource.spec.length + 16;
  const out = new TextWriter(expected + (expected >> 3));
  out.write("version: 1\n");
  for (const kind of resourceKinds) {
    const list = byKind[kind];
    if (list.length === 0) {
      out.write(`${kind}: []\n`);
      continue;
    }
    out.write(`${kind}:\n`);
    if (!isSortedByName(list)) list.sort(compareResources);
    for (const resource of list) {
      const value = (resource.value ?? JSON.parse(resource.spec)) as Record<string, unknown>;
      let first = true;
      for (const key in value) {
        const field = value[key];
        if (isListOfMappings(field)) {
          // An upstream's targets: one entry per line, so that a diff shows the target that changed.
          out.write(lineStart(first, key).trimEnd());
          out.write("\n");
          for (const item of field) {
            out.write("      - ");
            writeValue(out, item);
            out.write("\n");
          }
        } else {
          out.write(lineStart(first, key));
          writeValue(out, field);
          out.write("\n");
        }
        first = false;
      }
    }
  }
  return out.text();
}

/**
 * UTF-8 text written into one growing buffer and decoded once. A 10,000-route
 * document is written in some 300,000 pieces: concatenating them allocated a
 * rope of intermediate strings several times the document's size, which an
 * import then kept alive next to everything else it holds.
 */
class TextWriter {
  private buffer: Buffer;
  private length = 0;

  constructor(capacity: number) {
    this.buffer = Buffer.allocUnsafe(capacity);
  }

  write(piece: string): void {
    // UTF-8 takes at most 3 bytes per UTF-16 code unit.
    if (this.buffer.length - this.length < piece.length * 3) {
      const grown = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.length + piece.length * 3));
      this.buffer.copy(grown, 0, 0, this.length);
      this.buffer = grown;
    }
    this.length += this.buffer.write(piece, this.length, "utf8");
  }

  text(): string {
    return this.buffer.toString("utf8", 0, this.length);
  }
}

/** "  - key: " (a resource's first field) or "    key: ", built once per key. */
const lineStarts = [new Map<string, string>(), new Map<string, string>()] as const;
function lineStart(first: boolean, key: string): string {
  const known = lineStarts[first ? 0 : 1];
  let start = known.get(key);
  if (start === undefined) {
    start = `${first ? "  - " : "    "}${key}: `;
    // Resources have a handful of fields; the bound only guards the map.
    if (known.size < 256) known.set(key, start);
  }
  return start;
}

function isListOfMappings(value: unknown): value is object[] {
  return (
    Array.isArray(value) && value.length > 0 && value.every((item) => item !== null && typeof item === "object" && !Array.isArray(item))
  );
}

function isSortedByName(list: readonly CanonicalResource[]): boolean {
  for (let i = 1; i < list.length; i++) if ((list[i - 1] as CanonicalResource).name >= (list[i] as CanonicalResource).name) return false;
  return true;
}

/** A value on one line: scalars, and collections in flow style. */
function writeValue(out: TextWriter, value: unknown): void {
  if (typeof value === "string") out.write(renderString(value));
  else if (typeof value === "number" || typeof value === "boolean") out.write(String(value));
  else if (Array.isArray(value)) {
    out.write("[");
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out.write(", ");
      writeValue(out, value[i]);
    }
    out.write("]");
  } else if (value !== null && typeof value === "object") {
    out.write("{");
    let first = true;
    for (const key in value) {
      if (!first) out.write(", ");
      first = false;
      out.write(renderKey(key));
      out.write(": ");
      writeValue(out, (value as Record<string, unknown>)[key]);
    }
    out.write("}");
  } else out.write("null");
}

// Plain scalars are written only when they cannot be read as anything but
// this string, by the YAML 1.2 core schema or by YAML 1.1 readers.
// No spaces, no flow indicators (,[]{}), no "#", and a safe first character.
const plain = /^[A-Za-z0-9_/.][A-Za-z0-9_/.:@+=~()!$&'*;%-]*$/;
const plainKey = /^[A-Za-z0-9_][A-Za-z0-9_./-]*$/;
const notAString =
  /^(?:~|null|Null|NULL|true|True|TRUE|false|False|FALSE|y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF|[-+]?[0-9][0-9_]*|0o[0-7]+|0x[0-9a-fA-F]+|[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN|[-+]?(?:\.[0-9]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?|[0-9]+(?::[0-5]?[0-9])+(?:\.[0-9_]*)?|\d{4}-\d\d?-\d\d?.*)$/;

function isPlain(value: string): boolean {
  // ": " cannot occur (no spaces); a trailing ":" would read as a mapping key.
  return plain.test(value) && !notAString.test(value) && !value.endsWith(":");
}

function renderString(value: string): string {
  return isPlain(value) ? value : quote(value);
}

function renderKey(key: string): string {
  return plainKey.test(key) && !notAString.test(key) ? key : quote(key);
}

/** A double-quoted scalar: JSON's escapes are YAML's, plus characters YAML wants escaped. */
function quote(value: string): string {
  return JSON.stringify(value).replace(
    /[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}
