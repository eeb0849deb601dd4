import type { PluginType } from "../../domain/config/config-document.js";
import { apiKeyAuth } from "./api-key-auth.js";
import { cors } from "./cors.js";
import type { GatewayPlugin } from "./plugin.js";
import { rateLimit } from "./rate-limit.js";
import { requestHeaders } from "./request-headers.js";
import { sessionAuth } from "./session-auth.js";

/**
 * Every plugin type, by name: the control plane checks a plugin's config with
 * its schema, the gateway compiles it and adds its steps. The order of the
 * pipeline is each plugin's stage (./plugin.ts), not this list's.
 */
export const gatewayPlugins: { readonly [T in PluginType]: GatewayPlugin<unknown> } = {
  cors,
  "api-key-auth": apiKeyAuth,
  "session-auth": sessionAuth,
  "rate-limit": rateLimit,
  "request-headers": requestHeaders,
};
