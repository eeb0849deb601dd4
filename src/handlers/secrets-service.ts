import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { SecretsService } from "../../gen/svc/v1/secrets_pb.js";
import { DomainError } from "../domain/errors.js";
import type { SealingKeyView, Secrets, SecretsCaller, SecretView } from "../domain/secrets/secrets.js";
import type { GatewaySecretScope } from "../domain/gateway/gateway-secret-scope.js";
import { principalKey } from "../interceptors/auth.js";

export interface SecretsServiceParts {
  /** The secrets domain (src/composition/secrets.ts). */
  secrets: Secrets;
  /** What a gateway key may retrieve. */
  gatewayScope: GatewaySecretScope;
}

/** svc.v1.SecretsService: thin mapping between the RPC messages and the secrets domain. */
export function createSecretsService(parts: SecretsServiceParts): Partial<ServiceImpl<typeof SecretsService>> {
  const { secrets, gatewayScope } = parts;
  const toSecret = (secret: SecretView) => ({
    name: secret.name,
    environment: secret.environment,
    version: secret.version,
    tags: secret.tags,
    updatedAt: timestampFromDate(secret.updatedAt),
  });

  return {
    async getPublicKey(_request, context) {
      return secrets.getPublicKey(callerOf(context));
    },
    async rotatePublicKey(_request, context) {
      const rotated = await secrets.rotatePublicKey(callerOf(context));
      return { publicKeyPem: rotated.current.publicKeyPem, keyId: rotated.current.keyId, previousKeys: rotated.previous.map(toSealingKey) };
    },
    async listPublicKeys(_request, context) {
      const keys = await secrets.listPublicKeys(callerOf(context));
      return {
        ...(keys.current ? { current: toSealingKey(keys.current) } : {}),
        previousKeys: keys.previous.map(toSealingKey),
        sealingKeyRotationDays: keys.rotationDays,
      };
    },
    async putSecret(request, context) {
      return toSecret(
        await secrets.putSecret(callerOf(context), {
          name: request.name,
          environment: request.environment,
          encryptedValue: request.encryptedValue,
          keyId: request.keyId,
          sealed: request.sealed,
          tags: request.tags,
          value: request.value,
        }),
      );
    },
    async listSecrets(request, context) {
      const listed = await secrets.listSecrets(callerOf(context), { environment: request.environment, tags: request.tags });
      return { secrets: listed.map(toSecret) };
    },
    async listEnvironments(_request, context) {
      return { environments: await secrets.listEnvironments(callerOf(context)) };
    },
    async retrieveSecrets(request, context) {
      const principal = context.values.get(principalKey);
      if (principal.kind === "gateway_key") {
        await gatewayScope.checkRetrieve(principal.organizationId, request);
      }
      return secrets.retrieveSecrets(callerOf(context, { gateway: true }), {
        environment: request.environment,
        names: request.names,
        tags: request.tags,
        publicKeyPem: request.publicKeyPem,
      });
    },
    async deleteSecret(request, context) {
      await secrets.deleteSecret(callerOf(context), { name: request.name, environment: request.environment });
      return {};
    },
    async listSecretVersions(request, context) {
      const versions = await secrets.listVersions(callerOf(context), { name: request.name, environment: request.environment });
      return {
        versions: versions.map((v) => ({ version: v.version, tags: v.tags, actor: v.actor, createdAt: timestampFromDate(v.createdAt) })),
      };
    },
    async listSecretAuditEvents(request, context) {
      const page = await secrets.listAuditEvents(callerOf(context), { pageSize: request.pageSize, pageToken: request.pageToken });
      return {
        events: page.events.map((e) => ({
          action: e.action,
          actor: e.actor,
          environment: e.environment,
          names: e.names,
          createdAt: timestampFromDate(e.createdAt),
        })),
        nextPageToken: page.nextPageToken,
      };
    },
  };
}

/** A sealing key as the API describes it. */
export function toSealingKey(key: SealingKeyView) {
  return {
    keyId: key.keyId,
    publicKeyPem: key.publicKeyPem,
    createdAt: timestampFromDate(key.createdAt),
    ...(key.retiredAt ? { retiredAt: timestampFromDate(key.retiredAt) } : {}),
    ...(key.acceptedUntil ? { acceptedUntil: timestampFromDate(key.acceptedUntil) } : {}),
  };
}

/** The organisation and audit name of the caller; the auth interceptor has already required an admin API key. */
function callerOf(context: HandlerContext, accept: { gateway?: boolean } = {}): SecretsCaller {
  const principal = context.values.get(principalKey);
  if (principal.kind === "gateway_key" && accept.gateway) return { organizationId: principal.organizationId, actor: principal.actor };
  if (principal.kind !== "api_key" && principal.kind !== "dashboard") {
    throw new DomainError("permission_denied", "wrong_credential_kind", "the secrets API needs an admin API key");
  }
  return { organizationId: principal.organizationId, actor: principal.actor };
}
