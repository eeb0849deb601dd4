// Webhook endpoints, the events outbox, deliveries and their attempts (a port); src/storage implements it.
// Every query of an organisation's rows filters on organizationId; the worker's queries span organisations.

export type DeliveryStatus = "pending" | "delivered" | "failed";

/** An endpoint as stored: its secrets only wrapped (by the master key). */
export interface WebhookEndpointRecord {
  id: string;
  organizationId: string;
  url: string;
  description: string;
  /** Empty: every type. */
  eventTypes: string[];
  enabled: boolean;
  /** Why the platform disabled it ("gone": the receiver answered 410); null otherwise. */
  disabledReason: string | null;
  secretsEnc: Uint8Array;
  masterKeyId: string | null;
  previousSecretUntil: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export type WebhookEndpointPatch = Partial<
  Pick<
    WebhookEndpointRecord,
    "url" | "description" | "eventTypes" | "enabled" | "disabledReason" | "secretsEnc" | "masterKeyId" | "previousSecretUntil"
  >
>;

export interface EventRecord {
  id: string;
  organizationId: string;
  type: string;
  /** The JSON body every delivery sends. */
  payload: string;
  createdAt: Date;
}

/** The last attempt of a delivery, as listings show it. */
export interface AttemptRecord {
  id: string;
  deliveryId: string;
  /** The attempt's place in its delivery's schedule (1: the first try; a redelivery starts again at 1). */
  number: number;
  attemptedAt: Date;
  durationMs: number;
  /** The receiver's status; null when it never answered (refused, timed out, address not allowed). */
  statusCode: number | null;
  error: string | null;
}

export interface DeliveryRecord {
  id: string;
  organizationId: string;
  endpointId: string;
  eventId: string;
  eventType: string;
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: Date;
  createdAt: Date;
  updatedAt: Date;
  lastAttempt: AttemptRecord | null;
}

/** A due delivery a worker claimed: what its attempt needs. */
export interface ClaimedDelivery {
  id: string;
  organizationId: string;
  endpointId: string;
  eventId: string;
  /** Attempts made so far in this round (the next is attempts + 1). */
  attempts: number;
  payload: string;
  eventCreatedAt: Date;
  endpoint: Pick<WebhookEndpointRecord, "url" | "secretsEnc" | "masterKeyId" | "previousSecretUntil">;
}

/** What an attempt ended in, for one delivery. */
export interface AttemptOutcome {
  deliveryId: string;
  organizationId: string;
  endpointId: string;
  attempt: Omit<AttemptRecord, "deliveryId">;
  /** The delivery afterwards: delivered, failed, or pending until nextAttemptAt. */
  status: DeliveryStatus;
  nextAttemptAt: Date;
  /** The receiver answered 410 Gone: the endpoint is disabled. */
  disableEndpoint: boolean;
}

export interface KeysetCursor {
  createdAt: Date;
  id: string;
}

export interface WebhookStore {
  // The outbox, within the transaction of a change.
  insertEvent(event: EventRecord): Promise<void>;
  insertEvents(events: readonly EventRecord[]): Promise<void>;
  /** The organisation's enabled endpoints (their ids and the types they take). */
  enabledEndpoints(organizationId: string): Promise<{ id: string; eventTypes: string[] }[]>;
  insertDeliveries(
    deliveries: readonly { id: string; organizationId: string; endpointId: string; eventId: string; at: Date }[],
  ): Promise<void>;

  // Management.
  /** Takes the organisation's row lock for the rest of the transaction (serialises creations against the limit); false: no such organisation. */
  lockOrganization(organizationId: string): Promise<boolean>;
  countEndpoints(organizationId: string): Promise<number>;
  createEndpoint(endpoint: WebhookEndpointRecord): Promise<void>;
  findEndpoint(organizationId: string, id: string): Promise<WebhookEndpointRecord | null>;
  /** Oldest first. */
  listEndpoints(organizationId: string): Promise<WebhookEndpointRecord[]>;
  /** False when there is no such endpoint. */
  updateEndpoint(organizationId: string, id: string, patch: WebhookEndpointPatch, at: Date): Promise<boolean>;
  /** Deletes the endpoint with its deliveries and attempts; false when there is none. */
  deleteEndpoint(organizationId: string, id: string): Promise<boolean>;
  /** Newest first, after the cursor. */
  listDeliveries(organizationId: string, endpointId: string, limit: number, after?: KeysetCursor): Promise<DeliveryRecord[]>;
  findDelivery(organizationId: string, id: string): Promise<DeliveryRecord | null>;
  /** Oldest first. */
  listAttempts(organizationId: string, deliveryId: string): Promise<AttemptRecord[]>;
  /** Makes a delivery due again now, as a new round of the schedule; false when there is none. */
  requeueDelivery(organizationId: string, id: string, at: Date): Promise<boolean>;

  // The delivery workers (any organisation).
  /**
   * Claims up to `limit` due deliveries of enabled endpoints (not of the
   * endpoints in `skipEndpoints`) whose lease is free or ran out, leasing them
   * to `owner` until `leaseUntil`: each claimed by one worker (PostgreSQL: FOR
   * UPDATE SKIP LOCKED; SQLite: one writer at a time).
   */
  claimDue(owner: string, now: Date, leaseUntil: Date, limit: number, skipEndpoints: readonly string[]): Promise<ClaimedDelivery[]>;
  /** Extends the leases `owner` holds on these deliveries. */
  renewLeases(owner: string, ids: readonly string[], leaseUntil: Date): Promise<void>;
  /**
   * Records attempts and what they did to their deliveries (and endpoints), in
   * one transaction; a delivery whose lease another worker took meanwhile keeps
   * that worker's state (its attempt is still recorded).
   */
  completeAttempts(owner: string, outcomes: readonly AttemptOutcome[], at: Date): Promise<void>;
  /** When the next pending delivery of an enabled endpoint becomes claimable (its time, or its lease's end); null: none. */
  nextClaimableAt(): Promise<Date | null>;
  /** Deletes attempts older than `attemptsBefore`, and every event older than `eventsBefore` with no pending delivery. */
  prune(attemptsBefore: Date, eventsBefore: Date): Promise<void>;
}
