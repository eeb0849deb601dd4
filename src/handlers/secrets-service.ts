import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { SecretsService } from "../../gen/svc/v1/secrets_pb.js";
import type { AppDeps } from "../app-deps.js";
import { DomainError } from "../domain/errors.js";
import { createClientKeyParser } from "../domain/secrets/client-key.js";
import { createRsaDecryptionPool, type RsaDecryptionPoolOptions } from "../domain/secrets/rsa-decryption-pool.js";
import { createSecretKeyrings, sealingKeysTopic } from "../domain/secrets/secret-keyrings.js";
import { createSecrets, type SealingKeyView, type SecretsCaller, type SecretView } from "../domain/secrets/secrets.js";
import { pluginsReferencing, secretInUse } from "../domain/config/secret-references.js";
import { checkGatewayRetrieve } from "../domain/gateway/gateway-secret-scope.js";
import { principalKey } from "../interceptors/auth.js";
import type { Notify } from "../storage/change-feed.js";
import { createConfigStore } from "../storage/config-store.js";
import type { Tx } from "../storage/database.js";
import { createGatewayStore } from "../storage/gateway-store.js";
import { createSecretsStore, createSecretsTransactor, type SecretsStore } from "../storage/secrets-store.js";

export interface SecretsServiceOptions {
  /** RSA decryption worker threads (0: on the event loop); one per core beyond the first by default. */
  rsaPool?: RsaDecryptionPoolOptions;
}

/** Change-feed topic of secrets changes; payload "<organization id> <environment>". */
const secretsTopic = "secrets";

/** svc.v1.SecretsService: thin mapping between the RPC messages and the secrets domain. */
export function createSecretsService(
  deps: Pick<AppDeps, "database" | "changeFeed" | "clock" | "random" | "keyring" | "onClose">,
  options: SecretsServiceOptions = {},
): Partial<ServiceImpl<typeof SecretsService>> {
  const store = createSecretsStore(deps.database.client);
  const decryptor = createRsaDecryptionPool(options.rsaPool);
  deps.onClose(() => decryptor.close());
  const feed = deps.changeFeed;
  // The transaction's own notify carries its Prisma transaction to the store
  // below, so that a delete checks the configuration in the same transaction.
  const transactions = new WeakMap<Notify, Tx>();
  const transact = createSecretsTransactor((fn) =>
    feed.transaction((tx, notify) => {
      const carrying: Notify = (topic, payload) => notify(topic, payload);
      transactions.set(carrying, tx);
      return fn(tx, carrying);
    }),
  );
  /**
   * A secret the current configuration references cannot be deleted (409,
   * naming the plugins). The check takes the organisation's configuration lock,
   * which an import holds while it checks that the secrets it references exist,
   * so the two cannot interleave.
   */
  const refusingReferencedDeletes = (store: SecretsStore, tx: Tx | undefined): SecretsStore => ({
    ...store,
    async deleteSecret(organizationId, environment, name) {
      if (!tx) throw new Error("a secrets transaction lost its database transaction");
      await createConfigStore(tx, deps.database.provider).lockConfiguration(organizationId);
      const plugins = pluginsReferencing(await createGatewayStore(tx).listSecretHolders(organizationId), { environment, name });
      if (plugins.length > 0) throw secretInUse({ environment, name }, plugins);
      return store.deleteSecret(organizationId, environment, name);
    },
  });
  const keyrings = createSecretKeyrings({
    store,
    transaction: (fn) => transact((tx) => fn(tx)),
    announceRotation: (organizationId) => feed.transaction(async (_tx, notify) => notify(sealingKeysTopic, organizationId)),
    masterKeyring: deps.keyring,
    random: deps.random,
    now: () => deps.clock().getTime(),
  });
  // Another instance rotated (or an operator changed the schedule): forget the organisation's cached keys; a gap forgets nothing
  // here, as the keys' age bound and the fresh read after a failed opening cover what a lost announcement hides.
  const rotations = feed.subscribe(sealingKeysTopic, (event) => {
    if (event.kind === "message") keyrings.forget(event.payload);
  });
  deps.onClose(() => rotations.close());
  const secrets = createSecrets({
    store,
    transaction: (fn) =>
      transact((tx, notify) =>
        fn(refusingReferencedDeletes(tx, transactions.get(notify)), (organizationId, environment) =>
          notify(secretsTopic, `${organizationId} ${environment}`),
        ),
      ),
    // PostgreSQL: NOTIFY from every instance; SQLite: in-process, before the write answers.
    announcements: (listener) =>
      feed.subscribe(secretsTopic, (event) => listener(event.kind === "gap" ? undefined : parseChange(event.payload))),
    keyrings,
    decryptor,
    parseClientKey: createClientKeyParser(),
    clock: deps.clock,
    random: deps.random,
  });
  deps.onClose(() => secrets.close());

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
        checkGatewayRetrieve(await createGatewayStore(deps.database.client).listSecretHolders(principal.organizationId), request);
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

/** "<organization id> <environment>"; anything else (undefined) makes the cache start over. */
function parseChange(payload: string): { organizationId: string; environment: string } | undefined {
  const space = payload.indexOf(" ");
  return space > 0 ? { organizationId: payload.slice(0, space), environment: payload.slice(space + 1) } : undefined;
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
