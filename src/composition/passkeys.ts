import { createPasskeys, type Passkeys } from "../domain/passkeys/passkeys.js";
import { createIdentityStore } from "../storage/identity-store.js";
import { createPasskeyStore } from "../storage/passkey-store.js";
import { identityOf } from "./identity.js";
import type { Platform } from "./platform.js";
import { transact } from "./transactions.js";

/** The WebAuthn ceremonies of end users (IdentityService) and operators' removals of passkeys (the dashboard). */
export function passkeysOf(platform: Platform): Passkeys {
  return platform.memo("passkeys", () => {
    const { database } = platform;
    return createPasskeys({
      passkeys: createPasskeyStore(database.client),
      identities: createIdentityStore(database.client),
      transaction: (fn) =>
        transact(platform, ({ tx, events }) => fn({ passkeys: createPasskeyStore(tx), identities: createIdentityStore(tx), events })),
      identity: identityOf(platform),
      keyring: platform.keyring,
      clock: platform.clock,
      random: platform.random,
      onError: (error) => platform.logger.warn({ err: error }, "passkey housekeeping failed"),
      onRefusal: (refusal) => platform.logger.info(refusal, "passkey response refused"),
    });
  });
}
