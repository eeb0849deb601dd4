/**
 * The events of docs/events.md (v1): each type and its `data`. Field names are
 * snake_case, as on the REST paths; every `data` names its organisation. The
 * proto messages of proto/svc/v1/events.proto describe the same shapes (the
 * catalogue of docs/events.md is generated from them, and a test checks that
 * what is delivered parses as them).
 *
 * No event ever carries a secret value, a key, a token or a password: what
 * changed is named by ids, names and versions only.
 */
export interface EventDataByType {
  "identity.created": { identity_id: string; identifier: string; method: "password" | "passkey" | "magic_link" };
  "identity.deleted": { identity_id: string };
  "session.created": { identity_id: string; session_id: string; method: "password" | "passkey" | "magic_link"; expires_at: string };
  "session.revoked": { identity_id: string; session_id: string; reason: SessionRevocationReason };
  "passkey.added": { identity_id: string; credential_id: string; name: string };
  "passkey.removed": { identity_id: string; credential_id: string };
  "password.changed": { identity_id: string; method: "reset" | "reset_token" };
  "config.applied": { revision: number; source: string; created: string[]; updated: string[]; deleted: string[]; actor: string };
  "secret.created": { name: string; environment: string; version: number; actor: string };
  "secret.updated": { name: string; environment: string; version: number; actor: string };
  "secret.deleted": { name: string; environment: string; version: number; actor: string };
  "key.created": { kind: KeyKind; id: string; name: string };
  "key.revoked": { kind: KeyKind; id: string };
  "member.invited": { invitation_id: string; email: string; role: "admin" | "member"; invited_by: string };
  "member.joined": { account_id: string; email: string; role: "admin" | "member" };
  "member.removed": { account_id: string; email: string };
  "signing_key.rotated": { kid: string; retired_kids: string[] };
  "secret.sealing_key_rotated": { key_id: string; previous_key_id: string };
  "webhook.test": { endpoint_id: string };
}

/** What kind of credential a key.created or key.revoked event names. */
export type KeyKind = "api_key" | "publishable_key" | "secret_key" | "gateway_key" | "consumer_key";

/** Why a session ended before its expiry. */
export type SessionRevocationReason = "revoked" | "password_changed" | "identity_deleted";

export type EventType = keyof EventDataByType;

/** Every event type of v1, in the order docs/events.md lists them. */
export const eventTypes: readonly EventType[] = [
  "identity.created",
  "identity.deleted",
  "session.created",
  "session.revoked",
  "passkey.added",
  "passkey.removed",
  "password.changed",
  "config.applied",
  "secret.created",
  "secret.updated",
  "secret.deleted",
  "key.created",
  "key.revoked",
  "member.invited",
  "member.joined",
  "member.removed",
  "signing_key.rotated",
  "secret.sealing_key_rotated",
  "webhook.test",
];

export function isEventType(value: string): value is EventType {
  return (eventTypes as readonly string[]).includes(value);
}

/** One event, as a domain change records it. */
export type PlatformEvent = { [T in EventType]: { type: T; data: EventDataByType[T] } }[EventType];

/** An event of one type (a helper for call sites that build one). */
export function event<T extends EventType>(type: T, data: EventDataByType[T]): PlatformEvent {
  return { type, data } as PlatformEvent;
}

/**
 * The body every delivery of an event carries (Standard Webhooks 1.0,
 * standardwebhooks.com: `{"type", "timestamp", "data"}`), `data` with its organisation first.
 */
export function eventBody(organizationId: string, recorded: PlatformEvent, at: Date): string {
  return JSON.stringify({ type: recorded.type, timestamp: at.toISOString(), data: { organization_id: organizationId, ...recorded.data } });
}
