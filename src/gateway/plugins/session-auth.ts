import { identityHeaderName, type PluginSchema } from "../../domain/config/plugin-fields.js";
import { answers } from "../gateway-answer.js";
import type { Exchange } from "../gateway-handler.js";
import type { VerifiedSession } from "../session-verifier.js";
import { stages, type GatewayPlugin } from "./plugin.js";

const schema: PluginSchema = {
  fields: [
    { name: "required", field: { type: "boolean" }, about: "when false, requests without a session pass through (default true)" },
    { name: "forward_identity_header", field: identityHeaderName, about: "request header that carries the identity id to the upstream" },
  ],
};

export interface SessionAuth {
  readonly required: boolean;
  readonly identityHeader: string | undefined;
}

/** The token of `Authorization: Bearer <token>` (RFC 6750 section 2.1), or undefined. */
function bearerToken(value: string | undefined): string | undefined {
  if (value === undefined || value.length < 8) return undefined;
  if (value.charCodeAt(6) !== 32 || value.slice(0, 6).toLowerCase() !== "bearer") return undefined;
  const token = value.slice(7).trim();
  return token === "" ? undefined : token;
}

function accepted(exchange: Exchange, session: VerifiedSession | undefined): boolean {
  if (exchange.clientGone) return false;
  if (session === undefined || exchange.compiled!.state.revokedSessions.has(session.sessionId)) {
    exchange.answer(answers.sessionInvalid, ["www-authenticate", 'Bearer error="invalid_token"']);
    return false;
  }
  exchange.identityId = session.identityId;
  return true;
}

/**
 * `session-auth`: `Authorization: Bearer <session token>` of this
 * organisation, verified at the gateway (ES256 against the JWKS, iss, aud,
 * exp; session-verifier.ts) and checked against revocations on every
 * request. Without a token: 401, unless every session-auth of the route says
 * `required: false`; an invalid token is 401 either way.
 */
function sessionStep(auths: readonly SessionAuth[]) {
  const required = auths.some((auth) => auth.required);
  return {
    kind: "session-auth",
    run(exchange: Exchange): boolean | Promise<boolean> {
      exchange.now = exchange.deps.clock();
      const token = bearerToken(exchange.req.headers.authorization);
      if (token === undefined) {
        if (!required) return true;
        exchange.answer(answers.sessionMissing, ["www-authenticate", "Bearer"]);
        return false;
      }
      const sessions = exchange.compiled!.sessions;
      const cached = sessions.cached(token, exchange.now);
      if (cached !== undefined) return accepted(exchange, cached);
      return sessions.verify(token, exchange.now).then(
        (session) => accepted(exchange, session),
        () => accepted(exchange, undefined),
      );
    },
  };
}

export const sessionAuth: GatewayPlugin<SessionAuth> = {
  type: "session-auth",
  schema,
  compile: (config) => ({
    required: config.required !== false,
    identityHeader: typeof config.forward_identity_header === "string" ? config.forward_identity_header.toLowerCase() : undefined,
  }),
  attach(instances, route) {
    for (const auth of instances) {
      // A client-sent identity header is never forwarded, whether or not a session is presented.
      if (auth.identityHeader !== undefined) {
        route.ownHeader(auth.identityHeader);
        route.identityHeader(auth.identityHeader);
      }
    }
    route.addStep(stages.sessionAuth, sessionStep(instances));
  },
};
