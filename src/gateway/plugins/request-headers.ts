import type { ConfigValue } from "../../domain/config/config-document.js";
import { isForbiddenRewriteHeader, modifiableHeader, type PluginSchema } from "../../domain/config/plugin-fields.js";
import { answers } from "../gateway-answer.js";
import type { HeaderRewrite } from "../proxy/upstream-headers.js";
import type { GatewayPlugin } from "./plugin.js";

const schema: PluginSchema = {
  fields: [
    { name: "set", field: { type: "headers", max: 64 }, about: "headers to set (replacing any value), name: value" },
    { name: "add", field: { type: "headers", max: 64 }, about: "headers to add (keeping existing values), name: value" },
    { name: "remove", field: { type: "list", item: modifiableHeader, min: 1, max: 64 }, about: "headers to remove" },
  ],
  check(config, report) {
    if (!("set" in config) && !("add" in config) && !("remove" in config)) {
      report("", "a request-headers plugin needs at least one of set, add or remove");
    }
  },
};

const secretReference = /\$\{secret:([a-z0-9][a-z0-9_-]{0,63})\/([A-Za-z_][A-Za-z0-9_.-]{0,127})\}/g;
const safeHeaderValue = /^[\t\x20-\x7e]*$/;

/**
 * `request-headers`: `remove`, then `set`, then `add` on the upstream
 * request (proxy/upstream-headers.ts applies them). A value may reference a
 * secret as `${secret:<environment>/<name>}`, resolved here from the values
 * the gateway holds in memory; a route whose secret is not resolved (or whose
 * value cannot travel in a header) answers 503 until it is.
 */
export const requestHeaders: GatewayPlugin<HeaderRewrite | { unresolved: true }> = {
  type: "request-headers",
  schema,
  compile(config, context) {
    const resolve = (value: string): string | undefined => {
      let missing = false;
      const resolved = value.replace(secretReference, (_, environment: string, name: string) => {
        const secret = context.secrets.get(`${environment}/${name}`);
        if (secret === undefined || !safeHeaderValue.test(secret)) {
          missing = true;
          context.warn(
            secret === undefined
              ? "a secret the configuration references is not resolved: routes using the plugin answer 503"
              : "a secret's value cannot travel in a header (line breaks or non-ASCII): routes using the plugin answer 503",
            { plugin: context.name, secret: `${environment}/${name}` },
          );
          return "";
        }
        return secret;
      });
      return missing ? undefined : resolved;
    };
    const pairs = (value: ConfigValue | undefined): string[] | undefined => {
      const out: string[] = [];
      if (value === undefined || typeof value !== "object" || Array.isArray(value)) return out;
      for (const [name, raw] of Object.entries(value)) {
        // Refused at import; a document stored before a name became forbidden never gets to use it.
        if (isForbiddenRewriteHeader(name)) {
          context.warn("a request-headers plugin names a header it may not change: that entry is ignored", {
            plugin: context.name,
            header: name,
          });
          continue;
        }
        const resolved = resolve(String(raw));
        if (resolved === undefined) return undefined;
        out.push(name.toLowerCase(), resolved);
      }
      return out;
    };
    const set = pairs(config.set);
    const add = pairs(config.add);
    if (set === undefined || add === undefined) return { unresolved: true };
    const remove = Array.isArray(config.remove)
      ? (config.remove as string[]).map((h) => h.toLowerCase()).filter((h) => !isForbiddenRewriteHeader(h))
      : [];
    return { remove, set, add };
  },
  attach(instances, route) {
    for (const instance of instances) {
      if ("unresolved" in instance) {
        route.close(answers.unresolvedSecret);
        continue;
      }
      route.rewrite(instance);
      // What a plugin sets or removes is the plugin's, in every spelling; what it adds keeps the client's own value.
      for (const name of instance.remove) route.ownHeader(name);
      for (let i = 0; i < instance.set.length; i += 2) route.ownHeader(instance.set[i]!);
      for (let i = 0; i < instance.add.length; i += 2) route.addedHeader(instance.add[i]!);
    }
  },
};
