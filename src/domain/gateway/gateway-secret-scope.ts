import { referencedSecrets, secretKey } from "../config/secret-references.js";
import type { CanonicalResource } from "../config/config-document.js";
import { DomainError } from "../errors.js";

/**
 * What a gateway key may retrieve (docs/gateway.md, "Keys and consumers"): the
 * secrets its organisation's current configuration references, named one by
 * one. A selection by tags, or of a whole environment, could reach secrets the
 * configuration does not use, so it is refused like any unreferenced name.
 */
export function checkGatewayRetrieve(
  plugins: readonly CanonicalResource[],
  request: { environment: string; names: readonly string[]; tags: readonly string[] },
): void {
  const refuse = (why: string) =>
    new DomainError(
      "permission_denied",
      "secret_not_referenced",
      `a gateway key retrieves only secrets its configuration references: ${why}`,
    );
  if (request.tags.length > 0) throw refuse("select them by name, without tags");
  if (request.names.length === 0) throw refuse("name each secret (names is empty, which would select the whole environment)");
  const allowed = new Set(referencedSecrets(plugins).map(secretKey));
  const outside = [...new Set(request.names)].filter((name) => !allowed.has(secretKey({ environment: request.environment, name })));
  if (outside.length > 0) {
    throw refuse(
      `${outside.map((n) => `"${n}"`).join(", ")} in environment "${request.environment}" is not referenced as \${secret:${request.environment}/<name>}`,
    );
  }
}

/** The check of checkGatewayRetrieve against the organisation's current configuration. */
export function createGatewaySecretScope(deps: { plugins(organizationId: string): Promise<CanonicalResource[]> }) {
  return {
    async checkRetrieve(
      organizationId: string,
      request: { environment: string; names: readonly string[]; tags: readonly string[] },
    ): Promise<void> {
      checkGatewayRetrieve(await deps.plugins(organizationId), request);
    },
  };
}

export type GatewaySecretScope = ReturnType<typeof createGatewaySecretScope>;
