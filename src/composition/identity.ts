import { sessionSigningKeyChanges } from "../domain/changes/topics.js";
import { createIdentity, type Identity } from "../domain/identity/identity.js";
import { createSessionIssuer, type SessionIssuer } from "../domain/identity/sessions.js";
import { createIdentityStore } from "../storage/identity-store.js";
import type { Platform } from "./platform.js";
import { transact } from "./transactions.js";

/**
 * The identity domain of a platform, built once: IdentityService, the JWKS
 * route, the dashboard, the sample plant API (which verifies sessions with
 * `.sessions`) and the operator commands share it.
 */
export function identityOf(platform: Platform): Identity {
  return platform.memo("identity", () => {
    const { database } = platform;
    const store = createIdentityStore(database.client, database.sql);
    const sessions = createSessionIssuer({
      store,
      transaction: (fn) => transact(platform, ({ tx, publish, events }) => fn({ store: createIdentityStore(tx), publish, events })),
      keyring: platform.keyring,
      clock: platform.clock,
      issuer: platform.config.publicUrl,
    });
    // A rotation on another instance (or by the CLI on PostgreSQL): sign with the new key from the next sign-in.
    const rotations = platform.changes.subscribe(sessionSigningKeyChanges, (event) =>
      sessions.keyChanged(event.kind === "gap" ? undefined : event.value),
    );
    platform.onClose(() => rotations.close());
    return createIdentity({
      store,
      transaction: (fn) => transact(platform, ({ tx, publish, events }) => fn({ store: createIdentityStore(tx), publish, events })),
      sessions,
      hasher: platform.passwordHasher,
      clock: platform.clock,
      random: platform.random,
      publicUrl: platform.config.publicUrl,
      onError: (error) => platform.logger.warn({ err: error }, "identity housekeeping failed"),
      signInLimits: platform.config.signIn,
    });
  });
}

/** The session issuer and verifier of a platform. */
export function sessionsOf(platform: Platform): SessionIssuer {
  return identityOf(platform).sessions;
}
