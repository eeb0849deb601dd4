import type { DescMethod, JsonObject } from "@bufbuild/protobuf";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import { ConfigService } from "../../gen/svc/v1/config_pb.js";
import { IdentityService } from "../../gen/svc/v1/identity_pb.js";
import { SecretsService } from "../../gen/svc/v1/secrets_pb.js";
import { WebhooksService } from "../../gen/svc/v1/webhooks_pb.js";
import { storageHealthService } from "../handlers/health-service.js";

/** How a query parameter becomes a request field. */
export interface QueryParam {
  field: string;
  kind: "string" | "boolean" | "list" | "integer";
  /** Documentation only: the RPC refuses a request without it. */
  required?: boolean;
}

/** A rendered REST answer, when the JSON form of the response message is not it. */
export interface RestAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * What a route's `render` sends, for the OpenAPI document (src/rest/openapi):
 * a function cannot say. test/unit/platform-openapi.test.ts holds the two together.
 */
export interface RenderedAnswerDoc {
  /** Media type of the body, without parameters. */
  contentType: string;
  /** The response field whose text is the whole body; absent when the body is the response's JSON. */
  bodyField?: string;
  /** Response headers, each carrying one response field (`etag`: as a strong entity tag). */
  headers?: Record<string, string>;
  /** Statuses besides 200 that `render` answers with the same body, and when. */
  statuses?: Record<number, string>;
}

/**
 * One documented REST path and the RPC behind it. The shim only translates:
 * path, query, headers and body become the RPC's request message; the RPC's
 * answer (or Connect error) becomes the HTTP answer.
 */
export interface RestRoute {
  method: "GET" | "POST" | "PUT" | "DELETE";
  /** Path with {field} placeholders named after request fields. */
  pattern: string;
  /** The RPC; a function chooses it from the JSON body when one path fronts two RPCs. */
  rpc: DescMethod | ((body: JsonObject) => DescMethod);
  /** The RPCs a choosing function may return (the first labels requests whose body cannot be read). */
  candidates?: DescMethod[];
  /** "json": a JSON object body; "yaml": the body is the text of `yamlField`; "none": no body. */
  body: "none" | "json" | "yaml";
  yamlField?: string;
  /** Body field aliases of the alternate /v1 paths: alias -> request field. */
  aliases?: Record<string, string>;
  query?: Record<string, QueryParam>;
  /** Request field that receives the `If-Match` header as sent (the RPC compares it, RFC 9110 §13.1.1). */
  ifMatchField?: string;
  /** Fixed request fields. */
  fixed?: JsonObject;
  /** Renders the response when it is not the message's JSON (snake_case field names). */
  render?: (json: JsonObject) => RestAnswer;
  /** Body limit in bytes; the configured JSON limit by default. */
  limit?: "json" | "config";

  // Documentation only (src/rest/openapi): the shim never reads these.
  /** The OpenAPI operationId when the RPC's own name does not fit (another path serves the same RPC, or the body picks it). */
  operationId?: string;
  /** A one-line summary when the RPC's comment does not describe this path. */
  summary?: string;
  /** What `render` sends. */
  rendered?: RenderedAnswerDoc;
  /** Error statuses the RPC answers beyond those the door and its auth rule imply, or more it means here: status -> when. */
  errors?: Record<number, string>;
}

/** A probe's answer depends only on the status (a handful of values): each is rendered once. */
const healthAnswers = new Map<string, RestAnswer>();
const healthAnswer = (json: JsonObject): RestAnswer => {
  const status = typeof json.status === "string" ? json.status : "UNKNOWN";
  let answer = healthAnswers.get(status);
  if (!answer) {
    answer = {
      status: status === "SERVING" ? 200 : 503,
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ status }),
    };
    healthAnswers.set(status, answer);
  }
  return answer;
};

/** The per-address limit of client-side identity calls (src/domain/identity/limits.ts), documented on each such path. */
const clientLimit = { 429: "This address made more client-side identity calls to the organisation this minute than it allows." };
const readinessRendered = { contentType: "application/json", statuses: { 503: "The database is unreachable (`NOT_SERVING`)." } };
const passwordErrors = { ...clientLimit, 403: "Password authentication is disabled for the organisation; nothing was stored." };
const passwordLoginErrors = {
  ...passwordErrors,
  401: "The identifier or the password is wrong (the same answer for both, reason `invalid_credentials`).",
  429: "Too many requests from this address, or 5 failed logins for this identifier within 15 minutes (until the window passes, even with the right password).",
};
const passkeyErrors = { ...clientLimit, 403: "Passkeys are disabled for the organisation." };
const ceremonyErrors = {
  401: "The ceremony is unknown, expired or already answered, or the response is tampered, replayed, or for another origin or relying party; nothing was created.",
};

/** Every REST path of the platform (docs/api.md, "Protocols: one implementation, several front doors"), mapped onto its RPC. */
export const restRoutes: RestRoute[] = [
  // Process and readiness probes (grpc.health.v1.Health/Check).
  {
    method: "GET",
    pattern: "/healthz",
    rpc: Health.method.check,
    body: "none",
    fixed: { service: "" },
    render: healthAnswer,
    operationId: "getHealthz",
    summary: "The process is alive",
    rendered: { contentType: "application/json" },
  },
  {
    method: "GET",
    pattern: "/readyz",
    rpc: Health.method.check,
    body: "none",
    fixed: { service: storageHealthService },
    render: healthAnswer,
    operationId: "getReadyz",
    summary: "The database is reachable",
    rendered: readinessRendered,
  },

  // Configuration.
  {
    method: "GET",
    pattern: "/organization/{organization_id}/config",
    rpc: ConfigService.method.getConfig,
    body: "none",
    render: (json) => ({
      status: 200,
      headers: { "content-type": "application/yaml; charset=utf-8", etag: `"${json.revision ?? 0}"` },
      body: typeof json.yaml === "string" ? json.yaml : "",
    }),
    rendered: { contentType: "application/yaml", bodyField: "yaml", headers: { etag: "revision" } },
  },
  {
    method: "PUT",
    pattern: "/organization/{organization_id}/config",
    rpc: ConfigService.method.applyConfig,
    body: "yaml",
    yamlField: "yaml",
    limit: "config",
    query: { strict: { field: "strict", kind: "boolean" }, dry_run: { field: "dry_run", kind: "boolean" } },
    ifMatchField: "if_match",
  },

  // Secrets.
  { method: "GET", pattern: "/organization/{organization_id}/secrets/public-key", rpc: SecretsService.method.getPublicKey, body: "none" },
  {
    method: "POST",
    pattern: "/organization/{organization_id}/secrets/public-key/rotate",
    rpc: SecretsService.method.rotatePublicKey,
    body: "json",
  },
  {
    method: "PUT",
    pattern: "/organization/{organization_id}/secrets",
    rpc: SecretsService.method.putSecret,
    body: "json",
    errors: {
      409: "`key_id` names a replaced key past its 24-hour grace period or no key of the organisation, or (without `key_id`) the value is sealed to such a key (`aborted`, reason `sealing_key_outdated`; the message names the current key_id).",
    },
  },
  {
    method: "GET",
    pattern: "/organization/{organization_id}/secrets",
    rpc: SecretsService.method.listSecrets,
    body: "none",
    query: { env: { field: "environment", kind: "string", required: true }, tags: { field: "tags", kind: "list" } },
  },
  {
    method: "POST",
    pattern: "/organization/{organization_id}/secrets/retrieve",
    rpc: SecretsService.method.retrieveSecrets,
    body: "json",
    errors: { 404: "A name in `names` does not exist in the environment (the message names it)." },
  },
  {
    method: "DELETE",
    pattern: "/organization/{organization_id}/secrets/{name}",
    rpc: SecretsService.method.deleteSecret,
    body: "none",
    query: { env: { field: "environment", kind: "string", required: true } },
    errors: {
      404: "No secret of that name in the environment.",
      409: "The current configuration references the secret (`aborted`, reason `secret_in_use`; the message names the plugin).",
    },
  },

  // Webhooks (docs/events.md).
  {
    method: "POST",
    pattern: "/organization/{organization_id}/webhooks",
    rpc: WebhooksService.method.createWebhookEndpoint,
    body: "json",
    errors: {
      400: "The URL is not https (or names a loopback, private or link-local address without WEBHOOKS_ALLOW_PRIVATE_NETWORKS=true), carries credentials or a fragment, or an event type is unknown; or the organisation has 50 endpoints already.",
    },
  },
  { method: "GET", pattern: "/organization/{organization_id}/webhooks", rpc: WebhooksService.method.listWebhookEndpoints, body: "none" },
  {
    method: "GET",
    pattern: "/organization/{organization_id}/webhooks/{endpoint_id}",
    rpc: WebhooksService.method.getWebhookEndpoint,
    body: "none",
    errors: { 404: "No such endpoint in the organisation." },
  },
  {
    method: "PUT",
    pattern: "/organization/{organization_id}/webhooks/{endpoint_id}",
    rpc: WebhooksService.method.updateWebhookEndpoint,
    body: "json",
    errors: { 404: "No such endpoint in the organisation." },
  },
  {
    method: "DELETE",
    pattern: "/organization/{organization_id}/webhooks/{endpoint_id}",
    rpc: WebhooksService.method.deleteWebhookEndpoint,
    body: "none",
    errors: { 404: "No such endpoint in the organisation." },
  },
  {
    method: "POST",
    pattern: "/organization/{organization_id}/webhooks/{endpoint_id}/rotate-secret",
    rpc: WebhooksService.method.rotateWebhookSecret,
    body: "json",
    errors: { 404: "No such endpoint in the organisation." },
  },
  {
    method: "POST",
    pattern: "/organization/{organization_id}/webhooks/{endpoint_id}/test",
    rpc: WebhooksService.method.sendWebhookTestEvent,
    body: "json",
    errors: { 400: "The endpoint is disabled (`failed_precondition`).", 404: "No such endpoint in the organisation." },
  },
  {
    method: "GET",
    pattern: "/organization/{organization_id}/webhooks/{endpoint_id}/deliveries",
    rpc: WebhooksService.method.listWebhookDeliveries,
    body: "none",
    query: { page_size: { field: "page_size", kind: "integer" }, page_token: { field: "page_token", kind: "string" } },
    errors: { 404: "No such endpoint in the organisation." },
  },
  {
    method: "GET",
    pattern: "/organization/{organization_id}/webhooks/{endpoint_id}/deliveries/{delivery_id}/attempts",
    rpc: WebhooksService.method.listWebhookAttempts,
    body: "none",
    errors: { 404: "No such delivery of the endpoint." },
  },
  {
    method: "POST",
    pattern: "/organization/{organization_id}/webhooks/{endpoint_id}/deliveries/{delivery_id}/redeliver",
    rpc: WebhooksService.method.redeliverWebhook,
    body: "json",
    errors: {
      400: "The delivery is pending already, or its endpoint is disabled (`failed_precondition`).",
      404: "No such delivery of the endpoint.",
    },
  },

  // Identity, client side (publishable key).
  {
    method: "POST",
    pattern: "/identity/register/password",
    rpc: IdentityService.method.registerPassword,
    body: "json",
    errors: { ...passwordErrors, 409: "An identity with this identifier exists (`already_exists`, reason `identity_exists`)." },
  },
  {
    method: "POST",
    pattern: "/identity/login/password",
    rpc: IdentityService.method.loginPassword,
    body: "json",
    errors: passwordLoginErrors,
  },
  {
    method: "POST",
    pattern: "/identity/reset/password",
    rpc: IdentityService.method.resetPassword,
    body: "json",
    errors: {
      ...clientLimit,
      403: "Password authentication is disabled, or (publishable key) `session_token` is not a session of that identity issued within the last 15 minutes.",
      404: "The identity does not exist.",
    },
  },
  {
    method: "POST",
    pattern: "/identity/register/begin",
    rpc: IdentityService.method.beginPasskeyRegistration,
    body: "json",
    errors: { ...passkeyErrors, 409: "An identity with this identifier exists (`already_exists`)." },
  },
  {
    method: "POST",
    pattern: "/identity/register/finish",
    rpc: IdentityService.method.finishPasskeyRegistration,
    body: "json",
    errors: {
      ...passkeyErrors,
      ...ceremonyErrors,
      409: "The identifier was registered since the ceremony began (`already_exists`).",
    },
  },
  { method: "POST", pattern: "/identity/login/begin", rpc: IdentityService.method.beginPasskeyLogin, body: "json", errors: passkeyErrors },
  {
    method: "POST",
    pattern: "/identity/login/finish",
    rpc: IdentityService.method.finishPasskeyLogin,
    body: "json",
    errors: { ...passkeyErrors, ...ceremonyErrors },
  },
  // The alternate /v1 forms of the password flows.
  {
    method: "POST",
    pattern: "/v1/identity/register",
    rpc: IdentityService.method.registerPassword,
    body: "json",
    aliases: { email: "identifier" },
    operationId: "registerPasswordV1",
    errors: { ...passwordErrors, 409: "An identity with this e-mail address exists (`already_exists`, reason `identity_exists`)." },
  },
  {
    method: "POST",
    pattern: "/v1/identity/login",
    rpc: IdentityService.method.loginPassword,
    body: "json",
    aliases: { username: "identifier" },
    operationId: "loginPasswordV1",
    errors: passwordLoginErrors,
  },
  {
    method: "POST",
    pattern: "/v1/identity/reset-password",
    // {identifier} (secret key) requests a token; {token, new_password} spends it.
    rpc: (body) => ("identifier" in body ? IdentityService.method.requestPasswordReset : IdentityService.method.completePasswordReset),
    candidates: [IdentityService.method.completePasswordReset, IdentityService.method.requestPasswordReset],
    body: "json",
    operationId: "resetPasswordV1",
    summary: "Requests a password-reset token ({identifier}, secret key) or spends one ({token, new_password})",
    errors: {
      ...clientLimit,
      403: "Password authentication is disabled, or `{identifier}` was sent with a publishable key.",
      404: "The token or the identifier does not exist.",
    },
  },
];
