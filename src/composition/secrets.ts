import { sealingKeyChanges, secretChanges } from "../domain/changes/topics.js";
import { createClientKeyParser } from "../domain/secrets/client-key.js";
import { createRsaDecryptionPool, type RsaDecryptionPoolOptions } from "../domain/secrets/rsa-decryption-pool.js";
import { createSecretKeyrings, type SecretKeyrings } from "../domain/secrets/secret-keyrings.js";
import { createSecrets, type Secrets } from "../domain/secrets/secrets.js";
import { createConfigStore } from "../storage/config-store.js";
import { createGatewayStore } from "../storage/gateway-store.js";
import { createSecretsStore, retryingSecretsConflicts } from "../storage/secrets-store.js";
import type { Platform } from "./platform.js";
import { transact } from "./transactions.js";

/**
 * The organisations' secrets keyrings: a rotation is announced to every
 * instance, which forgets the organisation's cached keys.
 */
export function secretKeyringsOf(platform: Platform): SecretKeyrings {
  return platform.memo("secret-keyrings", () => {
    const keyrings = createSecretKeyrings({
      store: createSecretsStore(platform.database.client),
      transaction: (fn) => retryingSecretsConflicts(() => transact(platform, ({ tx, events }) => fn(createSecretsStore(tx), events))),
      announceRotation: (organizationId) => platform.feed.announce(sealingKeyChanges, organizationId),
      masterKeyring: platform.keyring,
      random: platform.random,
      now: () => platform.clock().getTime(),
    });
    // Another instance rotated (or an operator changed the schedule): forget the organisation's cached keys; a gap forgets
    // nothing here, as the keys' age bound and the fresh read after a failed opening cover what a lost announcement hides.
    const rotations = platform.changes.subscribe(sealingKeyChanges, (event) => {
      if (event.kind === "message") keyrings.forget(event.value);
    });
    platform.onClose(() => rotations.close());
    return keyrings;
  });
}

export interface SecretsOptions {
  /** RSA decryption worker threads (0: on the event loop); one per core beyond the first by default. */
  rsaPool?: RsaDecryptionPoolOptions;
}

/** The secrets domain of a platform (SecretsService, the dashboard). */
export function secretsOf(platform: Platform, options: SecretsOptions = {}): Secrets {
  return platform.memo("secrets", () => {
    const { database } = platform;
    const decryptor = createRsaDecryptionPool(options.rsaPool);
    platform.onClose(() => decryptor.close());
    const secrets = createSecrets({
      store: createSecretsStore(database.client),
      transaction: (fn) =>
        retryingSecretsConflicts(() =>
          transact(platform, ({ tx, publish, events }) =>
            fn({
              store: createSecretsStore(tx),
              announce: (organizationId, environment) => publish(secretChanges, { organizationId, environment }),
              events,
              async lockedPlugins(organizationId) {
                await createConfigStore(tx, database.provider).lockConfiguration(organizationId);
                return createGatewayStore(tx).listSecretHolders(organizationId);
              },
            }),
          ),
        ),
      changes: platform.changes,
      keyrings: secretKeyringsOf(platform),
      decryptor,
      parseClientKey: createClientKeyParser(),
      clock: platform.clock,
      random: platform.random,
    });
    platform.onClose(() => secrets.close());
    return secrets;
  });
}
