import { randomUUID } from "node:crypto";
import { credentialPrefixes, displayPrefix, hashToken, newCredential, systemRandom, type RandomSource } from "../../crypto/tokens.js";
import type { ConsumerKeyRecord, GatewayKeyRecord, GatewayStore } from "./gateway-store.js";
import type { Clock } from "../clock.js";
import type { EventLog } from "../events/event-log.js";
import { DomainError, invalidArgument, type Violation } from "../errors.js";
import { readUuid } from "../identity/identifiers.js";
import type { GatewayChangeKind } from "../changes/topics.js";

export interface GatewayCredentialsDeps {
  /** Reads outside a transaction. */
  store: GatewayStore;
  /** Runs fn in one transaction; `announce` reaches every instance's gateway streams once, and only if, it commits. */
  transaction<T>(
    fn: (store: GatewayStore, announce: (organizationId: string, kind: GatewayChangeKind) => void, events: EventLog) => Promise<T>,
  ): Promise<T>;
  /** Tells every instance to stop trusting cached credentials (after a gateway key is revoked). */
  credentialsChanged(): Promise<void>;
  clock: Clock;
  random?: RandomSource;
}

/** A gateway key just created: the key is in this answer and nowhere else, ever. */
export interface CreatedGatewayKey {
  gatewayKey: string;
  key: GatewayKeyRecord;
}

/** A consumer key just created: the key is in this answer and nowhere else, ever. */
export interface CreatedConsumerKey {
  consumerKey: string;
  consumer: ConsumerKeyRecord;
}

/** A gateway that follows the organisation, as the dashboard lists it. */
export interface ConnectedGateway {
  gatewayId: string;
  /** The configuration revision last sent to it. */
  revision: number;
  connectedAt: Date;
  lastSeenAt: Date;
  /** True while its stream is open (it was seen within the last 90 seconds and has not disconnected). */
  connected: boolean;
}

const maxNameLength = 100;
/** A stream refreshes its gateway's last-seen time every 20 s; three missed refreshes mean it is gone. */
export const connectedWithinMs = 90_000;
/** Gateways not seen for a day drop off the list. */
export const listedWithinMs = 24 * 3600 * 1000;

/**
 * Gateway keys (gw_, a data-plane gateway's credential for one organisation)
 * and consumer keys (ck_, what the gateway's api-key-auth accepts): created
 * once-shown, stored as SHA-256 only, listed, revoked. Used by the operator
 * commands (`gatehouse keys create --kind gateway`, `gatehouse consumers ...`)
 * and the dashboard.
 */
export function createGatewayCredentials(deps: GatewayCredentialsDeps) {
  const random = deps.random ?? systemRandom;

  function readName(raw: string, violations: Violation[]): string {
    const name = raw.trim();
    if (name.length === 0 || name.length > maxNameLength) {
      violations.push({ field: "name", description: `must be 1 to ${maxNameLength} characters` });
    } else if (/[\x00-\x1f\x7f]/.test(name)) {
      violations.push({ field: "name", description: "must not contain control characters (line breaks, tabs, ...)" });
    }
    return name;
  }

  async function requireOrganization(store: GatewayStore, organizationId: string): Promise<void> {
    if (!(await store.organizationExists(organizationId))) {
      throw new DomainError("not_found", "organization_not_found", `organisation "${organizationId}" does not exist`);
    }
  }

  function readId(raw: string, field: string): string {
    const violations: Violation[] = [];
    const id = readUuid(raw, field, violations);
    if (violations.length > 0) throw invalidArgument(violations);
    return id;
  }

  return {
    /** A new gateway key of the organisation; the key is returned once. */
    async createGatewayKey(input: { organizationId: string; name: string }): Promise<CreatedGatewayKey> {
      const violations: Violation[] = [];
      const name = readName(input.name, violations);
      if (violations.length > 0) throw invalidArgument(violations);
      const gatewayKey = newCredential(credentialPrefixes.gatewayKey, random);
      const key: GatewayKeyRecord = {
        id: randomUUID(),
        organizationId: input.organizationId,
        name,
        prefix: displayPrefix(gatewayKey),
        createdAt: deps.clock(),
        lastUsedAt: null,
        revokedAt: null,
      };
      await deps.transaction(async (store, _announce, events) => {
        await requireOrganization(store, input.organizationId);
        await store.createGatewayKey({ ...key, hash: hashToken(gatewayKey) });
        await events.record(input.organizationId, { type: "key.created", data: { kind: "gateway_key", id: key.id, name } });
      });
      return { gatewayKey, key };
    },

    /** The organisation's gateway keys, newest first (prefix, name, creation, last use; never the key). */
    async listGatewayKeys(organizationId: string, options: { includeRevoked?: boolean } = {}): Promise<GatewayKeyRecord[]> {
      await requireOrganization(deps.store, organizationId);
      return deps.store.listGatewayKeys(organizationId, { includeRevoked: options.includeRevoked ?? false });
    },

    /**
     * Revokes a gateway key: it authenticates nowhere from now on, and every
     * stream it holds ends with unauthenticated. Revoking a revoked key changes
     * nothing; an unknown id is not_found.
     */
    async revokeGatewayKey(organizationId: string, id: string): Promise<void> {
      const keyId = readId(id, "gateway_key_id");
      const revoked = await deps.transaction(async (store, announce, events) => {
        const key = await store.findGatewayKey(organizationId, keyId);
        if (!key) throw new DomainError("not_found", "gateway_key_not_found", `the organisation has no gateway key ${keyId}`);
        if (!(await store.revokeGatewayKey(organizationId, keyId, deps.clock()))) return false;
        announce(organizationId, "gateway_keys");
        await events.record(organizationId, { type: "key.revoked", data: { kind: "gateway_key", id: keyId } });
        return true;
      });
      if (revoked) await deps.credentialsChanged();
    },

    /** A new consumer key for api-key-auth; the key is returned once, every gateway of the organisation accepts it at once. */
    async createConsumerKey(input: { organizationId: string; name: string }): Promise<CreatedConsumerKey> {
      const violations: Violation[] = [];
      const name = readName(input.name, violations);
      if (violations.length > 0) throw invalidArgument(violations);
      const consumerKey = newCredential(credentialPrefixes.consumerKey, random);
      const consumer: ConsumerKeyRecord = {
        id: randomUUID(),
        organizationId: input.organizationId,
        name,
        prefix: displayPrefix(consumerKey),
        createdAt: deps.clock(),
        revokedAt: null,
      };
      await deps.transaction(async (store, announce, events) => {
        await requireOrganization(store, input.organizationId);
        await store.createConsumerKey({ ...consumer, hash: hashToken(consumerKey) });
        announce(input.organizationId, "consumers");
        await events.record(input.organizationId, { type: "key.created", data: { kind: "consumer_key", id: consumer.id, name } });
      });
      return { consumerKey, consumer };
    },

    /** The organisation's consumer keys, newest first (prefix, name, creation; never the key). */
    async listConsumerKeys(organizationId: string, options: { includeRevoked?: boolean } = {}): Promise<ConsumerKeyRecord[]> {
      await requireOrganization(deps.store, organizationId);
      return deps.store.listConsumerKeys(organizationId, { includeRevoked: options.includeRevoked ?? false });
    },

    /** Revokes a consumer key; every gateway refuses it at once. Revoking a revoked key changes nothing; an unknown id is not_found. */
    async revokeConsumerKey(organizationId: string, consumerId: string): Promise<void> {
      const id = readId(consumerId, "consumer_id");
      await deps.transaction(async (store, announce, events) => {
        if (!(await store.findConsumerKey(organizationId, id)))
          throw new DomainError("not_found", "consumer_not_found", `the organisation has no consumer key ${id}`);
        if (await store.revokeConsumerKey(organizationId, id, deps.clock())) {
          announce(organizationId, "consumers");
          await events.record(organizationId, { type: "key.revoked", data: { kind: "consumer_key", id } });
        }
      });
    },

    /** Gateways seen within the last day, most recently seen first; `connected` while their stream is open. */
    async listConnectedGateways(organizationId: string): Promise<ConnectedGateway[]> {
      await requireOrganization(deps.store, organizationId);
      const now = deps.clock().getTime();
      const rows = await deps.store.listConnections(organizationId, new Date(now - listedWithinMs));
      return rows.map((row) => ({
        gatewayId: row.gatewayId,
        revision: row.revision,
        connectedAt: row.connectedAt,
        lastSeenAt: row.lastSeenAt,
        connected: row.disconnectedAt === null && now - row.lastSeenAt.getTime() < connectedWithinMs,
      }));
    },
  };
}

export type GatewayCredentials = ReturnType<typeof createGatewayCredentials>;
