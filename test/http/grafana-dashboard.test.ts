import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
// @ts-expect-error: a plain ES module of the project's scripts, without types.
import { promtoolPath } from "../../scripts/ensure-promtool.mjs";
import { startServe, type ServeProcess } from "../support/cli.js";
import { isBuilt } from "../support/config-process.js";
import { createTestDatabase, type TestDatabase } from "../support/database.js";
import { promqlLabelNames, promqlMetricNames } from "../support/promql-metric-names.js";

/**
 * docs/grafana/gatehouse.json charts the platform's and the gateway's
 * metrics. Every query in it must name a metric that `gatehouse serve`
 * exports with at least one series, once traffic has touched every family
 * (RPC successes and refusals, other HTTP answers, gateway answers of
 * several classes, a 429, a refused upstream), with labels those series carry.
 */
const dashboardFile = join(process.cwd(), "docs", "grafana", "gatehouse.json");

interface Panel {
  id?: unknown;
  type?: unknown;
  title?: unknown;
  datasource?: { type?: unknown; uid?: unknown };
  gridPos?: { h?: unknown; w?: unknown; x?: unknown; y?: unknown };
  targets?: { expr?: unknown; refId?: unknown; datasource?: { type?: unknown; uid?: unknown } }[];
  panels?: Panel[];
}
interface Dashboard {
  title?: unknown;
  uid?: unknown;
  schemaVersion?: unknown;
  panels?: Panel[];
  templating?: { list?: { name?: unknown; type?: unknown; query?: unknown; datasource?: { uid?: unknown } }[] };
}

/** Every panel, those inside collapsed rows too. */
const allPanels = (dashboard: Dashboard): Panel[] => (dashboard.panels ?? []).flatMap((panel) => [panel, ...(panel.panels ?? [])]);

/** The PromQL of every panel target and query variable, with where it is. */
function queriesOf(dashboard: Dashboard): { where: string; expr: string; variable: boolean }[] {
  const queries = allPanels(dashboard).flatMap((panel) =>
    (panel.targets ?? []).map((target) => ({
      where: `panel ${panel.id} ${target.refId}`,
      expr: String(target.expr ?? ""),
      variable: false,
    })),
  );
  for (const variable of dashboard.templating?.list ?? []) {
    if (variable.type !== "query") continue;
    const query = typeof variable.query === "string" ? variable.query : (variable.query as { query?: unknown } | undefined)?.query;
    queries.push({ where: `variable ${variable.name}`, expr: String(query ?? ""), variable: true });
  }
  return queries;
}

/** Metric name -> label names, from the sample lines of a text exposition. */
function exposedSeries(...texts: string[]): Map<string, Set<string>> {
  const series = new Map<string, Set<string>>();
  for (const line of texts.join("\n").split("\n")) {
    const match = /^([A-Za-z_:][\w:]*)(\{.*\})?\s+\S+/.exec(line);
    if (!match) continue;
    const labels = series.get(match[1] as string) ?? new Set<string>();
    for (const label of (match[2] ?? "").matchAll(/([A-Za-z_]\w*)="(?:[^"\\]|\\.)*"/g)) labels.add(label[1] as string);
    series.set(match[1] as string, labels);
  }
  return series;
}

/** Labels Prometheus adds to every series it scrapes (target labels), and the bucket bound of histograms. */
const scrapeLabels = new Set(["instance", "job"]);

/** What is wrong with the dashboard's queries against the exported series: one line per finding. */
function checkQueries(dashboard: Dashboard, series: Map<string, Set<string>>): string[] {
  const findings: string[] = [];
  for (const { where, expr } of queriesOf(dashboard)) {
    let names: string[];
    try {
      names = promqlMetricNames(expr);
    } catch (error) {
      findings.push(`${where}: ${(error as Error).message}`);
      continue;
    }
    if (names.length === 0) findings.push(`${where}: names no metric: ${expr}`);
    for (const name of names) if (!series.has(name)) findings.push(`${where}: ${name} is not exported`);
    const { selectors, grouping } = promqlLabelNames(expr);
    for (const { metric, labels } of selectors) {
      for (const label of labels) {
        if (!scrapeLabels.has(label) && series.has(metric) && !series.get(metric)?.has(label))
          findings.push(`${where}: ${metric} has no label ${label}`);
      }
    }
    const known = new Set([...scrapeLabels, ...names.flatMap((name) => [...(series.get(name) ?? [])])]);
    for (const label of grouping) if (!known.has(label)) findings.push(`${where}: no metric of the query has the label ${label}`);
  }
  return findings;
}

let db: TestDatabase;
let serve: ServeProcess;
let platformText = "";
let gatewayText = "";
const dashboard = JSON.parse(readFileSync(dashboardFile, "utf8")) as Dashboard;

async function until(condition: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A port nothing listens on: an upstream there refuses the connection. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

beforeAll(async () => {
  if (!isBuilt()) throw new Error("dist/ is not built (npm test builds it)");
  db = await createTestDatabase();
  serve = await startServe({ DATABASE_URL: db.url, GATEHOUSE_DATA_DIR: db.dataDir });
  const out = serve.output();
  const org = /organization_id\s+(\S+)/.exec(out)?.[1] ?? "";
  const apiKey = /api_key \(admin\)\s+(\S+)/.exec(out)?.[1] ?? "";
  const gateway = /gateway\s+(http\S+) \(admin (http\S+)\)/.exec(out);
  const gatewayUrl = gateway?.[1] ?? "";
  const adminUrl = gateway?.[2] ?? "";
  expect(gatewayUrl).not.toBe("");

  // Platform: RPCs that succeed and are refused, and answers that are not RPCs.
  const getConfig = (bearer?: string) =>
    fetch(`${serve.url}/svc.v1.ConfigService/GetConfig`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(bearer ? { authorization: `Bearer ${bearer}` } : {}) },
      body: JSON.stringify({ organizationId: org }),
    });
  expect((await getConfig(apiKey)).status).toBe(200);
  expect((await getConfig()).status).toBe(401);
  await (await fetch(`${serve.url}/no/such/path`)).arrayBuffer();

  // Gateway: a route behind a rate limit, a route whose upstream refuses, and a path no route matches.
  const yaml = `version: 1
plugins:
  - name: limit
    type: rate-limit
    config: {requests: 2, window_seconds: 60}
routes:
  - name: health
    path: /healthz
    methods: [GET]
    upstream: ${serve.url}
    plugins: [limit]
  - name: down
    path: /down
    upstream: http://127.0.0.1:${await closedPort()}
  - name: pooled
    path: /readyz
    upstream: pool
upstreams:
  - name: pool
    retries: 1
    targets:
      - {url: "http://127.0.0.1:${await closedPort()}"}
      - {url: "${serve.url}"}
`;
  const put = await fetch(`${serve.url}/organization/${org}/config`, {
    method: "PUT",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/yaml" },
    body: yaml,
  });
  expect(put.status).toBe(200);
  const { revision } = (await put.json()) as { revision: number };
  await until(async () => {
    const text = await (await fetch(`${adminUrl}/metrics`)).text();
    return Number(/^gatehouse_gateway_config_revision (\d+)/m.exec(text)?.[1] ?? -1) >= revision;
  }, `revision ${revision} at the gateway`);
  const statuses: number[] = [];
  for (const path of ["/healthz", "/healthz", "/healthz", "/down", "/nowhere", "/readyz", "/readyz"]) {
    const answer = await fetch(`${gatewayUrl}${path}`);
    await answer.arrayBuffer();
    statuses.push(answer.status);
  }
  // The pool's first target refuses: one of the two requests is retried on the other.
  expect(statuses).toEqual([200, 200, 429, 502, 404, 200, 200]);

  platformText = await (await fetch(`${serve.url}/metrics`)).text();
  gatewayText = await (await fetch(`${adminUrl}/metrics`)).text();
}, 120_000);

afterAll(async () => {
  await serve?.stop();
  await db?.drop();
});

describe("the Grafana dashboard in docs/grafana", () => {
  test("is a dashboard Grafana imports: schema version, uid, unique panel ids, a grid, a Prometheus data source everywhere", () => {
    expect(typeof dashboard.title).toBe("string");
    expect(dashboard.uid).toMatch(/^[\w-]{1,40}$/);
    expect(dashboard.schemaVersion).toEqual(expect.any(Number));
    expect(dashboard.schemaVersion as number).toBeGreaterThanOrEqual(36);
    const variables = dashboard.templating?.list ?? [];
    expect(variables.find((variable) => variable.name === "datasource")).toMatchObject({ type: "datasource", query: "prometheus" });

    const panels = allPanels(dashboard);
    const ids = panels.map((panel) => panel.id);
    expect(ids.every((id) => Number.isInteger(id) && (id as number) > 0)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    for (const panel of panels) {
      const { h, w, x, y } = panel.gridPos ?? {};
      expect([h, w, x, y].every((n) => Number.isInteger(n) && (n as number) >= 0)).toBe(true);
      expect((x as number) + (w as number)).toBeLessThanOrEqual(24);
      if (panel.type === "row") continue;
      expect({ panel: panel.title, datasource: panel.datasource }).toEqual({
        panel: panel.title,
        datasource: { type: "prometheus", uid: `\${datasource}` },
      });
      expect(panel.targets?.length).toBeGreaterThan(0);
      const refIds = (panel.targets ?? []).map((target) => target.refId);
      expect(new Set(refIds).size).toBe(refIds.length);
      for (const target of panel.targets ?? []) {
        expect(target.datasource).toEqual(panel.datasource);
        expect(typeof target.expr === "string" && target.expr.trim() !== "").toBe(true);
      }
    }
    // Every variable a query uses is defined (or one of Grafana's own).
    const defined = new Set(variables.map((variable) => String(variable.name)));
    for (const { where, expr } of queriesOf(dashboard)) {
      for (const use of expr.matchAll(/\$\{?(\w+)/g)) {
        if (!(use[1] as string).startsWith("__"))
          expect({ where, variable: use[1], defined: defined.has(use[1] as string) }).toMatchObject({ defined: true });
      }
    }
  });

  test("every query is PromQL that promtool parses", () => {
    const promtool = promtoolPath() as string | undefined;
    if (!promtool) throw new Error("promtool is missing: npm test fetches it (node scripts/ensure-promtool.mjs)");
    const rules = queriesOf(dashboard)
      .filter((query) => !query.variable)
      .map(({ expr }, i) => {
        const concrete = expr
          .replace(/\$__rate_interval|\$\{__rate_interval\}|\$__interval|\$\{__interval\}/g, "5m")
          .replace(/\$__range|\$\{__range\}/g, "1h")
          .replace(/\$\{\w+(?::\w+)?\}|\$\w+/g, ".*");
        return `      - record: dashboard:query_${i}\n        expr: ${JSON.stringify(concrete)}\n`;
      });
    expect(rules.length).toBeGreaterThan(20);
    const folder = mkdtempSync(join(tmpdir(), "gatehouse-dashboard-"));
    try {
      const file = join(folder, "rules.yml");
      writeFileSync(file, `groups:\n  - name: dashboard\n    rules:\n${rules.join("")}`);
      const checked = spawnSync(promtool, ["check", "rules", file], { encoding: "utf8" });
      expect({ status: checked.status, output: checked.status === 0 ? "" : `${checked.stdout}${checked.stderr}` }).toEqual({
        status: 0,
        output: "",
      });
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });

  test("every metric a query names is exported by the platform or the gateway, with the labels the query uses", () => {
    const series = exposedSeries(platformText, gatewayText);
    expect(checkQueries(dashboard, series)).toEqual([]);
    // The families the issue asks for are charted.
    const named = new Set(queriesOf(dashboard).flatMap(({ expr }) => promqlMetricNames(expr)));
    for (const name of [
      "gatehouse_rpc_requests_total",
      "gatehouse_rpc_duration_seconds_bucket",
      "gatehouse_http_requests_total",
      "gatehouse_process_resident_memory_bytes",
      "gatehouse_nodejs_eventloop_lag_p99_seconds",
      "gatehouse_gateway_requests_total",
      "gatehouse_gateway_request_duration_seconds_bucket",
      "gatehouse_gateway_upstream_errors_total",
      "gatehouse_gateway_rate_limited_requests_total",
      "gatehouse_gateway_config_revision",
      "gatehouse_gateway_config_age_seconds",
      "gatehouse_gateway_control_plane_connected",
    ]) {
      expect({ name, charted: named.has(name) }).toEqual({ name, charted: true });
    }
    // The embedded gateway follows the platform: its connection gauge says so.
    expect(/^gatehouse_gateway_control_plane_connected (\d)/m.exec(gatewayText)?.[1]).toBe("1");
  });

  test("the check fails on a query that names a metric nobody exports, or a label its metric lacks", () => {
    const series = exposedSeries(platformText, gatewayText);
    const broken = structuredClone(dashboard);
    const target = allPanels(broken).find((panel) => panel.targets?.length)?.targets?.[0];
    if (!target) throw new Error("the dashboard has no query");
    target.expr =
      'sum by (route) (rate(gatehouse_gateway_request_total{route=~"$route"}[$__rate_interval])) + gatehouse_rpc_requests_total{colour="red"}';
    const findings = checkQueries(broken, series);
    expect(findings).toEqual([
      expect.stringContaining("gatehouse_gateway_request_total is not exported"),
      expect.stringContaining("gatehouse_rpc_requests_total has no label colour"),
      // route is a label of the gateway's families only, none of which this query names any more.
      expect.stringContaining("no metric of the query has the label route"),
    ]);
  });
});
