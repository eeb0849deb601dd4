import { randomUUID } from "node:crypto";
import {
  credentialPrefixes,
  displayPrefix,
  hashToken,
  newCredential,
  newOpaqueToken,
  type RandomSource,
  systemRandom,
} from "../../crypto/tokens.js";
import type { TenancyStore, Role } from "./tenancy-store.js";
import type { RotatedSigningKey } from "../identity/sessions.js";
import type { Clock } from "../clock.js";
import type { EventLog } from "../events/event-log.js";
import { DomainError, invalidArgument, type Violation } from "../errors.js";
import { readUuid } from "../identity/identifiers.js";

export interface TenancyDeps {
  /** Reads outside a transaction. */
  store: Pick<TenancyStore, "listOrganizations" | "findOrganization" | "listApiKeys">;
  /** Runs fn with a store bound to one transaction, and the log of its events. */
  transaction<T>(fn: (store: TenancyStore, events: EventLog) => Promise<T>): Promise<T>;
  clock: Clock;
  random?: RandomSource;
  publicUrl: string;
  /** Told after a key is revoked by rotation, so no instance keeps trusting it. */
  credentialsChanged?(): Promise<void>;
  /** The identity area's session signing keys, which an operator may rotate. */
  sessionSigningKeys?: { rotate(organizationId: string): Promise<RotatedSigningKey> };
}

/** What `gatehouse init` prints once. */
export interface InitialCredentials {
  organization_id: string;
  api_key: string;
  publishable_key: string;
  secret_key: string;
  dashboard_setup_url: string;
}

const setupLinkLifetimeMs = 7 * 24 * 3600 * 1000;

/** The address of a new organisation's owner account until its setup link is used (`.invalid`, RFC 2606: never anyone's). */
function ownerPlaceholderEmail(organizationId: string): string {
  return `owner+${organizationId}@setup.invalid`;
}

/** Whether an address is an owner placeholder's, the only kind of account a setup link sets up. */
export function isOwnerPlaceholderEmail(email: string): boolean {
  return email.startsWith("owner+") && email.endsWith("@setup.invalid");
}
const roles: readonly Role[] = ["admin", "member"];

export function isRole(value: string): value is Role {
  return (roles as readonly string[]).includes(value);
}

export function createTenancy(deps: TenancyDeps) {
  const random = deps.random ?? systemRandom;

  async function createOrganizationWith(store: TenancyStore, events: EventLog, name: string, now: Date) {
    const organizationId = randomUUID();
    await store.createOrganization({ id: organizationId, name });
    const publishableKey = newCredential(credentialPrefixes.publishableKey, random);
    const secretKey = newCredential(credentialPrefixes.secretKey, random);
    for (const [kind, key] of [
      ["publishable", publishableKey],
      ["secret", secretKey],
    ] as const) {
      const id = randomUUID();
      await store.createOrganizationKey({ id, organizationId, kind, prefix: displayPrefix(key), hash: hashToken(key) });
      await events.record(organizationId, { type: "key.created", data: { kind: `${kind}_key`, id, name: `${kind} key` } });
    }
    const ownerId = randomUUID();
    await store.createAccount({ id: ownerId, email: ownerPlaceholderEmail(organizationId), displayName: "Owner", kind: "person" });
    await store.addMembership({ organizationId, accountId: ownerId, role: "admin" });
    const setup = await newSetupLink(store, ownerId, now);
    return { organizationId, publishableKey, secretKey, dashboardSetupUrl: setup.url };
  }

  /** A new setup link of an owner placeholder account, lasting setupLinkLifetimeMs. */
  async function newSetupLink(store: TenancyStore, accountId: string, now: Date) {
    const setupToken = newOpaqueToken(random);
    const expiresAt = new Date(now.getTime() + setupLinkLifetimeMs);
    await store.createSetupToken({ id: randomUUID(), accountId, hash: hashToken(setupToken), expiresAt });
    return { url: `${deps.publicUrl}/dashboard/setup#token=${setupToken}`, expiresAt };
  }

  async function createApiKeyWith(
    store: TenancyStore,
    events: EventLog,
    input: { organizationId: string; name: string; role: Role },
  ): Promise<{ apiKey: string; id: string; prefix: string }> {
    // An API key acts as a service account, member of one organisation with the key's role.
    const accountId = randomUUID();
    await store.createAccount({
      id: accountId,
      email: `service+${accountId}@keys.invalid`,
      displayName: `api key ${input.name}`,
      kind: "service",
    });
    await store.addMembership({ organizationId: input.organizationId, accountId, role: input.role });
    const apiKey = newCredential(credentialPrefixes.apiKey, random);
    const id = randomUUID();
    const prefix = displayPrefix(apiKey);
    await store.createApiKey({ id, accountId, name: input.name, prefix, hash: hashToken(apiKey) });
    await events.record(input.organizationId, { type: "key.created", data: { kind: "api_key", id, name: input.name } });
    return { apiKey, id, prefix };
  }

  return {
    /** Every organisation, oldest first (operators). */
    listOrganizations: () => deps.store.listOrganizations(),
    /** The organisation, or null. */
    findOrganization: (organizationId: string) => deps.store.findOrganization(organizationId),
    /** The organisation's API keys (names and prefixes, never the keys). */
    listApiKeys: (organizationId: string) => deps.store.listApiKeys(organizationId),

    /**
     * Initialises an empty data store: one organisation, an admin API key, its
     * publishable and secret keys and the owner's one-time dashboard setup link.
     * Fails with already_exists (already_initialized) when the store was initialised.
     */
    initialize(): Promise<InitialCredentials> {
      return deps.transaction(async (store, events) => {
        const now = deps.clock();
        await store.markInitialized(now);
        const org = await createOrganizationWith(store, events, "Default organisation", now);
        const { apiKey } = await createApiKeyWith(store, events, {
          organizationId: org.organizationId,
          name: "initial admin",
          role: "admin",
        });
        return {
          organization_id: org.organizationId,
          api_key: apiKey,
          publishable_key: org.publishableKey,
          secret_key: org.secretKey,
          dashboard_setup_url: org.dashboardSetupUrl,
        };
      });
    },

    /** Creates a further organisation with its own keys and owner setup link. */
    createOrganization(name: string) {
      const trimmed = name.trim();
      if (trimmed.length === 0 || trimmed.length > 200) {
        throw invalidArgument([{ field: "name", description: "must be 1 to 200 characters" }]);
      }
      return deps.transaction((store, events) => createOrganizationWith(store, events, trimmed, deps.clock()));
    },

    /**
     * Issues a new owner setup link for an organisation that has no operator
     * yet (operators: `gatehouse operators setup-link`; docs/dashboard.md,
     * "The first sign-in"). The link sets up the organisation's owner
     * placeholder only, as the one `init` printed; every earlier unused setup
     * link of that placeholder stops working in the same transaction. An
     * organisation with an operator (a person member with an address of their
     * own or a password) is failed_precondition (organization_has_operator):
     * their way back in is a recovery sign-in link, never a setup link
     * (docs/security.md, "The dashboard and operator accounts").
     */
    issueOwnerSetupLink(organizationId: string): Promise<{ url: string; accountId: string; expiresAt: Date }> {
      const violations: Violation[] = [];
      const id = readUuid(organizationId, "organization_id", violations);
      if (violations.length > 0) throw invalidArgument(violations);
      return deps.transaction(async (store) => {
        const now = deps.clock();
        if (!(await store.findOrganization(id))) {
          throw new DomainError("not_found", "organization_not_found", `organisation ${id} does not exist (see gatehouse orgs list)`);
        }
        const members = await store.personMembersOf(id);
        const operators = members.filter((member) => member.hasPassword || !isOwnerPlaceholderEmail(member.email));
        if (operators.length > 0) {
          throw new DomainError(
            "failed_precondition",
            "organization_has_operator",
            `organisation ${id} already has an operator (${operators.map((member) => member.email).join(", ")}): ` +
              "a setup link is only for an organisation nobody has set up; give its operator a one-time sign-in link " +
              "instead (gatehouse operators sign-in-link --email <address>)",
          );
        }
        let owner = members.find((member) => member.email === ownerPlaceholderEmail(id));
        if (owner?.disabled) {
          throw new DomainError("failed_precondition", "owner_account_disabled", `the owner account of organisation ${id} is disabled`);
        }
        if (!owner) {
          // Its placeholder is gone (nobody ever set it up): a new one, as a new organisation gets.
          const accountId = randomUUID();
          await store.createAccount({ id: accountId, email: ownerPlaceholderEmail(id), displayName: "Owner", kind: "person" });
          await store.addMembership({ organizationId: id, accountId, role: "admin" });
          owner = { accountId, email: ownerPlaceholderEmail(id), hasPassword: false, disabled: false };
        }
        await store.voidSetupTokensOf(owner.accountId, now);
        const setup = await newSetupLink(store, owner.accountId, now);
        return { url: setup.url, accountId: owner.accountId, expiresAt: setup.expiresAt };
      });
    },

    /** Creates an API key for an organisation; the key is returned once and stored hashed. */
    createApiKey(input: { organizationId: string; name: string; role: string }) {
      const violations = [];
      const name = input.name.trim();
      if (name.length === 0 || name.length > 100) violations.push({ field: "name", description: "must be 1 to 100 characters" });
      if (!isRole(input.role)) violations.push({ field: "role", description: 'must be "admin" or "member"' });
      if (violations.length > 0) throw invalidArgument(violations);
      return deps.transaction(async (store, events) => {
        if (!(await store.findOrganization(input.organizationId))) {
          throw new DomainError("not_found", "organization_not_found", `organisation ${input.organizationId} does not exist`);
        }
        return createApiKeyWith(store, events, { organizationId: input.organizationId, name, role: input.role as Role });
      });
    },

    /**
     * Revokes an API key (operators: the dashboard and `gatehouse keys
     * revoke`): it is refused (401) from then on, and every instance stops
     * trusting what it cached about it. With an organisation, the key must
     * be one of its members' (an id of another organisation is not_found,
     * like one that does not exist). Answers whether this call revoked it:
     * false when it was revoked already (or, without an organisation, does
     * not exist), which changes nothing.
     */
    async revokeApiKey(input: { apiKeyId: string; organizationId?: string }): Promise<{ revoked: boolean }> {
      const violations: Violation[] = [];
      const id = readUuid(input.apiKeyId, "api_key_id", violations);
      if (violations.length > 0) throw invalidArgument(violations);
      const revoked = await deps.transaction(async (store, events) => {
        const { organizationId } = input;
        if (organizationId !== undefined && !(await store.listApiKeys(organizationId)).some((key) => key.id === id)) {
          throw new DomainError("not_found", "api_key_not_found", `API key ${id} does not exist in this organisation`);
        }
        if (!(await store.revokeApiKey(id, deps.clock()))) return false;
        for (const organization of await store.organizationsOfApiKey(id)) {
          await events.record(organization, { type: "key.revoked", data: { kind: "api_key", id } });
        }
        return true;
      });
      if (revoked) await deps.credentialsChanged?.();
      return { revoked };
    },

    /** Rotates the organisation's secret (or publishable) key; the new key is returned once. */
    async rotateOrganizationKey(organizationId: string, kind: "publishable" | "secret") {
      const rotated = await deps.transaction(async (store, events) => {
        const now = deps.clock();
        const kindOfEvent = kind === "secret" ? "secret_key" : "publishable_key";
        if (!(await store.findOrganization(organizationId))) {
          throw new DomainError("not_found", "organization_not_found", `organisation ${organizationId} does not exist`);
        }
        for (const id of await store.revokeLiveOrganizationKeys(organizationId, kind, now)) {
          await events.record(organizationId, { type: "key.revoked", data: { kind: kindOfEvent, id } });
        }
        const key = newCredential(kind === "secret" ? credentialPrefixes.secretKey : credentialPrefixes.publishableKey, random);
        const id = randomUUID();
        await store.createOrganizationKey({ id, organizationId, kind, prefix: displayPrefix(key), hash: hashToken(key) });
        await events.record(organizationId, { type: "key.created", data: { kind: kindOfEvent, id, name: `${kind} key` } });
        return key;
      });
      await deps.credentialsChanged?.();
      return rotated;
    },

    /**
     * Rotates the organisation's session signing key (operators: the dashboard
     * and the CLI): a new kid signs its sessions from now on; the old key stays
     * in the JWKS until the last token it signed has expired. Another
     * organisation's key never changes. not_found when the organisation does not exist.
     */
    async rotateSessionSigningKey(organizationId: string): Promise<RotatedSigningKey> {
      if (!deps.sessionSigningKeys) throw new Error("session signing keys are not wired into tenancy");
      if (!(await deps.store.findOrganization(organizationId))) {
        throw new DomainError("not_found", "organization_not_found", `organisation ${organizationId} does not exist`);
      }
      return deps.sessionSigningKeys.rotate(organizationId);
    },
  };
}

export type Tenancy = ReturnType<typeof createTenancy>;
