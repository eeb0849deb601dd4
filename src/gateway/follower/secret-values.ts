import { Code, ConnectError } from "@connectrpc/connect";
import type { ControlPlaneEndpoint } from "../control-plane.js";
import type { SecretResolver } from "../secret-resolver.js";
import type { Knowledge } from "./knowledge.js";

/**
 * The values of the secrets a configuration references, held in memory only
 * and retrieved with the gateway's own key pair (secret-resolver.ts): a value
 * is fetched again when the control plane announces a newer version, and
 * forgotten once nothing references it.
 */
export function createSecretValues(options: { resolver: SecretResolver; warn(object: object, message: string): void }) {
  const values = new Map<string, { version: number; value: string | null }>();
  return {
    values: values as ReadonlyMap<string, { version: number; value: string | null }>,

    /** Retrieves referenced secrets whose announced version is newer than the value held; false when one could not be had. */
    async resolve(k: Knowledge, endpoint: ControlPlaneEndpoint, signal: AbortSignal | undefined): Promise<boolean> {
      for (const key of values.keys()) {
        const ref = k.secrets.get(key);
        if (!ref || ref.version === 0) values.delete(key);
      }
      const wanted = new Map<string, string[]>();
      for (const [key, ref] of k.secrets) {
        if (ref.version === 0) continue;
        const held = values.get(key);
        if (held && held.version >= ref.version) continue;
        wanted.set(ref.environment, [...(wanted.get(ref.environment) ?? []), ref.name]);
      }
      let complete = true;
      for (const [environment, names] of wanted) {
        const retrieve = (request: { environment: string; names: readonly string[]; publicKeyPem: string }) =>
          endpoint.retrieve(request, signal);
        try {
          const resolved = await resolveOrOneByOne(options.resolver, retrieve, environment, names);
          for (const secret of resolved)
            values.set(`${secret.environment}/${secret.name}`, { version: secret.version, value: secret.value });
          if (resolved.length < names.length) complete = false;
        } catch (error) {
          complete = false;
          options.warn(
            { environment, names, err: ConnectError.from(error).message },
            "could not retrieve referenced secrets; routes that need them answer 503 until they resolve",
          );
        }
      }
      return complete;
    },
  };
}

async function resolveOrOneByOne(
  resolver: SecretResolver,
  retrieve: Parameters<SecretResolver["resolve"]>[0],
  environment: string,
  names: string[],
) {
  try {
    return await resolver.resolve(retrieve, environment, names);
  } catch (error) {
    // One name deleted meanwhile fails the whole retrieve (not_found): fetch the others one by one.
    if (ConnectError.from(error).code !== Code.NotFound || names.length === 1) throw error;
    const resolved = [];
    for (const name of names) {
      try {
        resolved.push(...(await resolver.resolve(retrieve, environment, [name])));
      } catch (inner) {
        if (ConnectError.from(inner).code !== Code.NotFound) throw inner;
      }
    }
    return resolved;
  }
}
