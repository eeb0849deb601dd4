import { applyOk, exportOk, putConfig, reasonOf, violationsOf, type ErrorJson } from "../support/config-documents.js";
import { connectCall, createApiKey } from "../support/credentials.js";
import { secretRouteDocument } from "../support/gateway-control.js";
import { errorOf, secretsApi } from "../support/secrets-client.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * Secret references in request-headers values (`${secret:<environment>/<name>}`):
 * they must name an existing secret, a referenced secret cannot be deleted,
 * and adding or changing a reference is an admin's privilege.
 */
let server: TestServer;
let adminKey: string;
let memberKey: string;
let org: string;
let secrets: ReturnType<typeof secretsApi>;

beforeAll(async () => {
  server = await startTestServer();
  adminKey = server.credentials.api_key;
  memberKey = (await createApiKey(server, "member")).apiKey;
  org = server.credentials.organization_id;
  secrets = secretsApi(server, adminKey);
  await secrets.put("UPSTREAM_TOKEN", "production", "token-one");
  await secrets.put("SECOND_TOKEN", "production", "token-two");
});
afterAll(() => server.close());

/** Starts every test from the same configuration: nothing referenced. */
beforeEach(async () => {
  await applyOk(server, adminKey, "version: 1\n", { strict: true });
});

async function refusal(response: Response) {
  const body = (await response.json()) as ErrorJson;
  return { status: response.status, reason: reasonOf(body), violations: violationsOf(body), message: body.message };
}

describe("a reference must name an existing secret", () => {
  test("a PUT referencing a secret that does not exist is 400 with the YAML line, and nothing is applied", async () => {
    const before = await exportOk(server, adminKey);
    const document = secretRouteDocument({ reference: "production/MISSING" });
    for (const dryRun of [false, true]) {
      const answer = await refusal(await putConfig(server, adminKey, document, { dryRun }));
      expect(answer).toMatchObject({ status: 400, reason: "invalid_config" });
      expect(answer.violations).toEqual([
        expect.objectContaining({
          field: "plugins[0].config.set.authorization",
          line: 7,
          description: expect.stringContaining('"MISSING"'),
        }),
      ]);
    }
    expect((await exportOk(server, adminKey)).revision).toBe(before.revision);
  });

  test("a malformed reference is 400 with its line", async () => {
    for (const reference of ["production", "Production/UPSTREAM_TOKEN", "production/9bad", "production/UPSTREAM_TOKEN"]) {
      const broken = secretRouteDocument({ reference }).replace(`\${secret:${reference}}`, `\${secret:${reference}`);
      const answer = await refusal(await putConfig(server, adminKey, broken));
      expect({ reference, status: answer.status, reason: answer.reason, line: answer.violations[0]?.line }).toEqual({
        reference,
        status: 400,
        reason: "invalid_config",
        line: 7,
      });
    }
  });

  test("a rollback to a revision whose secret has since been deleted is 400 with the line", async () => {
    await secrets.put("ROLLED", "production", "r");
    const withSecret = await applyOk(server, adminKey, secretRouteDocument({ reference: "production/ROLLED" }), { strict: true });
    await applyOk(server, adminKey, "version: 1\n", { strict: true });
    expect((await secrets.deleteResponse("ROLLED", "production")).status).toBe(200);
    const response = await connectCall(
      server,
      "/svc.v1.ConfigService/RollbackConfig",
      { organizationId: org, revision: withSecret.revision },
      adminKey,
    );
    const error = await errorOf(response);
    expect({ status: error.status, reason: error.reason }).toEqual({ status: 400, reason: "invalid_config" });
    // The line is the rolled-back revision's document's (as exported then).
    const line = (JSON.parse(error.text) as { details: { debug: { violations: { line: number }[] } }[] }).details[0]?.debug.violations[0]
      ?.line;
    const revision = (await (
      await connectCall(server, "/svc.v1.ConfigService/GetConfigRevision", { organizationId: org, revision: withSecret.revision }, adminKey)
    ).json()) as { yaml: string };
    expect(revision.yaml.split("\n")[(line ?? 0) - 1]).toContain(`\${secret:production/ROLLED}`);
  });

  test("an admin's PUT of an existing reference applies", async () => {
    const plan = await applyOk(server, adminKey, secretRouteDocument(), { strict: true });
    expect(plan.created).toEqual(["plugins/inject-token", "routes/with-secret"]);
  });
});

describe("a referenced secret cannot be deleted", () => {
  test("DELETE of a secret the current configuration references is 409 naming the plugin; nothing is deleted", async () => {
    await applyOk(server, adminKey, secretRouteDocument(), { strict: true });
    const rest = await errorOf(await secrets.deleteResponse("UPSTREAM_TOKEN", "production"));
    expect({ status: rest.status, reason: rest.reason }).toEqual({ status: 409, reason: "secret_in_use" });
    expect(rest.message).toContain('"inject-token"');
    const rpc = await errorOf(
      await connectCall(
        server,
        "/svc.v1.SecretsService/DeleteSecret",
        { organizationId: org, environment: "production", name: "UPSTREAM_TOKEN" },
        adminKey,
      ),
    );
    expect({ status: rpc.status, reason: rpc.reason }).toEqual({ status: 409, reason: "secret_in_use" });
    expect((await secrets.list("production")).map((s) => s.name)).toContain("UPSTREAM_TOKEN");

    // The same name in another environment is not referenced.
    await secrets.put("UPSTREAM_TOKEN", "staging", "s");
    expect((await secrets.deleteResponse("UPSTREAM_TOKEN", "staging")).status).toBe(200);
  });

  test("once no plugin references it, it can be deleted", async () => {
    await secrets.put("LEAVING", "production", "l");
    await applyOk(server, adminKey, secretRouteDocument({ reference: "production/LEAVING" }), { strict: true });
    expect((await secrets.deleteResponse("LEAVING", "production")).status).toBe(409);
    await applyOk(server, adminKey, "version: 1\n", { strict: true });
    expect((await secrets.deleteResponse("LEAVING", "production")).status).toBe(200);
  });

  test("a delete racing a PUT that references the secret: exactly one of them wins", async () => {
    for (let i = 0; i < 8; i++) {
      const name = `RACE_${i}`;
      await secrets.put(name, "production", "race");
      await applyOk(server, adminKey, "version: 1\n", { strict: true });
      const [put, del] = await Promise.all([
        putConfig(server, adminKey, secretRouteDocument({ reference: `production/${name}` }), { strict: true }),
        secrets.deleteResponse(name, "production"),
      ]);
      const outcome = [put.status, del.status];
      expect([
        [200, 409],
        [400, 200],
      ]).toContainEqual(outcome);
      const exists = (await secrets.list("production")).some((s) => s.name === name);
      const referenced = (await exportOk(server, adminKey)).yaml.includes(name);
      // Never a configuration that references a deleted secret.
      expect(!referenced || exists).toBe(true);
    }
  });
});

describe("secret references are an admin's privilege", () => {
  test("a member's PUT that adds a reference is 403 and applies nothing (dry run too); the admin's applies", async () => {
    const before = await exportOk(server, adminKey);
    for (const dryRun of [false, true]) {
      const answer = await refusal(await putConfig(server, memberKey, secretRouteDocument(), { dryRun }));
      expect(answer).toMatchObject({ status: 403, reason: "secret_reference_needs_admin" });
    }
    expect((await exportOk(server, adminKey)).revision).toBe(before.revision);
    await applyOk(server, adminKey, secretRouteDocument());
  });

  test("a member learns nothing about which secrets exist: a reference to a missing secret is 403 too", async () => {
    const answer = await refusal(await putConfig(server, memberKey, secretRouteDocument({ reference: "production/NOPE" })));
    expect(answer).toMatchObject({ status: 403, reason: "secret_reference_needs_admin" });
  });

  test("a member's PUT that keeps the references unchanged applies, in merge and strict mode", async () => {
    await applyOk(server, adminKey, secretRouteDocument(), { strict: true });
    await applyOk(server, memberKey, "version: 1\ndomains:\n  - name: member.example.com\n");
    const strict = `${secretRouteDocument()}domains:\n  - name: member.example.com\n  - name: other.example.com\n`;
    const plan = await applyOk(server, memberKey, strict, { strict: true });
    expect(plan.created).toEqual(["domains/other.example.com"]);
    // Which requests carry the secret is the admins' to widen: a path behind a shared ingress can be another application.
    for (const document of [
      secretRouteDocument().replace("path: /secret/*", "path: /*"),
      secretRouteDocument().replace("path: /secret/*", "path: /moved/*"),
      secretRouteDocument().replace("path: /secret/*", "path: /secret/*\n    domains: [member.example.com]"),
    ]) {
      const answer = await refusal(await putConfig(server, memberKey, document));
      expect({ document, status: answer.status, reason: answer.reason }).toEqual({
        document,
        status: 403,
        reason: "secret_reference_needs_admin",
      });
    }
  });

  test("a member may not loosen who can use a secret-bearing route: its rules and credential plugins, or the plugin on another route", async () => {
    const guarded = secretRouteDocument()
      .replace(
        "routes:",
        "  - name: signed-in\n    type: session-auth\nrules:\n  - name: office\n    match: {ip_cidr: 10.0.0.0/8}\n    action: allow\nroutes:",
      )
      .replace("    plugins: [inject-token]", "    plugins: [inject-token, signed-in]\n    rules: [office]");
    await applyOk(server, adminKey, guarded, { strict: true });
    for (const document of [
      guarded.replace("    plugins: [inject-token, signed-in]", "    plugins: [inject-token]"),
      guarded.replace("    type: session-auth", "    type: session-auth\n    config: {required: false}"),
      guarded.replace("{ip_cidr: 10.0.0.0/8}", "{ip_cidr: 0.0.0.0/0}"),
      guarded.replace("    rules: [office]\n", ""),
      `${guarded}  - name: copy\n    path: /copy/*\n    upstream: http://127.0.0.1:9001\n    plugins: [inject-token]\n`,
    ]) {
      const answer = await refusal(await putConfig(server, memberKey, document));
      expect({ document, status: answer.status, reason: answer.reason }).toEqual({
        document,
        status: 403,
        reason: "secret_reference_needs_admin",
      });
    }
    await applyOk(server, adminKey, guarded.replace("    plugins: [inject-token, signed-in]", "    plugins: [inject-token]"), {
      strict: true,
    });
  });

  test("no plugin may own a header that says who the client is or where the request goes", async () => {
    for (const config of [
      "{forward_identity_header: host}",
      "{forward_identity_header: x-forwarded-for}",
      "{forward_identity_header: x_original_host}",
      "{forward_identity_header: content-length}",
      "{forward_identity_header: authorization}",
      "{forward_identity_header: x-real-ip}",
    ]) {
      const document = `version: 1\nplugins:\n  - name: signed-in\n    type: session-auth\n    config: ${config}\n`;
      const answer = await refusal(await putConfig(server, adminKey, document));
      expect({ config, status: answer.status, line: answer.violations[0]?.line }).toEqual({ config, status: 400, line: 5 });
    }
    const keyHeader = "version: 1\nplugins:\n  - name: keys\n    type: api-key-auth\n    config: {header: x-forwarded-host}\n";
    expect((await refusal(await putConfig(server, adminKey, keyHeader))).status).toBe(400);
    await applyOk(server, adminKey, "version: 1\nplugins:\n  - name: keys\n    type: api-key-auth\n    config: {header: authorization}\n");
  });

  test("a member may not change a reference, point its route elsewhere, or add its plugin to another route", async () => {
    await applyOk(server, adminKey, secretRouteDocument(), { strict: true });
    const changes = [
      secretRouteDocument({ reference: "production/SECOND_TOKEN" }),
      secretRouteDocument({ header: "x-upstream-token" }),
      secretRouteDocument().replace('"Bearer ${secret:', '"Token ${secret:'),
      secretRouteDocument({ upstream: "https://attacker.example" }),
      `${secretRouteDocument()}  - name: another\n    path: /another\n    upstream: https://attacker.example\n    plugins: [inject-token]\n`,
      secretRouteDocument({ plugin: "renamed-plugin" }),
    ];
    for (const document of changes) {
      const answer = await refusal(await putConfig(server, memberKey, document));
      expect({ document, status: answer.status, reason: answer.reason }).toEqual({
        document,
        status: 403,
        reason: "secret_reference_needs_admin",
      });
    }
    // Removing the reference takes nothing away from admins: allowed.
    await applyOk(server, memberKey, "version: 1\n", { strict: true });
  });

  test("a member may not redirect a secret-bearing request by a header: Host is no plugin's to set, and one that selects the site or path behind the upstream needs admin", async () => {
    await applyOk(server, adminKey, secretRouteDocument(), { strict: true });
    // Host (and its variants) and X-Forwarded-* are refused for everyone, with the line.
    for (const [name, line] of [
      ["host", 7],
      ["Host", 7],
      ["x_forwarded_host", 7],
      ["X-Forwarded-Proto", 7],
      ["transfer-encoding", 7],
    ] as const) {
      const document = secretRouteDocument().replace("      set:\n", `      set:\n        ${name}: evil.example\n`);
      const answer = await refusal(await putConfig(server, adminKey, document));
      expect({ name, status: answer.status, reason: answer.reason, line: answer.violations[0]?.line }).toEqual({
        name,
        status: 400,
        reason: "invalid_config",
        line,
      });
    }
    // A header that selects the site behind a shared ingress, beside the secret: a member's change is 403, an admin's applies.
    const vhost = secretRouteDocument().replace("      set:\n", "      set:\n        x-original-host: evil.example\n");
    const member = await refusal(await putConfig(server, memberKey, vhost));
    expect({ status: member.status, reason: member.reason }).toEqual({ status: 403, reason: "secret_reference_needs_admin" });
    expect(member.message).toContain("select the site or path");
    const separate =
      `${secretRouteDocument().replace("    plugins: [inject-token]", "    plugins: [inject-token, routing-header]")}`.replace(
        "routes:",
        "  - name: routing-header\n    type: request-headers\n    config:\n      set: {x-original-url: /admin/export}\nroutes:",
      );
    expect((await refusal(await putConfig(server, memberKey, separate))).status).toBe(403);
    await applyOk(server, adminKey, separate, { strict: true });
    // Other headers on the secret-bearing route, and the plugin on another route, stay a member's to change.
    await applyOk(server, memberKey, separate.replace("      set:\n", "      set:\n        x-tag: member-edit\n"), { strict: true });
    await applyOk(
      server,
      memberKey,
      `${separate}  - name: elsewhere\n    path: /elsewhere\n    upstream: http://127.0.0.1:9002\n    plugins: [routing-header]\n`,
      {
        strict: true,
      },
    );
  });

  test("a member's rollback to a revision with a reference it would add is 403; an admin's applies", async () => {
    const withSecret = await applyOk(server, adminKey, secretRouteDocument(), { strict: true });
    await applyOk(server, adminKey, "version: 1\n", { strict: true });
    const body = { organizationId: org, revision: withSecret.revision };
    const member = await errorOf(await connectCall(server, "/svc.v1.ConfigService/RollbackConfig", body, memberKey));
    expect({ status: member.status, reason: member.reason }).toEqual({ status: 403, reason: "secret_reference_needs_admin" });
    const admin = await connectCall(server, "/svc.v1.ConfigService/RollbackConfig", body, adminKey);
    expect(admin.status).toBe(200);
  });
});

describe("a secret-bearing route that names an upstream is judged by the upstream's destinations", () => {
  interface Pool {
    name?: string;
    targets?: string[];
    weights?: (number | undefined)[];
    /** Active check path; null: no active check. */
    probe?: string | null;
    extra?: string;
  }
  /** An upstreams entry; by default "pool" with two targets, an active check on /healthz, and balancing settings. */
  const pool = ({
    name = "pool",
    targets = ["http://127.0.0.1:9001", "http://127.0.0.1:9002"],
    weights = [],
    probe = "/healthz",
    extra,
  }: Pool = {}) =>
    [
      `  - name: ${name}`,
      "    targets:",
      ...targets.map((url, i) => `      - {url: ${url}${weights[i] === undefined ? "" : `, weight: ${weights[i]}`}}`),
      ...(probe === null ? [] : [`    health_check: {active: {path: ${probe}, interval_seconds: 5}, passive: {unhealthy_after: 5}}`]),
      extra ?? "    retries: 1\n    timeouts: {connect_ms: 5000}",
      "",
    ].join("\n");
  const withPools = (upstreamName: string, ...pools: string[]) =>
    `${secretRouteDocument({ upstream: upstreamName })}upstreams:\n${pools.join("")}`;

  beforeEach(async () => {
    await applyOk(server, adminKey, withPools("pool", pool()), { strict: true });
  });

  test("a member's change of the targets or the probed path is 403 and applies nothing; an admin's applies", async () => {
    const changes: [string, string][] = [
      ["a target's URL", withPools("pool", pool({ targets: ["http://127.0.0.1:9001", "https://attacker.example"] }))],
      [
        "a target added",
        withPools("pool", pool({ targets: ["http://127.0.0.1:9001", "http://127.0.0.1:9002", "https://attacker.example"] })),
      ],
      ["a target removed", withPools("pool", pool({ targets: ["http://127.0.0.1:9001"] }))],
      ["the target's path", withPools("pool", pool({ targets: ["http://127.0.0.1:9001/admin", "http://127.0.0.1:9002"] }))],
      ["the health-check path", withPools("pool", pool({ probe: "/admin/export" }))],
      ["the active check removed", withPools("pool", pool({ probe: null }))],
      [
        "the route pointed at another upstream with other targets",
        withPools("other", pool(), pool({ name: "other", targets: ["https://attacker.example"] })),
      ],
      ["the route pointed at a URL", withPools("https://attacker.example", pool())],
    ];
    const before = await exportOk(server, adminKey);
    for (const [what, document] of changes) {
      for (const strict of [false, true]) {
        const answer = await refusal(await putConfig(server, memberKey, document, { strict }));
        expect({ what, strict, status: answer.status, reason: answer.reason }).toEqual({
          what,
          strict,
          status: 403,
          reason: "secret_reference_needs_admin",
        });
      }
    }
    expect(await exportOk(server, adminKey)).toEqual(before);
    const named = await refusal(await putConfig(server, memberKey, changes[0]![1]));
    expect(named.message).toContain(
      'route "with-secret" would send secret "production/UPSTREAM_TOKEN" (plugin "inject-token") to the targets of upstream "pool"',
    );
    for (const [, document] of changes) await applyOk(server, adminKey, document, { strict: true });
  });

  test("weights, balancer, retries, timeouts and thresholds stay a member's to change", async () => {
    const changes = [
      withPools("pool", pool({ weights: [0, 1000] })),
      withPools("pool", pool({ targets: ["http://127.0.0.1:9002", "http://127.0.0.1:9001"] })),
      withPools("pool", pool({ extra: "    balancer: consistent-hash\n    hash_on: header:x-user-id" })),
      withPools(
        "pool",
        pool({ extra: "    balancer: least-requests\n    retries: 0\n    timeouts: {connect_ms: 100, response_ms: 2000}" }),
      ),
      withPools(
        "pool",
        pool().replace(
          "interval_seconds: 5}, passive: {unhealthy_after: 5}",
          "interval_seconds: 30, timeout_ms: 200, healthy_after: 1}, passive: {recover_after_seconds: 5}",
        ),
      ),
    ];
    for (const document of changes) {
      const plan = await applyOk(server, memberKey, document, { strict: true });
      expect({ document, updated: plan.updated }).toEqual({ document, updated: ["upstreams/pool"] });
    }
  });

  test("the name does not count: the same targets under another name are the same destination", async () => {
    const renamed = withPools("renamed", pool({ name: "renamed" }));
    const plan = await applyOk(server, memberKey, renamed, { strict: true });
    expect(plan).toMatchObject({ created: ["upstreams/renamed"], updated: ["routes/with-secret"], deleted: ["upstreams/pool"] });
    // Pointing the route back to a single-target upstream that differs is a change again.
    expect(
      (
        await refusal(
          await putConfig(
            server,
            memberKey,
            withPools("one", pool({ name: "renamed" }), pool({ name: "one", targets: ["http://127.0.0.1:9001"] })),
          ),
        )
      ).status,
    ).toBe(403);
  });

  test("an upstream that no secret-bearing route uses stays a member's to change, targets included", async () => {
    const withSpare = (targets: string[]) =>
      `${secretRouteDocument({ upstream: "pool" })}  - name: public\n    path: /public\n    upstream: spare\nupstreams:\n${pool()}${pool({ name: "spare", targets })}`;
    await applyOk(server, adminKey, withSpare(["http://127.0.0.1:9003"]), { strict: true });
    await applyOk(server, memberKey, withSpare(["https://elsewhere.example", "http://127.0.0.1:9004"]), { strict: true });
    // Until the member points the secret-bearing route at it.
    const pointed = withSpare(["https://elsewhere.example"]).replace("    upstream: pool\n", "    upstream: spare\n");
    expect((await refusal(await putConfig(server, memberKey, pointed, { strict: true }))).status).toBe(403);
  });

  test("a member's rollback to a revision with other targets is 403; an admin's applies", async () => {
    const other = await applyOk(server, adminKey, withPools("pool", pool({ targets: ["http://127.0.0.1:9005"] })), { strict: true });
    await applyOk(server, adminKey, withPools("pool", pool()), { strict: true });
    const body = { organizationId: org, revision: other.revision };
    const member = await errorOf(await connectCall(server, "/svc.v1.ConfigService/RollbackConfig", body, memberKey));
    expect({ status: member.status, reason: member.reason }).toEqual({ status: 403, reason: "secret_reference_needs_admin" });
    expect((await connectCall(server, "/svc.v1.ConfigService/RollbackConfig", body, adminKey)).status).toBe(200);
  });
});
