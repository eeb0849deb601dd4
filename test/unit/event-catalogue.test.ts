import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { eventTypes } from "../../src/domain/events/catalogue.js";
import { eventDataMessages } from "../support/webhooks.js";

/** docs/events.md's catalogue is generated from proto/svc/v1/events.proto; the domain records exactly those types. */
describe("the event catalogue", () => {
  test("docs/events.md holds what scripts/build-event-catalogue.mjs writes from the proto", () => {
    const result = spawnSync(process.execPath, ["scripts/build-event-catalogue.mjs", "--check"], { encoding: "utf8" });
    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
  });

  test("the docs, the proto and the domain name the same event types, in the same order", () => {
    const documented = [...readFileSync("docs/events.md", "utf8").matchAll(/^### `([a-z_.]+)`$/gm)].map((m) => m[1]);
    expect(documented).toEqual([...eventTypes]);
    expect([...eventDataMessages.keys()]).toEqual([...eventTypes]);
  });

  test("every event's data names its organisation first", () => {
    for (const [type, message] of eventDataMessages) {
      expect({ type, first: message.fields[0]?.name }).toEqual({ type, first: "organization_id" });
    }
  });
});
