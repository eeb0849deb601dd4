import type { TestServer } from "./server.js";

/** Builders for configuration documents and calls of the configuration API. */

export interface DocumentShape {
  routes: number;
  /** How many domains, plugins and rules the routes share (default: min(routes, 100)). */
  shared?: number;
  /** Distinguishes otherwise equal documents (goes into upstream ports). */
  variant?: number;
}

/** A valid version 1 document in the plain style people write (and the fast reader takes). */
export function largeDocument({ routes, shared, variant = 0 }: DocumentShape): string {
  const n = Math.max(1, shared ?? Math.min(routes, 100));
  const lines = ["version: 1", "domains:"];
  for (let i = 0; i < n; i++) lines.push(`  - name: api${i}.example.com`);
  lines.push("plugins:");
  for (let i = 0; i < n; i++)
    lines.push(`  - name: rl-${i}`, "    type: rate-limit", `    config: {requests: ${100 + i}, window_seconds: 60}`);
  lines.push("rules:");
  for (let i = 0; i < n; i++)
    lines.push(`  - name: block-${i}`, `    match: {header: user-agent, regex: "bot-${i}", ignore_case: true}`, "    action: deny");
  lines.push("routes:");
  for (let i = 0; i < routes; i++) {
    lines.push(
      `  - name: route-${i}`,
      `    domains: [api${i % n}.example.com]`,
      `    path: /plants/${i}/*`,
      "    methods: [GET, POST]",
      `    upstream: http://127.0.0.1:${8000 + (variant % 1000)}`,
      `    plugins: [rl-${i % n}]`,
      `    rules: [block-${i % n}]`,
    );
  }
  return `${lines.join("\n")}\n`;
}

export const yamlHeaders = { "content-type": "application/yaml" };

export function putConfig(
  server: TestServer,
  bearer: string,
  body: string,
  options: { strict?: boolean; dryRun?: boolean; ifMatch?: string; contentType?: string; organizationId?: string } = {},
) {
  const query = new URLSearchParams();
  if (options.strict) query.set("strict", "true");
  if (options.dryRun) query.set("dry_run", "true");
  const org = options.organizationId ?? server.credentials.organization_id;
  const headers: Record<string, string> = { "content-type": options.contentType ?? "application/yaml" };
  if (options.ifMatch !== undefined) headers["if-match"] = options.ifMatch;
  return server.call(`/organization/${org}/config${query.size > 0 ? `?${query}` : ""}`, { method: "PUT", headers, body, bearer });
}

export function getConfig(server: TestServer, bearer: string, organizationId = server.credentials.organization_id) {
  return server.call(`/organization/${organizationId}/config`, { bearer });
}

export interface PlanJson {
  revision: number;
  applied: boolean;
  created: string[];
  updated: string[];
  deleted: string[];
  unchanged: number;
  /** A domain certificate that has expired or expires within 7 days. */
  warnings: string[];
}

export interface ErrorJson {
  code: string;
  message: string;
  details?: {
    type: string;
    debug?: { reason?: string; violations?: { field: string; description: string; line?: number; column?: number }[] };
  }[];
}

/** The violations of a Connect error body. */
export function violationsOf(body: ErrorJson) {
  return body.details?.[0]?.debug?.violations ?? [];
}

export function reasonOf(body: ErrorJson) {
  return body.details?.[0]?.debug?.reason;
}

/** PUT that must succeed; answers the plan. */
export async function applyOk(
  server: TestServer,
  bearer: string,
  body: string,
  options: Parameters<typeof putConfig>[3] = {},
): Promise<PlanJson> {
  const response = await putConfig(server, bearer, body, options);
  const text = await response.text();
  if (response.status !== 200) throw new Error(`PUT answered ${response.status}: ${text.slice(0, 2000)}`);
  return JSON.parse(text) as PlanJson;
}

/** GET that must succeed; answers the revision (from the ETag) and the YAML. */
export async function exportOk(server: TestServer, bearer: string): Promise<{ revision: number; yaml: string }> {
  const response = await getConfig(server, bearer);
  const yaml = await response.text();
  if (response.status !== 200) throw new Error(`GET answered ${response.status}: ${yaml}`);
  const etag = response.headers.get("etag") ?? "";
  return { revision: Number(/^"(\d+)"$/.exec(etag)?.[1] ?? Number.NaN), yaml };
}
