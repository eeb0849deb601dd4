import { Code } from "@connectrpc/connect";
import { createHash } from "node:crypto";
import { credentialHeader, type PluginSchema } from "../../domain/config/plugin-fields.js";
import { gatewayAnswer, type GatewayAnswer } from "../gateway-answer.js";
import type { Exchange } from "../gateway-handler.js";
import { stages, type GatewayPlugin } from "./plugin.js";

const schema: PluginSchema = {
  fields: [
    { name: "header", field: credentialHeader, about: 'request header that carries the key (default "x-api-key")' },
    { name: "hide_credentials", field: { type: "boolean" }, about: "remove the key before forwarding to the upstream" },
  ],
};

export interface ApiKeyAuth {
  readonly header: string;
  readonly hide: boolean;
  readonly missing: GatewayAnswer;
  readonly unknown: GatewayAnswer;
  readonly challenge: string;
  readonly invalid: string;
}

/**
 * `api-key-auth`: a live consumer key of the organisation (ck_...) in the
 * plugin's header, looked up by its SHA-256 among the consumers the state
 * holds (the key itself is never kept); 401 with `WWW-Authenticate` without
 * one. The consumer then names the client for rate limits.
 */
function apiKeyStep(auths: readonly ApiKeyAuth[]) {
  return {
    kind: "api-key-auth",
    run(exchange: Exchange): boolean {
      const headers = exchange.req.headers;
      for (const auth of auths) {
        const key = headers[auth.header];
        if (typeof key !== "string" || key === "") {
          exchange.answer(auth.missing, ["www-authenticate", auth.challenge]);
          return false;
        }
        const consumer =
          key.length > 512 ? undefined : exchange.compiled!.state.consumers.get(createHash("sha256").update(key).digest("hex"));
        if (consumer === undefined) {
          exchange.answer(auth.unknown, ["www-authenticate", auth.invalid]);
          return false;
        }
        exchange.consumerId = consumer.id;
      }
      return true;
    },
  };
}

export const apiKeyAuth: GatewayPlugin<ApiKeyAuth> = {
  type: "api-key-auth",
  schema,
  compile(config) {
    const header = typeof config.header === "string" ? config.header.toLowerCase() : "x-api-key";
    return {
      header,
      hide: config.hide_credentials === true,
      missing: gatewayAnswer(
        Code.Unauthenticated,
        "consumer_key_missing",
        `this route needs a consumer key (ck_...) in the ${header} header`,
      ),
      unknown: gatewayAnswer(
        Code.Unauthenticated,
        "consumer_key_invalid",
        `the consumer key in the ${header} header is unknown or revoked: use a live consumer key`,
      ),
      challenge: `ApiKey header="${header}"`,
      invalid: `ApiKey header="${header}", error="invalid_key"`,
    };
  },
  attach(instances, route) {
    for (const auth of instances) if (auth.hide) route.ownHeader(auth.header);
    route.addStep(stages.apiKeyAuth, apiKeyStep(instances));
  },
};
