import type { DescMethod, JsonObject } from "@bufbuild/protobuf";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import { ConfigService } from "../../gen/svc/v1/config_pb.js";
import { IdentityService } from "../../gen/svc/v1/identity_pb.js";
import { SecretsService } from "../../gen/svc/v1/secrets_pb.js";
import { storageHealthService } from "../handlers/health-service.js";

/** How a query parameter becomes a request field. */
export interface QueryParam {
  field: string;
  kind: "string" | "boolean" | "list";
}

/** A rendered REST answer, when the JSON form of the response message is not it. */
export interface RestAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
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

/** Every REST path of CONTRACT.md, mapped onto its RPC. */
export const restRoutes: RestRoute[] = [
  // Process and readiness probes (grpc.health.v1.Health/Check).
  { method: "GET", pattern: "/healthz", rpc: Health.method.check, body: "none", fixed: { service: "" }, render: healthAnswer },
  {
    method: "GET",
    pattern: "/readyz",
    rpc: Health.method.check,
    body: "none",
    fixed: { service: storageHealthService },
    render: healthAnswer,
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
  { method: "PUT", pattern: "/organization/{organization_id}/secrets", rpc: SecretsService.method.putSecret, body: "json" },
  {
    method: "GET",
    pattern: "/organization/{organization_id}/secrets",
    rpc: SecretsService.method.listSecrets,
    body: "none",
    query: { env: { field: "environment", kind: "string" }, tags: { field: "tags", kind: "list" } },
  },
  {
    method: "POST",
    pattern: "/organization/{organization_id}/secrets/retrieve",
    rpc: SecretsService.method.retrieveSecrets,
    body: "json",
  },
  {
    method: "DELETE",
    pattern: "/organization/{organization_id}/secrets/{name}",
    rpc: SecretsService.method.deleteSecret,
    body: "none",
    query: { env: { field: "environment", kind: "string" } },
  },

  // Identity, client side (publishable key).
  { method: "POST", pattern: "/identity/register/password", rpc: IdentityService.method.registerPassword, body: "json" },
  { method: "POST", pattern: "/identity/login/password", rpc: IdentityService.method.loginPassword, body: "json" },
  { method: "POST", pattern: "/identity/reset/password", rpc: IdentityService.method.resetPassword, body: "json" },
  { method: "POST", pattern: "/identity/register/begin", rpc: IdentityService.method.beginPasskeyRegistration, body: "json" },
  { method: "POST", pattern: "/identity/register/finish", rpc: IdentityService.method.finishPasskeyRegistration, body: "json" },
  { method: "POST", pattern: "/identity/login/begin", rpc: IdentityService.method.beginPasskeyLogin, body: "json" },
  { method: "POST", pattern: "/identity/login/finish", rpc: IdentityService.method.finishPasskeyLogin, body: "json" },
  // The alternate /v1 forms of the password flows.
  {
    method: "POST",
    pattern: "/v1/identity/register",
    rpc: IdentityService.method.registerPassword,
    body: "json",
    aliases: { email: "identifier" },
  },
  {
    method: "POST",
    pattern: "/v1/identity/login",
    rpc: IdentityService.method.loginPassword,
    body: "json",
    aliases: { username: "identifier" },
  },
  {
    method: "POST",
    pattern: "/v1/identity/reset-password",
    // {identifier} (secret key) requests a token; {token, new_password} spends it.
    rpc: (body) => ("identifier" in body ? IdentityService.method.requestPasswordReset : IdentityService.method.completePasswordReset),
    candidates: [IdentityService.method.completePasswordReset, IdentityService.method.requestPasswordReset],
    body: "json",
  },
];
