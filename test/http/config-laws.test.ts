import fc from "fast-check";
import { isDeepStrictEqual } from "node:util";
import { parse, stringify } from "yaml";
import { applyOk, exportOk, putConfig, type PlanJson } from "../support/config-documents.js";
import {
  exported,
  kinds,
  overlay,
  resourceKey,
  stateArbitrary,
  statePairArbitrary,
  type Resource,
  type State,
} from "../support/config-arbitraries.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * The laws of import and export (issue: "property-based tests of the laws"),
 * checked against a real server with generated configurations. Documents are
 * written by the `yaml` package, not by our renderer, and compared as values.
 */
let server: TestServer;
let key: string;
const runs = 30;

beforeAll(async () => {
  server = await startTestServer();
  key = server.credentials.api_key;
});
afterAll(() => server.close());

/** A document for the state, as a person or another tool would write it. */
function toYaml(state: State, options: { omitEmptyKinds?: boolean } = {}): string {
  const doc: Record<string, unknown> = { version: 1 };
  for (const kind of kinds) if (!(options.omitEmptyKinds && state[kind].length === 0)) doc[kind] = state[kind];
  return stringify(doc);
}

async function currentValue() {
  const { revision, yaml } = await exportOk(server, key);
  return { revision, yaml, value: parse(yaml) as unknown };
}

/** What a plan of importing `document` over `state` must say. */
/** The value as a YAML or JSON document carries it (no prototypes). */
const asData = (value: unknown): unknown => JSON.parse(JSON.stringify(value));

/** A plugin sent again unchanged, its config built without a prototype (a case fast-check found). */
function sameConfigWithoutPrototype(): [State, State] {
  const config = { required: false, forward_identity_header: "x-env" };
  const plugin = { name: "rl-default", type: "session-auth", config };
  const bare = { ...plugin, config: Object.assign(Object.create(null) as Record<string, unknown>, config) };
  return [
    { domains: [], upstreams: [], plugins: [{ name: "p0", type: "api-key-auth", config: {} }, plugin], rules: [], routes: [] },
    { domains: [], upstreams: [], plugins: [bare], rules: [], routes: [] },
  ] as unknown as [State, State];
}

function expectedPlan(state: State, document: State, strict: boolean) {
  const created: string[] = [];
  const updated: string[] = [];
  const deleted: string[] = [];
  let unchanged = 0;
  for (const kind of kinds) {
    for (const resource of document[kind]) {
      const before = state[kind].find((r) => r.name === resource.name);
      if (!before) created.push(resourceKey(kind, resource.name));
      // As data: the arbitraries may build an object without a prototype, which the document cannot tell apart.
      else if (!isDeepStrictEqual(asData(before), asData(resource))) updated.push(resourceKey(kind, resource.name));
      else unchanged++;
    }
    if (strict) {
      for (const resource of state[kind]) {
        if (!document[kind].some((r: Resource) => r.name === resource.name)) deleted.push(resourceKey(kind, resource.name));
      }
    }
  }
  const order = (list: string[]) =>
    list.sort((a, b) => {
      const [ka, na] = a.split("/") as [string, string];
      const [kb, nb] = b.split("/") as [string, string];
      return kinds.indexOf(ka as never) - kinds.indexOf(kb as never) || (na < nb ? -1 : na > nb ? 1 : 0);
    });
  return { created: order(created), updated: order(updated), deleted: order(deleted), unchanged };
}

function plannedChanges(plan: PlanJson) {
  return { created: plan.created, updated: plan.updated, deleted: plan.deleted, unchanged: plan.unchanged };
}

describe("laws of import and export", () => {
  test("strict(S, D) = D", async () => {
    await fc.assert(
      fc.asyncProperty(statePairArbitrary, fc.boolean(), async ([s, d], omitEmptyKinds) => {
        await applyOk(server, key, toYaml(s), { strict: true });
        const before = await currentValue();
        const plan = await applyOk(server, key, toYaml(d, { omitEmptyKinds }), { strict: true });
        expect(plannedChanges(plan)).toEqual(expectedPlan(s, d, true));
        const after = await currentValue();
        expect(after.value).toEqual(exported(d));
        // A revision is made exactly when something changed.
        const changed = plan.created.length + plan.updated.length + plan.deleted.length > 0;
        expect(after.revision).toBe(before.revision + (changed ? 1 : 0));
        expect(plan.revision).toBe(after.revision);
      }),
      { numRuns: runs },
    );
  });

  test("merge(S, D) = S overridden by D, nothing else touched", async () => {
    await fc.assert(
      fc.asyncProperty(statePairArbitrary, async ([s, d]) => {
        await applyOk(server, key, toYaml(s), { strict: true });
        const plan = await applyOk(server, key, toYaml(d, { omitEmptyKinds: true }));
        expect(plannedChanges(plan)).toEqual(expectedPlan(s, d, false));
        expect((await currentValue()).value).toEqual(exported(overlay(s, d)));
      }),
      { numRuns: runs, examples: [[sameConfigWithoutPrototype()]] },
    );
  });

  test("export is a fixed point of strict import", async () => {
    await fc.assert(
      fc.asyncProperty(stateArbitrary, async (s) => {
        await applyOk(server, key, toYaml(s), { strict: true });
        const first = await exportOk(server, key);
        const plan = await applyOk(server, key, first.yaml, { strict: true });
        expect(plan).toMatchObject({ revision: first.revision, applied: true, created: [], updated: [], deleted: [] });
        expect(await exportOk(server, key)).toEqual(first);
      }),
      { numRuns: runs },
    );
  });

  const breakage = fc.constantFrom(
    "unknown-key",
    "dangling-reference",
    "bad-path",
    "duplicate-name",
    "version",
    "syntax",
    "bad-plugin-config",
    "dangling-upstream",
    "bad-upstream",
  );

  test("a failed import changes nothing", async () => {
    await fc.assert(
      fc.asyncProperty(statePairArbitrary, breakage, fc.boolean(), async ([s, d], how, strict) => {
        await applyOk(server, key, toYaml(s), { strict: true });
        const before = await exportOk(server, key);
        const response = await putConfig(server, key, broken(d, how), { strict });
        expect(response.status).toBe(400);
        expect(await exportOk(server, key)).toEqual(before);
      }),
      { numRuns: runs },
    );
  });
});

/** The document of a state with one defect. */
function broken(state: State, how: string): string {
  const d: State = {
    domains: [...state.domains],
    upstreams: [...state.upstreams],
    plugins: [...state.plugins],
    rules: [...state.rules],
    routes: [...state.routes],
  };
  const route = { name: "broken", path: "/b", upstream: "http://127.0.0.1:1" };
  switch (how) {
    case "unknown-key":
      d.routes.push({ ...route, colour: "red" });
      break;
    case "dangling-reference":
      d.routes.push({ ...route, plugins: ["ghost"] });
      break;
    case "bad-path":
      d.routes.push({ ...route, path: "no-slash" });
      break;
    case "duplicate-name":
      d.routes.push(route, { ...route, path: "/other" });
      break;
    case "version":
      return toYaml(d).replace("version: 1", "version: 2");
    case "syntax":
      return `${toYaml(d)}routes: [unclosed\n`;
    case "bad-plugin-config":
      d.plugins.push({ name: "broken-plugin", type: "rate-limit", config: { requests: 0, window_seconds: 1 } });
      break;
    case "dangling-upstream":
      d.routes.push({ ...route, upstream: "ghost-pool" });
      break;
    case "bad-upstream":
      d.upstreams.push({ name: "broken-pool", targets: [{ url: "http://127.0.0.1:1", weight: 0 }] });
      break;
  }
  return toYaml(d);
}
