import type { IdentityStore } from "../../storage/identity-store.js";
import type { PasskeyStore } from "../../storage/passkey-store.js";
import { DomainError, invalidArgument, type Violation } from "../errors.js";
import { readCredentialId } from "../passkeys/passkey-rules.js";
import { readUuid } from "./identifiers.js";

export interface RemoveIdentityPasskeyOptions {
  identities: Pick<IdentityStore, "findIdentity">;
  passkeys: Pick<PasskeyStore, "removePasskey">;
  organizationId: string;
  identityId: string;
  /** The WebAuthn credential id, base64url. */
  credentialId: string;
}

/**
 * Removes one passkey of an identity of the organisation, for operators (the
 * dashboard): it stops signing in at once. An identity of another
 * organisation is not_found (identity_not_found), like one that does not
 * exist; a credential the identity does not hold, passkey_not_found.
 */
export async function removeIdentityPasskey(options: RemoveIdentityPasskeyOptions): Promise<void> {
  const { organizationId } = options;
  const violations: Violation[] = [];
  const identityId = readUuid(options.identityId, "identity_id", violations);
  const credentialId = readCredentialId(options.credentialId, "credential_id", violations);
  if (violations.length > 0) throw invalidArgument(violations);
  if (!(await options.identities.findIdentity(organizationId, identityId))) {
    throw new DomainError("not_found", "identity_not_found", `identity ${identityId} does not exist`);
  }
  if (!(await options.passkeys.removePasskey(organizationId, identityId, credentialId))) {
    throw new DomainError("not_found", "passkey_not_found", "this identity has no passkey with this credential id");
  }
}
