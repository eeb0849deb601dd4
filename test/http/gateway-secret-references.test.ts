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
    // The route may change in ways that keep the secret where it goes.
    await applyOk(server, memberKey, secretRouteDocument().replace("path: /secret/*", "path: /moved/*"));
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
