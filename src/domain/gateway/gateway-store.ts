import type { CanonicalResource } from "../config/config-document.js";
// Gateway keys, consumer keys and connections (a port); src/storage implements it.
/** A gateway key (gw_) as listings show it: never the key, never its hash. */
export interface GatewayKeyRecord {
  id: string;
  organizationId: string;
  name: string;
  prefix: string;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

/** A gateway key as authentication sees it. */
export interface GatewayKeyPrincipalRecord extends GatewayKeyRecord {
  hash: string;
}

/** A consumer key (ck_) as listings show it. */
export interface ConsumerKeyRecord {
  id: string;
  organizationId: string;
  name: string;
  prefix: string;
  createdAt: Date;
  revokedAt: Date | null;
}

/** A live consumer key as gateways receive it: the hash, never the key. */
export interface LiveConsumerRecord {
  id: string;
  name: string;
  hash: string;
}

/** A gateway following an organisation, as it identified itself. */
export interface GatewayConnectionRecord {
  organizationId: string;
  gatewayId: string;
  gatewayKeyId: string;
  revision: number;
  connectedAt: Date;
  lastSeenAt: Date;
  disconnectedAt: Date | null;
}

/** Gateway keys, consumer keys, connected gateways, and what gateways read of sessions and secrets. Scoped by organisation. */
export interface GatewayStore {
  organizationExists(organizationId: string): Promise<boolean>;
  createGatewayKey(key: GatewayKeyPrincipalRecord): Promise<void>;
  findGatewayKeyByHash(hash: string): Promise<GatewayKeyPrincipalRecord | null>;
  findGatewayKey(organizationId: string, id: string): Promise<GatewayKeyRecord | null>;
  /** Newest first. */
  listGatewayKeys(organizationId: string, options: { includeRevoked: boolean }): Promise<GatewayKeyRecord[]>;
  /** False when there is no such live key. */
  revokeGatewayKey(organizationId: string, id: string, at: Date): Promise<boolean>;
  touchGatewayKey(id: string, at: Date): Promise<void>;

  createConsumerKey(key: ConsumerKeyRecord & { hash: string }): Promise<void>;
  /** Newest first. */
  listConsumerKeys(organizationId: string, options: { includeRevoked: boolean }): Promise<ConsumerKeyRecord[]>;
  liveConsumers(organizationId: string): Promise<LiveConsumerRecord[]>;
  findConsumerKey(organizationId: string, id: string): Promise<ConsumerKeyRecord | null>;
  /** False when there is no such live key. */
  revokeConsumerKey(organizationId: string, id: string, at: Date): Promise<boolean>;

  /** The plugins and domains of the organisation's current configuration: where secret references live. */
  listSecretHolders(organizationId: string): Promise<CanonicalResource[]>;
  /** Sessions revoked before their expiry that have not expired yet. */
  liveRevocations(organizationId: string, now: Date): Promise<{ id: string; expiresAt: Date }[]>;
  /** Current versions of the named secrets that exist, keyed `<environment>/<name>`. */
  secretVersions(organizationId: string, secrets: readonly { environment: string; name: string }[]): Promise<Map<string, number>>;

  /** Records a gateway that (re)connected, or refreshes it (last seen, revision sent). */
  saveConnection(connection: Omit<GatewayConnectionRecord, "disconnectedAt">): Promise<void>;
  touchConnection(organizationId: string, gatewayId: string, update: { revision: number; lastSeenAt: Date }): Promise<void>;
  /** Marks the connection that began at `connectedAt` ended (not a newer one of the same gateway id). */
  endConnection(organizationId: string, gatewayId: string, connectedAt: Date, at: Date): Promise<void>;
  /** Gateways seen since `since`, most recently seen first. */
  listConnections(organizationId: string, since: Date): Promise<GatewayConnectionRecord[]>;
  /** Forgets gateways not seen since `before`; returns how many. */
  pruneConnections(before: Date): Promise<number>;
}
