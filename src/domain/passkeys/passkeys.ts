import { randomUUID } from "node:crypto";
import type { MasterKeyring } from "../../crypto/envelope.js";
import type { RandomSource } from "../../crypto/tokens.js";
import type { IdentityStore } from "../identity/identity-store.js";
import type { CeremonyKind, CeremonyRecord, PasskeyStore } from "./passkey-store.js";
import type { Clock } from "../clock.js";
import type { EventLog } from "../events/event-log.js";
import { DomainError, invalidArgument, type Violation } from "../errors.js";
import type { Caller, Identity, SignedIn } from "../identity/identity.js";
import { readIdentifier, readUuid } from "../identity/identifiers.js";
import type { IdentitySettings } from "../identity/settings.js";
import { decoyCredentials } from "./decoy-credentials.js";
import { creationOptions, requestOptions } from "./passkey-options.js";
import {
  ceremonyTtlSeconds,
  userIdOfUserHandle,
  maxPasskeysPerIdentity,
  readAuthenticationCredential,
  readCeremonyId,
  readCredentialId,
  readOptionalName,
  readRegistrationCredential,
} from "./passkey-rules.js";
import {
  refusalMessages,
  verifyPasskeyAssertion,
  verifyPasskeyRegistration,
  type RefusalReason,
  type VerifiedRegistration,
} from "./verify-passkey-response.js";

/** The stores one transaction hands the ceremonies. */
export interface PasskeyTransactionStores {
  passkeys: PasskeyStore;
  identities: IdentityStore;
  /** Records the change's events in the transaction (docs/events.md). */
  events: EventLog;
}

export interface PasskeysDeps {
  passkeys: PasskeyStore;
  identities: Pick<IdentityStore, "findIdentity" | "findIdentityByIdentifier">;
  /** Runs fn with stores bound to one transaction. */
  transaction<T>(fn: (stores: PasskeyTransactionStores) => Promise<T>): Promise<T>;
  /** The identity area: settings, the per-IP limit, and sessions. */
  identity: Pick<Identity, "settingsOf" | "limitClient" | "prepareSignIn" | "signIn" | "sessions">;
  /** Wraps the secret behind decoy credentials at rest. */
  keyring: MasterKeyring;
  clock: Clock;
  random: RandomSource;
  /** Housekeeping failures (never fail a request). */
  onError?: (error: unknown) => void;
  /** Refusal details for the operator's log (never shown to the client). */
  onRefusal?: (refusal: { reason: string; detail: string; organizationId: string; ceremony: CeremonyKind }) => void;
}

/** A ceremony begun: its id and the options for navigator.credentials. */
export interface BegunCeremony<Options> {
  ceremonyId: string;
  options: Options;
}

/** What a passkey registration answers: the new identity, its passkey, and a session. */
export interface Registered extends SignedIn {
  credentialId: string;
}

/** The SystemState key of the decoy secret, wrapped by the master key with this key as its purpose. */
export const decoySecretKey = "passkey-decoy-secret";
const pruneEveryMs = 10 * 60_000;
/** Spent and expired ceremonies are kept this long (for the "used" and "expired" answers), then dropped. */
const ceremonyRetentionMs = 60 * 60_000;

function assertValid(violations: Violation[]): void {
  if (violations.length > 0) throw invalidArgument(violations);
}

function refused(reason: RefusalReason | string, message: string): DomainError {
  return new DomainError("unauthenticated", reason, message);
}

/**
 * WebAuthn ceremonies of docs/passkeys.md, "The ceremonies over HTTP": registration of a new
 * identity, sign-in by identifier or discoverable passkey, and a backend
 * adding or removing passkeys of an identity. The challenge of each ceremony
 * stays here, bound to its organisation and kind; a ceremony answers once,
 * within 5 minutes. Every refused response is unauthenticated (401) and
 * changes nothing but spending its ceremony.
 */
export function createPasskeys(deps: PasskeysDeps) {
  let decoySecret: Promise<Buffer> | undefined;
  let lastPrune = Number.NEGATIVE_INFINITY;

  function requirePasskeys(settings: IdentitySettings): void {
    if (!settings.passkeys) {
      throw new DomainError(
        "permission_denied",
        "passkeys_disabled",
        "passkeys are disabled for this organisation (an operator enables them in the identity settings)",
      );
    }
  }

  function challenge(): Uint8Array<ArrayBuffer> {
    // WebAuthn 13.4.3: challenges "SHOULD be at least 16 bytes long"; 32 random bytes.
    return new Uint8Array(deps.random(32));
  }

  function housekeeping(now: Date): void {
    if (now.getTime() - lastPrune < pruneEveryMs && now.getTime() >= lastPrune) return;
    lastPrune = now.getTime();
    deps.passkeys.pruneCeremonies(new Date(now.getTime() - ceremonyRetentionMs)).catch((error: unknown) => deps.onError?.(error));
  }

  async function startCeremony(
    organizationId: string,
    kind: CeremonyKind,
    fields: { challenge: string; identityId: string | null; identifier: string | null; displayName: string | null },
  ): Promise<string> {
    const now = deps.clock();
    const id = randomUUID();
    await deps.passkeys.createCeremony({
      id,
      organizationId,
      kind,
      ...fields,
      createdAt: now,
      expiresAt: new Date(now.getTime() + ceremonyTtlSeconds * 1000),
    });
    housekeeping(now);
    return id;
  }

  /**
   * Spends a ceremony of the caller's organisation and kind (one conditional
   * update: of concurrent finishes exactly one gets it), or says why not.
   * A ceremony of another organisation or kind is as unknown as no ceremony.
   */
  async function spendCeremony(organizationId: string, id: string, kind: CeremonyKind): Promise<CeremonyRecord> {
    const now = deps.clock();
    const spent = await deps.passkeys.spendCeremony(organizationId, id, kind, now);
    if (spent) return spent;
    const found = await deps.passkeys.findCeremony(organizationId, id);
    if (!found || found.kind !== kind) throw refused("ceremony_not_found", "this ceremony does not exist; begin a new one");
    if (found.usedAt !== null) throw refused("ceremony_used", "this ceremony has already been answered; begin a new one");
    throw refused("ceremony_expired", "this ceremony has expired (ceremonies last 5 minutes); begin a new one");
  }

  function refuse(organizationId: string, ceremony: CeremonyKind, reason: RefusalReason, detail: string): never {
    deps.onRefusal?.({ reason, detail, organizationId, ceremony });
    throw refused(reason, refusalMessages[reason]);
  }

  async function secret(): Promise<Buffer> {
    decoySecret ??= deps.passkeys
      .findOrCreateSystemValue(decoySecretKey, () => ({
        value: deps.keyring.wrap(deps.random(32), decoySecretKey).toString("base64"),
        masterKeyId: deps.keyring.currentId,
      }))
      .then((sealed) => deps.keyring.unwrap(Buffer.from(sealed.value, "base64"), decoySecretKey, sealed.masterKeyId));
    return decoySecret.catch((error: unknown) => {
      decoySecret = undefined;
      throw error;
    });
  }

  /** Settings for a client-side ceremony: passkeys on, and the per-IP limit counted. */
  async function clientSettings(caller: Caller): Promise<IdentitySettings> {
    const settings = await deps.identity.settingsOf(caller.organizationId);
    requirePasskeys(settings);
    await deps.identity.limitClient(caller, settings);
    return settings;
  }

  return {
    /** register/begin: options to create the first passkey of a new identifier. */
    async beginRegistration(caller: Caller, input: { identifier: string; displayName: string }) {
      const violations: Violation[] = [];
      const identifier = readIdentifier(input.identifier, "identifier", violations);
      const displayName = readOptionalName(input.displayName, "display_name", violations);
      const settings = await clientSettings(caller);
      assertValid(violations);
      if (await deps.identities.findIdentityByIdentifier(caller.organizationId, identifier)) {
        throw new DomainError(
          "already_exists",
          "identity_exists",
          "an identity with this identifier already exists (adding a passkey to it is a backend operation: BeginAddPasskey)",
        );
      }
      // The identity's id is chosen now: it is the WebAuthn user handle the passkey stores.
      const identityId = randomUUID();
      const options = await creationOptions({
        rp: settings,
        challenge: challenge(),
        userId: identityId,
        userName: identifier,
        displayName: displayName ?? identifier,
        exclude: [],
      });
      const ceremonyId = await startCeremony(caller.organizationId, "register", {
        challenge: options.challenge,
        identityId,
        identifier,
        displayName,
      });
      return { ceremonyId, options };
    },

    /** register/finish: verifies the new passkey, creates the identity with it, and signs it in. */
    async finishRegistration(caller: Caller, input: { ceremonyId: string; credential: unknown }): Promise<Registered> {
      const violations: Violation[] = [];
      const ceremonyId = readCeremonyId(input.ceremonyId, "ceremony_id", violations);
      const response = readRegistrationCredential(input.credential, "credential", violations);
      const settings = await clientSettings(caller);
      assertValid(violations);
      if (!response) throw invalidArgument([{ field: "credential", description: "is required" }]);
      const ceremony = await spendCeremony(caller.organizationId, ceremonyId, "register");
      const verdict = await verifyPasskeyRegistration(response, {
        challenge: ceremony.challenge,
        origins: settings.origins,
        rpId: settings.rpId,
      });
      if (!verdict.ok) refuse(caller.organizationId, "register", verdict.reason, verdict.detail);
      const identityId = ceremony.identityId;
      const identifier = ceremony.identifier;
      if (identityId === null || identifier === null) throw refused("ceremony_not_found", "this ceremony does not exist; begin a new one");
      const passkey = verdict.value;
      const prepared = await deps.identity.prepareSignIn(caller.organizationId, identityId, "passkey", settings);
      return deps.transaction(async (tx) => {
        const now = deps.clock();
        // already_exists (409) when the identifier was taken since register/begin.
        await tx.identities.createIdentity({ id: identityId, organizationId: caller.organizationId, identifier, createdAt: now });
        await tx.events.record(caller.organizationId, {
          type: "identity.created",
          data: { identity_id: identityId, identifier, method: "passkey" },
        });
        await createPasskeyIn(tx, { organizationId: caller.organizationId, identityId, passkey, name: null, at: now });
        const signedIn = await deps.identity.signIn(prepared, { store: tx.identities, events: tx.events });
        return { ...signedIn, credentialId: passkey.credentialId };
      });
    },

    /**
     * login/begin. With an identifier: allowCredentials lists that identity's
     * passkeys, and an identifier without any (unknown, or no passkey) gets a
     * decoy list that looks the same. Without: a discoverable-credential
     * (usernameless) ceremony with an empty list.
     */
    async beginLogin(caller: Caller, input: { identifier?: string | undefined }) {
      const violations: Violation[] = [];
      const given = input.identifier !== undefined && input.identifier.trim().length > 0;
      const identifier = given ? readIdentifier(input.identifier ?? "", "identifier", violations) : null;
      const settings = await clientSettings(caller);
      assertValid(violations);
      let identityId: string | null = null;
      let allow = null;
      if (identifier !== null) {
        const candidates = await deps.passkeys.findLoginCandidates(caller.organizationId, identifier);
        identityId = candidates.identityId;
        allow = candidates.passkeys.length > 0 ? candidates.passkeys : decoyCredentials(await secret(), caller.organizationId, identifier);
      }
      const options = await requestOptions({ rp: settings, challenge: challenge(), allow });
      const ceremonyId = await startCeremony(caller.organizationId, "login", {
        challenge: options.challenge,
        identityId,
        identifier,
        displayName: null,
      });
      return { ceremonyId, options };
    },

    /** login/finish: verifies the assertion against the stored passkey and signs its identity in. */
    async finishLogin(caller: Caller, input: { ceremonyId: string; credential: unknown }): Promise<SignedIn> {
      const violations: Violation[] = [];
      const ceremonyId = readCeremonyId(input.ceremonyId, "ceremony_id", violations);
      const response = readAuthenticationCredential(input.credential, "credential", violations);
      const settings = await clientSettings(caller);
      assertValid(violations);
      if (!response) throw invalidArgument([{ field: "credential", description: "is required" }]);
      const ceremony = await spendCeremony(caller.organizationId, ceremonyId, "login");
      // Only a passkey of the caller's organisation is looked up: a passkey never signs in elsewhere.
      const passkey = await deps.passkeys.findPasskey(caller.organizationId, response.id);
      if (!passkey) throw refused("passkey_not_found", "this passkey is not registered here");
      // A sign-in by identifier accepts only that identity's passkeys (an unknown identifier has none).
      const notTheirs = () => refused("passkey_not_allowed", "this passkey does not belong to the identity signing in");
      if (ceremony.identifier !== null && passkey.identityId !== ceremony.identityId) throw notTheirs();
      // WebAuthn 7.2 step 6: the user handle, when given, must name the passkey's owner.
      if (response.response.userHandle !== undefined && userIdOfUserHandle(response.response.userHandle) !== passkey.identityId) {
        throw notTheirs();
      }
      const verdict = await verifyPasskeyAssertion(
        response,
        { challenge: ceremony.challenge, origins: settings.origins, rpId: settings.rpId },
        passkey,
      );
      if (!verdict.ok) refuse(caller.organizationId, "login", verdict.reason, verdict.detail);
      const use = verdict.value;
      const prepared = await deps.identity.prepareSignIn(caller.organizationId, passkey.identityId, "passkey", settings);
      return deps.transaction(async (tx) => {
        const at = deps.clock();
        // The counter rule again, as one conditional update: two assertions
        // racing with the same counter cannot both sign in.
        if (!(await tx.passkeys.recordPasskeyUse(caller.organizationId, passkey.id, { ...use, at }))) {
          refuse(caller.organizationId, "login", "passkey_counter_regression", `counter ${use.counter} is not above the stored one`);
        }
        return deps.identity.signIn(prepared, { store: tx.identities, events: tx.events });
      });
    },

    /** BeginAddPasskey (backend): options to add a passkey to an existing identity, its passkeys excluded. */
    async beginAddPasskey(caller: Caller, input: { identityId: string }) {
      const violations: Violation[] = [];
      const identityId = readUuid(input.identityId, "identity_id", violations);
      assertValid(violations);
      const settings = await deps.identity.settingsOf(caller.organizationId);
      requirePasskeys(settings);
      const identity = await deps.identities.findIdentity(caller.organizationId, identityId);
      if (!identity) throw new DomainError("not_found", "identity_not_found", `identity ${identityId} does not exist`);
      const existing = await deps.passkeys.listPasskeys(caller.organizationId, identityId);
      if (existing.length >= maxPasskeysPerIdentity) throw limitReached();
      const options = await creationOptions({
        rp: settings,
        challenge: challenge(),
        userId: identityId,
        userName: identity.identifier,
        displayName: identity.identifier,
        exclude: existing,
      });
      const ceremonyId = await startCeremony(caller.organizationId, "add_passkey", {
        challenge: options.challenge,
        identityId,
        identifier: null,
        displayName: null,
      });
      return { ceremonyId, options };
    },

    /** FinishAddPasskey (backend): verifies and stores the passkey (at most 20 per identity). */
    async finishAddPasskey(
      caller: Caller,
      input: { ceremonyId: string; credential: unknown; name: string },
    ): Promise<{ credentialId: string }> {
      const violations: Violation[] = [];
      const ceremonyId = readCeremonyId(input.ceremonyId, "ceremony_id", violations);
      const response = readRegistrationCredential(input.credential, "credential", violations);
      const name = readOptionalName(input.name, "name", violations);
      assertValid(violations);
      if (!response) throw invalidArgument([{ field: "credential", description: "is required" }]);
      const settings = await deps.identity.settingsOf(caller.organizationId);
      requirePasskeys(settings);
      const ceremony = await spendCeremony(caller.organizationId, ceremonyId, "add_passkey");
      const identityId = ceremony.identityId;
      if (identityId === null) throw refused("ceremony_not_found", "this ceremony does not exist; begin a new one");
      const verdict = await verifyPasskeyRegistration(response, {
        challenge: ceremony.challenge,
        origins: settings.origins,
        rpId: settings.rpId,
      });
      if (!verdict.ok) refuse(caller.organizationId, "add_passkey", verdict.reason, verdict.detail);
      const passkey = verdict.value;
      await deps.transaction(async (tx) => {
        // Serialises additions to one identity, so the limit holds under concurrency.
        if (!(await tx.passkeys.lockIdentity(caller.organizationId, identityId))) {
          throw new DomainError("not_found", "identity_not_found", `identity ${identityId} does not exist`);
        }
        if ((await tx.passkeys.countPasskeys(caller.organizationId, identityId)) >= maxPasskeysPerIdentity) throw limitReached();
        await createPasskeyIn(tx, { organizationId: caller.organizationId, identityId, passkey, name, at: deps.clock() });
      });
      return { credentialId: passkey.credentialId };
    },

    /** RemovePasskey (backend): the passkey stops signing in at once. */
    async removePasskey(caller: Caller, input: { identityId: string; credentialId: string }): Promise<void> {
      const violations: Violation[] = [];
      const identityId = readUuid(input.identityId, "identity_id", violations);
      const credentialId = readCredentialId(input.credentialId, "credential_id", violations);
      assertValid(violations);
      await removeIn(caller.organizationId, identityId, credentialId);
    },

    /**
     * Operators (the dashboard): removes one passkey of an identity of the
     * organisation; it stops signing in at once. An identity of another
     * organisation is not_found (identity_not_found), like one that does not
     * exist; a credential the identity does not hold, passkey_not_found.
     */
    async removeIdentityPasskey(organizationId: string, input: { identityId: string; credentialId: string }): Promise<void> {
      const violations: Violation[] = [];
      const identityId = readUuid(input.identityId, "identity_id", violations);
      const credentialId = readCredentialId(input.credentialId, "credential_id", violations);
      assertValid(violations);
      if (!(await deps.identities.findIdentity(organizationId, identityId))) {
        throw new DomainError("not_found", "identity_not_found", `identity ${identityId} does not exist`);
      }
      await removeIn(organizationId, identityId, credentialId);
    },

    /** An identity's passkeys (operators' reads). */
    listPasskeys: (organizationId: string, identityId: string) => deps.passkeys.listPasskeys(organizationId, identityId),
  };

  async function removeIn(organizationId: string, identityId: string, credentialId: string): Promise<void> {
    await deps.transaction(async (tx) => {
      if (!(await tx.passkeys.removePasskey(organizationId, identityId, credentialId))) {
        throw new DomainError("not_found", "passkey_not_found", "this identity has no passkey with this credential id");
      }
      await tx.events.record(organizationId, { type: "passkey.removed", data: { identity_id: identityId, credential_id: credentialId } });
    });
  }

  async function createPasskeyIn(
    tx: PasskeyTransactionStores,
    input: { organizationId: string; identityId: string; passkey: VerifiedRegistration; name: string | null; at: Date },
  ): Promise<void> {
    try {
      await tx.passkeys.createPasskey({
        id: input.passkey.credentialId,
        organizationId: input.organizationId,
        identityId: input.identityId,
        publicKey: input.passkey.publicKey,
        counter: input.passkey.counter,
        transports: input.passkey.transports,
        deviceType: input.passkey.deviceType,
        backedUp: input.passkey.backedUp,
        aaguid: input.passkey.aaguid,
        name: input.name,
        createdAt: input.at,
        lastUsedAt: null,
      });
      await tx.events.record(input.organizationId, {
        type: "passkey.added",
        data: { identity_id: input.identityId, credential_id: input.passkey.credentialId, name: input.name ?? "" },
      });
    } catch (error) {
      // WebAuthn 7.1 step 26: "If the credentialId is already known then the
      // Relying Party SHOULD fail this registration ceremony."
      if (error instanceof DomainError && error.reason === "passkey_exists") {
        throw refused("passkey_already_registered", "this passkey is already registered");
      }
      throw error;
    }
  }
}

function limitReached(): DomainError {
  return new DomainError(
    "failed_precondition",
    "passkey_limit_reached",
    `an identity holds at most ${maxPasskeysPerIdentity} passkeys; remove one before adding another`,
  );
}

export type Passkeys = ReturnType<typeof createPasskeys>;
