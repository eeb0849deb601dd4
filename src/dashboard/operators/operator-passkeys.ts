import { randomUUID } from "node:crypto";
import { isIP } from "node:net";
import type { PublicKeyCredentialCreationOptionsJSON, PublicKeyCredentialRequestOptionsJSON } from "@simplewebauthn/server";
import { hashToken, newOpaqueToken, systemRandom, type RandomSource } from "../../crypto/tokens.js";
import type { Clock } from "../../domain/clock.js";
import { DomainError, invalidArgument, type Violation } from "../../domain/errors.js";
import { invisibleCharacterProblem, normalizeIdentifier, readUuid } from "../../domain/identity/identifiers.js";
import { creationOptions, requestOptions } from "../../domain/passkeys/passkey-options.js";
import {
  ceremonyTtlSeconds,
  maxPasskeysPerIdentity,
  readAuthenticationCredential,
  readCeremonyId,
  readOptionalName,
  readRegistrationCredential,
  userIdOfUserHandle,
} from "../../domain/passkeys/passkey-rules.js";
import {
  refusalMessages,
  verifyPasskeyAssertion,
  verifyPasskeyRegistration,
  type RefusalReason,
} from "../../domain/passkeys/verify-passkey-response.js";
import type { DashboardStore, OperatorChallengeKind, OperatorChallengeRecord, OperatorPasskeyRecord } from "./dashboard-store.js";
import type { OperatorSessions, SignedIn, StartedSession } from "./operator-sessions.js";

/** The most passkeys one operator account may hold (as for an identity). */
export const maxOperatorPasskeys = maxPasskeysPerIdentity;

const defaultPasskeyName = "Passkey";

/** The dashboard's WebAuthn relying party. */
export interface DashboardRelyingParty {
  rpId: string;
  /** The one origin responses may come from: PUBLIC_URL's (the dashboard accepts no other page). */
  origin: string;
}

/**
 * The relying party of the dashboard: the host and origin of PUBLIC_URL, the
 * only origin whose pages may use the dashboard. Null when the host is an IP
 * address, which cannot be an RP ID (WebAuthn: "the RP ID must be a registrable
 * domain suffix of or equal to the caller's origin's effective domain", and an
 * IP address has no domain); http://localhost:PORT works.
 */
export function dashboardRelyingParty(publicUrl: string): DashboardRelyingParty | null {
  const url = new URL(publicUrl);
  const host = url.hostname.replace(/^\[|\]$/g, "");
  if (isIP(host) !== 0) return null;
  return { rpId: url.hostname, origin: url.origin };
}

export interface OperatorPasskeysDeps {
  store: DashboardStore;
  /** Runs fn with a store bound to one transaction. */
  transaction<T>(fn: (store: DashboardStore) => Promise<T>): Promise<T>;
  sessions: Pick<OperatorSessions, "startVerified" | "purgeExpired" | "lockSignedIn">;
  clock: Clock;
  random?: RandomSource;
  /** PUBLIC_URL: its host is the RP ID, its origin the only one accepted. */
  publicUrl: string;
  /** Refusal details for the operator's log (never shown to the client). */
  onRefusal?: (refusal: { reason: string; detail: string; ceremony: OperatorChallengeKind }) => void;
}

/** A passkey sign-in begun: the cookie value that binds it to this browser, and the options for navigator.credentials.get(). */
export interface BegunSignIn {
  token: string;
  options: PublicKeyCredentialRequestOptionsJSON;
  expiresAt: Date;
}

function refused(reason: string, message: string): DomainError {
  return new DomainError("unauthenticated", reason, message);
}

function assertValid(violations: Violation[]): void {
  if (violations.length > 0) throw invalidArgument(violations);
}

/**
 * Passkeys of operators' platform accounts: a signed-in operator adds, lists
 * and removes their own, and anyone may sign in to the dashboard with one,
 * getting the same session as a password sign-in. The ceremonies reuse the
 * end-user passkey area's options, response readers and verification
 * (src/domain/passkeys); what differs is the relying party (the dashboard's own
 * PUBLIC_URL, not an organisation's settings) and where challenges live: a
 * table of their own, single-use and expiring after 5 minutes, so any instance
 * can finish what another began.
 *
 * A sign-in is bound to the browser that began it: begin sets an HttpOnly,
 * SameSite=Strict cookie holding a random handle whose hash names the stored
 * challenge, and finish accepts only a response presented with that cookie. A
 * response captured elsewhere cannot be finished from another browser, and
 * the login CSRF of a forged finish has no challenge to answer.
 */
export function createOperatorPasskeys(deps: OperatorPasskeysDeps) {
  const random = deps.random ?? systemRandom;

  function relyingParty(): DashboardRelyingParty {
    const rp = dashboardRelyingParty(deps.publicUrl);
    if (!rp) {
      throw new DomainError(
        "failed_precondition",
        "passkeys_unavailable",
        `passkeys need the dashboard at a host name: PUBLIC_URL is ${deps.publicUrl}, and an IP address cannot be a WebAuthn relying party (use e.g. http://localhost:${new URL(deps.publicUrl).port || "8080"})`,
      );
    }
    return rp;
  }

  function challenge(): Uint8Array<ArrayBuffer> {
    // WebAuthn 13.4.3: challenges "SHOULD be at least 16 bytes long"; 32 random bytes.
    return new Uint8Array(random(32));
  }

  function refuse(ceremony: OperatorChallengeKind, reason: RefusalReason, detail: string): never {
    deps.onRefusal?.({ reason, detail, ceremony });
    throw refused(reason, refusalMessages[reason]);
  }

  async function storeChallenge(
    id: string,
    kind: OperatorChallengeKind,
    fields: { challenge: string; accountId: string | null; emailGiven: boolean },
  ): Promise<Date> {
    await deps.sessions.purgeExpired();
    const now = deps.clock();
    const expiresAt = new Date(now.getTime() + ceremonyTtlSeconds * 1000);
    await deps.store.createChallenge({ id, kind, ...fields, createdAt: now, expiresAt });
    return expiresAt;
  }

  /** Spends a challenge (one conditional update), or says why it cannot be. */
  async function spendChallenge(id: string, kind: OperatorChallengeKind, accountId: string | null): Promise<OperatorChallengeRecord> {
    const spent = await deps.store.spendChallenge(id, kind, accountId, deps.clock());
    if (spent) return spent;
    const found = await deps.store.findChallenge(id);
    const begin = kind === "sign_in" ? "choose sign-in with a passkey again" : "add the passkey again";
    if (!found || found.kind !== kind || (accountId !== null && found.accountId !== accountId)) {
      throw refused("ceremony_not_found", `this passkey ceremony does not exist (or has been cleared): ${begin}`);
    }
    if (found.usedAt !== null) throw refused("ceremony_used", `this passkey ceremony has already been answered: ${begin}`);
    throw refused("ceremony_expired", `this passkey ceremony has expired (they last 5 minutes): ${begin}`);
  }

  return {
    /** The account's passkeys, oldest first. */
    list(accountId: string): Promise<OperatorPasskeyRecord[]> {
      return deps.store.listOperatorPasskeys(accountId);
    },

    /** BeginAddOperatorPasskey: creation options for the signed-in account, its passkeys excluded. */
    async beginAdd(accountId: string): Promise<{ ceremonyId: string; options: PublicKeyCredentialCreationOptionsJSON }> {
      const rp = relyingParty();
      const account = await deps.store.findAccount(accountId);
      if (!account) throw refused("dashboard_session_missing", "sign in to the dashboard first");
      const existing = await deps.store.listOperatorPasskeys(accountId);
      if (existing.length >= maxOperatorPasskeys) throw limitReached();
      const options = await creationOptions({
        rp,
        challenge: challenge(),
        userId: accountId,
        userName: account.email,
        displayName: account.displayName,
        exclude: existing.map((p) => ({ id: p.credentialId, transports: p.transports })),
      });
      const ceremonyId = randomUUID();
      await storeChallenge(ceremonyId, "add_passkey", { challenge: options.challenge, accountId, emailGiven: false });
      return { ceremonyId, options };
    },

    /**
     * FinishAddOperatorPasskey: verifies the new passkey and stores it under the
     * account that began the ceremony, while the session asking is still live
     * (a recovery or a joining may have ended it since the request was authenticated).
     */
    async finishAdd(signedIn: SignedIn, input: { ceremonyId: string; credential: unknown; name: string }): Promise<OperatorPasskeyRecord> {
      const { accountId } = signedIn;
      const violations: Violation[] = [];
      const ceremonyId = readCeremonyId(input.ceremonyId, "ceremony_id", violations);
      const response = readRegistrationCredential(input.credential, "credential", violations);
      const name = readOptionalName(input.name, "name", violations);
      assertValid(violations);
      if (!response) throw invalidArgument([{ field: "credential", description: "is required" }]);
      const rp = relyingParty();
      // Only the account that began the ceremony can finish it.
      const ceremony = await spendChallenge(ceremonyId, "add_passkey", accountId);
      const verdict = await verifyPasskeyRegistration(response, { challenge: ceremony.challenge, origins: [rp.origin], rpId: rp.rpId });
      if (!verdict.ok) refuse("add_passkey", verdict.reason, verdict.detail);
      const passkey = verdict.value;
      const record: OperatorPasskeyRecord = {
        id: randomUUID(),
        accountId,
        credentialId: passkey.credentialId,
        publicKey: passkey.publicKey,
        counter: passkey.counter,
        transports: passkey.transports,
        deviceType: passkey.deviceType,
        backedUp: passkey.backedUp,
        name: name ?? defaultPasskeyName,
        createdAt: deps.clock(),
        lastUsedAt: null,
      };
      try {
        await deps.transaction(async (store) => {
          // Serialises additions to one account (so the limit holds under concurrency) with every change of its credentials.
          await deps.sessions.lockSignedIn(store, signedIn);
          if ((await store.countOperatorPasskeys(accountId)) >= maxOperatorPasskeys) throw limitReached();
          await store.createOperatorPasskey(record);
        });
      } catch (error) {
        // WebAuthn 7.1 step 26: "If the credentialId is already known then the
        // Relying Party SHOULD fail this registration ceremony."
        if (error instanceof DomainError && error.reason === "passkey_exists") {
          throw refused("passkey_already_registered", "this passkey is already registered");
        }
        throw error;
      }
      return record;
    },

    /** RemoveOperatorPasskey: one of the account's own passkeys; it stops signing in at once. */
    async remove(accountId: string, rawId: string): Promise<void> {
      const violations: Violation[] = [];
      const id = readUuid(rawId, "passkey_id", violations);
      assertValid(violations);
      if (!(await deps.store.removeOperatorPasskey(accountId, id))) {
        throw new DomainError("not_found", "passkey_not_found", "you have no passkey with this id");
      }
    },

    /**
     * Begins a passkey sign-in. Without an e-mail address any operator's
     * discoverable passkey may answer (WebAuthn "username-less" flow, empty
     * allowCredentials). With one, the options are the same (so they say
     * nothing about whether the address has an account or passkeys), but only
     * a passkey of that address's account will be accepted at finish. The
     * route runs it under the per-address limits (OperatorSessions.guard), as
     * every sign-in; password failures do not touch it.
     */
    async beginSignIn(input: { email?: string | undefined }): Promise<BegunSignIn> {
      const violations: Violation[] = [];
      const email = normalizeIdentifier(input.email ?? "");
      const invisible = invisibleCharacterProblem(email);
      if (email.length > 254) violations.push({ field: "email", description: "must be at most 254 characters" });
      else if (invisible) violations.push({ field: "email", description: invisible });
      assertValid(violations);
      const rp = relyingParty();
      let accountId: string | null = null;
      if (email !== "") {
        const account = await deps.store.findAccountByEmail(email);
        accountId = account && account.kind === "person" && account.disabledAt === null ? account.id : null;
      }
      const options = await requestOptions({ rp, challenge: challenge(), allow: null });
      const token = newOpaqueToken(random);
      const expiresAt = await storeChallenge(hashToken(token), "sign_in", {
        challenge: options.challenge,
        accountId,
        emailGiven: email !== "",
      });
      return { token, options, expiresAt };
    },

    /**
     * Finishes a passkey sign-in: the challenge of this browser's cookie, spent
     * once; a registered passkey of an enabled account (of the e-mail
     * address typed, if one was); then the assertion's challenge, origin, RP ID,
     * user verification, signature and counter. Starts a dashboard session.
     */
    async finishSignIn(input: { token: string | null; credential: unknown }): Promise<StartedSession> {
      const violations: Violation[] = [];
      const response = readAuthenticationCredential(input.credential, "credential", violations);
      assertValid(violations);
      if (!response) throw invalidArgument([{ field: "credential", description: "is required" }]);
      const rp = relyingParty();
      if (input.token === null) {
        throw refused(
          "ceremony_missing",
          "no passkey sign-in was begun in this browser (its challenge cookie is missing): choose sign-in with a passkey again",
        );
      }
      const ceremony = await spendChallenge(hashToken(input.token), "sign_in", null);
      const passkey = await deps.store.findOperatorPasskeyByCredentialId(response.id);
      if (!passkey) throw refused("passkey_not_found", "this passkey is not registered to any dashboard account");
      const notTheirs = () => refused("passkey_not_allowed", "this passkey does not belong to the account signing in");
      if (ceremony.emailGiven && passkey.accountId !== ceremony.accountId) throw notTheirs();
      // WebAuthn 7.2 step 6: the user handle, when given, must name the passkey's owner.
      if (response.response.userHandle !== undefined && userIdOfUserHandle(response.response.userHandle) !== passkey.accountId) {
        throw notTheirs();
      }
      const disabled = () => refused("account_disabled", "this passkey's dashboard account is disabled");
      const account = await deps.store.findAccount(passkey.accountId);
      if (account?.kind !== "person" || account.disabledAt !== null) throw disabled();
      const verdict = await verifyPasskeyAssertion(
        response,
        { challenge: ceremony.challenge, origins: [rp.origin], rpId: rp.rpId },
        { id: passkey.credentialId, publicKey: passkey.publicKey, counter: passkey.counter, transports: passkey.transports },
      );
      if (!verdict.ok) refuse("sign_in", verdict.reason, verdict.detail);
      const use = verdict.value;
      await deps.sessions.purgeExpired();
      return deps.transaction(async (store) => {
        // The account's lock first, as every change of its credentials takes it:
        // a recovery or a joining that removed this passkey meanwhile has
        // deleted its row, and the conditional update below finds nothing.
        await store.lockAccount(passkey.accountId);
        const current = await store.findAccount(passkey.accountId);
        if (current?.kind !== "person" || current.disabledAt !== null) throw disabled();
        // The counter rule again, as one conditional update: two assertions
        // racing with the same counter cannot both sign in.
        if (!(await store.recordOperatorPasskeyUse(passkey.id, { ...use, at: deps.clock() }))) {
          refuse("sign_in", "passkey_counter_regression", `counter ${use.counter} is not above the stored one`);
        }
        return deps.sessions.startVerified(store, passkey.accountId);
      });
    },
  };
}

function limitReached(): DomainError {
  return new DomainError(
    "failed_precondition",
    "passkey_limit_reached",
    `an account holds at most ${maxOperatorPasskeys} passkeys; remove one before adding another`,
  );
}

export type OperatorPasskeys = ReturnType<typeof createOperatorPasskeys>;
