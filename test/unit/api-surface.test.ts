import { ConfigService } from "../../gen/svc/v1/config_pb.js";
import { GatewayService } from "../../gen/svc/v1/gateway_pb.js";
import { IdentityService } from "../../gen/svc/v1/identity_pb.js";
import { SecretsService } from "../../gen/svc/v1/secrets_pb.js";
import { WebhooksService } from "../../gen/svc/v1/webhooks_pb.js";
import { Credential } from "../../gen/svc/v1/auth_pb.js";
import { authRuleOf } from "../../src/interceptors/auth.js";
import { restRoutes } from "../../src/rest/routes.js";

/** The API surface that docs/ describes, checked against the proto and the REST table. */
const services = [ConfigService, SecretsService, IdentityService, GatewayService, WebhooksService];

describe("auth rules", () => {
  test.each(services.flatMap((s) => s.methods.map((m) => [`${s.typeName}/${m.name}`, m] as const)))(
    "%s declares the credentials it accepts",
    (_name, method) => {
      const rule = authRuleOf(method);
      expect(rule.credentials.length).toBeGreaterThan(0);
      expect(rule.credentials).not.toContain(Credential.UNSPECIFIED);
      expect(rule.credentials).not.toContain(Credential.NONE);
    },
  );

  test("secrets need the admin role; config needs membership; identity never takes an API key", () => {
    for (const m of SecretsService.methods)
      expect(authRuleOf(m)).toMatchObject({ credentials: expect.arrayContaining([Credential.API_KEY]), role: 2 });
    for (const m of ConfigService.methods)
      expect(authRuleOf(m)).toMatchObject({ credentials: expect.arrayContaining([Credential.API_KEY]), role: 1 });
    for (const m of IdentityService.methods) expect(authRuleOf(m).credentials).not.toContain(Credential.API_KEY);
  });

  test("webhooks need an admin: an API key or a dashboard session, never an organisation's or a gateway's key", () => {
    for (const m of WebhooksService.methods) {
      expect(authRuleOf(m)).toMatchObject({ credentials: [Credential.API_KEY, Credential.DASHBOARD_SESSION], role: 2 });
    }
  });

  test("identity generation and session checks are backend-only (secret key)", () => {
    for (const name of [
      "generateMagicLink",
      "beginAddPasskey",
      "finishAddPasskey",
      "removePasskey",
      "validateSession",
      "revokeSession",
      "requestPasswordReset",
      "deleteIdentity",
    ] as const) {
      expect(authRuleOf(IdentityService.method[name]).credentials.filter((c) => c !== Credential.GATEWAY_KEY)).toEqual([
        Credential.SECRET_KEY,
      ]);
    }
  });

  test("a gateway key reaches exactly what a gateway needs: its stream, its configuration, session checks, referenced secrets", () => {
    const reachable = [ConfigService, SecretsService, IdentityService, GatewayService].flatMap((s) =>
      s.methods.filter((m) => authRuleOf(m).credentials.includes(Credential.GATEWAY_KEY)).map((m) => `${s.typeName}/${m.name}`),
    );
    expect(reachable.sort()).toEqual(
      [
        "svc.v1.ConfigService/GetConfig",
        "svc.v1.ConfigService/WatchConfig",
        "svc.v1.GatewayService/WatchGateway",
        "svc.v1.IdentityService/ValidateSession",
        "svc.v1.SecretsService/RetrieveSecrets",
      ].sort(),
    );
    for (const m of GatewayService.methods) expect(authRuleOf(m).credentials).toEqual([Credential.GATEWAY_KEY]);
  });
});

describe("REST paths that docs/ documents", () => {
  const documented = [
    "GET /organization/{organization_id}/config",
    "PUT /organization/{organization_id}/config",
    "PUT /organization/{organization_id}/secrets",
    "GET /organization/{organization_id}/secrets",
    "GET /organization/{organization_id}/secrets/public-key",
    // RotatePublicKey (docs/security.md, "Keys that rotate"; docs/secrets.md, "Rotating the sealing key").
    "POST /organization/{organization_id}/secrets/public-key/rotate",
    "POST /organization/{organization_id}/secrets/retrieve",
    "DELETE /organization/{organization_id}/secrets/{name}",
    "POST /identity/register/password",
    "POST /identity/login/password",
    "POST /identity/reset/password",
    "POST /identity/register/begin",
    "POST /identity/register/finish",
    "POST /identity/login/begin",
    "POST /identity/login/finish",
    "POST /v1/identity/register",
    "POST /v1/identity/login",
    "POST /v1/identity/reset-password",
    "GET /healthz",
    "GET /readyz",
    // WebhooksService (docs/events.md, "Endpoints").
    "POST /organization/{organization_id}/webhooks",
    "GET /organization/{organization_id}/webhooks",
    "GET /organization/{organization_id}/webhooks/{endpoint_id}",
    "PUT /organization/{organization_id}/webhooks/{endpoint_id}",
    "DELETE /organization/{organization_id}/webhooks/{endpoint_id}",
    "POST /organization/{organization_id}/webhooks/{endpoint_id}/rotate-secret",
    "POST /organization/{organization_id}/webhooks/{endpoint_id}/test",
    "GET /organization/{organization_id}/webhooks/{endpoint_id}/deliveries",
    "GET /organization/{organization_id}/webhooks/{endpoint_id}/deliveries/{delivery_id}/attempts",
    "POST /organization/{organization_id}/webhooks/{endpoint_id}/deliveries/{delivery_id}/redeliver",
  ];

  test("every documented path is in the table, once", () => {
    const table = restRoutes.map((r) => `${r.method} ${r.pattern}`);
    expect([...table].sort()).toEqual([...documented].sort());
  });

  test("the /v1 reset path picks the RPC from the body", () => {
    const route = restRoutes.find((r) => r.pattern === "/v1/identity/reset-password");
    if (!route || typeof route.rpc !== "function") throw new Error("expected a body-selected route");
    expect(route.rpc({ identifier: "a@example.com" }).name).toBe("RequestPasswordReset");
    expect(route.rpc({ token: "t", new_password: "p" }).name).toBe("CompletePasswordReset");
  });
});
