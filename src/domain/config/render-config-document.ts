import { compareResources, resourceKinds, type CanonicalResource, type ResourceKind } from "./config-document.js";

/**
 * Writes a configuration as a version 1 YAML document. The output depends on
 * the state only: resources sorted by kind (in the order of the format), then
 * by name; fields in canonical order; one spelling per scalar. Reading it back
 * gives the same canonical resources, so export is a fixed point of import.
 */
export function renderConfigDocument(resources: readonly CanonicalResource[]): string {
  const byKind: Record<ResourceKind, CanonicalResource[]> = { domains: [], plugins: [], rules: [], routes: [] };
  for (const resource of resources) byKind[resource.kind].push(resource);
  let out = "version: 1\n";
  for (const kind of resourceKinds) {
    const list = byKind[kind];
    if (list.length === 0) {
      out += `${kind}: []\n`;
      continue;
    }
    out += `${kind}:\n`;
    if (!isSortedByName(list)) list.sort(compareResources);
    for (const resource of list) {
      const value = (resource.value ?? JSON.parse(resource.spec)) as Record<string, unknown>;
      let prefix = "  - ";
      for (const key in value) {
        out += `${prefix}${key}: ${renderValue(value[key])}\n`;
        prefix = "    ";
      }
    }
  }
  return out;
}

function isSortedByName(list: readonly CanonicalResource[]): boolean {
  for (let i = 1; i < list.length; i++) if ((list[i - 1] as CanonicalResource).name >= (list[i] as CanonicalResource).name) return false;
  return true;
}

/** A value on one line: scalars, and collections in flow style. */
function renderValue(value: unknown): string {
  if (typeof value === "string") return renderString(value);
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  if (Array.isArray(value)) return `[${value.map(renderValue).join(", ")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>);
    return `{${entries.map(([k, v]) => `${renderKey(k)}: ${renderValue(v)}`).join(", ")}}`;
  }
  return "null";
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
