import type { ConfigValue, PluginType } from "./config-document.js";
import type { PathSegment, PathViolations } from "./path-violations.js";
import { describeSchema, schemaIsOptional, validateWithSchema } from "./plugin-fields.js";
import { gatewayPlugins } from "../../gateway/plugins/index.js";

/**
 * The `config` of each plugin type, as its plugin declares it
 * (src/gateway/plugins/<type>.ts: the one home of a plugin, its checks and its
 * work at the gateway).
 */

/** True when a plugin of this type may omit `config` (every field is optional). */
export function configIsOptional(type: PluginType): boolean {
  return schemaIsOptional(gatewayPlugins[type].schema);
}

/** The fields of a plugin type's config, for messages: "requests (required: ...); window_seconds (...)". */
export function describePluginConfig(type: PluginType): string {
  return describeSchema(gatewayPlugins[type].schema);
}

/** Validates a plugin's config; answers its canonical form, or undefined when it has violations. */
export function validatePluginConfig(
  type: PluginType,
  value: unknown,
  path: PathSegment[],
  violations: PathViolations,
): Record<string, ConfigValue> | undefined {
  return validateWithSchema(type, gatewayPlugins[type].schema, value, path, violations);
}
