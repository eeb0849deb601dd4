// Writes the event catalogue of docs/events.md (between its catalogue markers) from
// proto/svc/v1/events.proto: each message with an (event_type) option is the `data` of that event
// type, its comment says when the event happens and its fields' comments what they hold. The proto
// is the one description of the events; test/unit/event-catalogue.test.ts fails while the docs
// differ from what this script writes (`--check`), and test/http/webhooks-events.test.ts checks
// that what is delivered parses as these messages.
//
//   node scripts/build-event-catalogue.mjs           rewrite the catalogue (only when it changed)
//   node scripts/build-event-catalogue.mjs --check   exit 1 if docs/events.md is not current
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const protoFile = "proto/svc/v1/events.proto";
const docsFile = "docs/events.md";
const begin = "<!-- catalogue: generated from proto/svc/v1/events.proto by scripts/build-event-catalogue.mjs; edit the proto, not this -->";
const end = "<!-- end of catalogue -->";

/** The events of the proto file: type, description, fields (name, type, description), in file order. */
export function readEvents(text) {
  const events = [];
  const lines = text.split("\n");
  let comment = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (line.startsWith("//")) {
      comment.push(line.replace(/^\/\/ ?/, ""));
      continue;
    }
    const message = /^message (\w+) \{$/.exec(line);
    if (!message) {
      comment = [];
      continue;
    }
    const event = { message: message[1], description: comment.join(" "), type: undefined, fields: [] };
    comment = [];
    for (i++; i < lines.length && lines[i].trim() !== "}"; i++) {
      const inner = lines[i].trim();
      if (inner.startsWith("//")) {
        comment.push(inner.replace(/^\/\/ ?/, ""));
        continue;
      }
      const option = /^option \(event_type\) = "([^"]+)";$/.exec(inner);
      const field = /^(repeated )?(\w+) (\w+) = \d+;$/.exec(inner);
      if (option) event.type = option[1];
      else if (field) {
        const type = { string: "string", int32: "integer", bool: "boolean" }[field[2]] ?? field[2];
        event.fields.push({ name: field[3], type: field[1] ? `list of ${type}s` : type, description: comment.join(" ") });
      }
      comment = [];
    }
    if (event.type) events.push(event);
  }
  return events;
}

/** Markdown text: `|` in a cell would end it. */
const cell = (text) => text.replaceAll("|", "\\|");

export function renderCatalogue(events) {
  const parts = [begin, ""];
  parts.push("| type | when |", "|---|---|");
  for (const event of events) parts.push(`| [\`${event.type}\`](#${event.type.replaceAll(".", "")}) | ${cell(event.description)} |`);
  for (const event of events) {
    parts.push("", `### \`${event.type}\``, "", event.description, "", "| `data` field | type | what |", "|---|---|---|");
    for (const field of event.fields) parts.push(`| \`${field.name}\` | ${field.type} | ${cell(field.description)} |`);
  }
  parts.push("", end);
  return parts.join("\n");
}

const current = readFileSync(join(root, docsFile), "utf8");
const start = current.indexOf(begin);
const stop = current.indexOf(end);
if (start === -1 || stop === -1 || stop < start) {
  console.error(`${docsFile} has no catalogue markers`);
  process.exit(1);
}
const wanted =
  current.slice(0, start) + renderCatalogue(readEvents(readFileSync(join(root, protoFile), "utf8"))) + current.slice(stop + end.length);
if (process.argv.includes("--check")) {
  if (wanted !== current) {
    console.error(`${docsFile}: the event catalogue differs from ${protoFile}; run node scripts/build-event-catalogue.mjs`);
    process.exit(1);
  }
} else if (wanted !== current) {
  writeFileSync(join(root, docsFile), wanted);
  console.log(`wrote the event catalogue of ${docsFile}`);
}
