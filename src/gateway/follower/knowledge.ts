import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { WatchGatewayResponse } from "../../../gen/svc/v1/gateway_pb.js";
import type { ConfigDocument } from "../../domain/config/config-document.js";
import type { Consumer, GatewayState, JsonWebKeyLike } from "../gateway-state.js";

/** A secret the configuration references, with the version the control plane announced (0: absent). */
export interface ReferencedVersion {
  environment: string;
  name: string;
  version: number;
}

/** What a gateway knows of its organisation, from the stream (or the cache file); secret values are kept apart. */
export interface Knowledge {
  organizationId: string;
  issuer: string;
  audience: string;
  revision: number;
  yaml: string;
  document: ConfigDocument;
  jwks: JsonWebKeyLike[];
  /** Session id -> expiry (epoch ms). */
  revoked: Map<string, number>;
  /** Consumer id -> consumer with the hex SHA-256 of its key. */
  consumers: Map<string, { name: string; hash: string }>;
  /** `<environment>/<name>` -> the version the control plane announced (0: absent). */
  secrets: Map<string, ReferencedVersion>;
}

/** Values of referenced secrets by `<environment>/<name>`; null: the control plane sent none for that version. */
export type SecretValues = ReadonlyMap<string, { version: number; value: string | null }>;

type SnapshotEvent = Extract<WatchGatewayResponse["event"], { case: "snapshot" }>["value"];

/**
 * The knowledge a snapshot carries. `document` is the validated document of
 * its YAML (undefined when it does not validate here: the previous document
 * is kept, with everything else from the snapshot).
 */
export function knowledgeOfSnapshot(
  s: SnapshotEvent,
  yaml: string,
  document: ConfigDocument | undefined,
  previous: Knowledge | undefined,
): Knowledge | undefined {
  const fresh = {
    jwks: s.signingKeys.map(toJwk),
    revoked: revocations(s.revokedSessions),
    consumers: consumersOf(s.consumers),
  };
  if (!document) return previous === undefined ? undefined : { ...previous, ...fresh };
  return {
    organizationId: s.organizationId,
    issuer: s.issuer,
    audience: s.audience,
    revision: s.revision,
    yaml,
    document,
    ...fresh,
    secrets: referencedVersions(s.secrets),
  };
}

/**
 * Applies an event of the stream other than a snapshot or a configuration
 * change to what is known; answers whether it changed anything and, for a
 * secret update, which secret to retrieve again.
 */
export function applyEvent(k: Knowledge, event: WatchGatewayResponse["event"]): { changed: boolean; secret?: string } {
  switch (event.case) {
    case "signingKeys":
      k.jwks = event.value.keys.map(toJwk);
      return { changed: true };
    case "sessionsRevoked":
      for (const session of event.value.sessions) {
        k.revoked.set(session.sessionId, session.expiresAt ? timestampDate(session.expiresAt).getTime() : Number.MAX_SAFE_INTEGER);
      }
      return { changed: true };
    case "consumerCreated":
      k.consumers.set(event.value.consumerId, { name: event.value.name, hash: event.value.keySha256 });
      return { changed: true };
    case "consumerRevoked":
      k.consumers.delete(event.value.consumerId);
      return { changed: true };
    case "secretChanged": {
      const key = `${event.value.environment}/${event.value.name}`;
      if (!k.secrets.has(key)) return { changed: false };
      k.secrets.set(key, { environment: event.value.environment, name: event.value.name, version: event.value.version });
      return { changed: true, secret: key };
    }
    default:
      // Heartbeats (and events of a newer control plane) change nothing.
      return { changed: false };
  }
}

/** The immutable state the data plane compiles: what is known, with the secret values held. */
export function stateOf(k: Knowledge, values: SecretValues, now: number): { state: GatewayState; unresolved: string[] } {
  for (const [sid, expiresAt] of k.revoked) if (expiresAt <= now) k.revoked.delete(sid);
  const consumers = new Map<string, Consumer>();
  for (const [id, c] of k.consumers) consumers.set(c.hash, Object.freeze({ id, name: c.name }));
  const secrets = new Map<string, string>();
  const unresolved: string[] = [];
  for (const [key, ref] of k.secrets) {
    const held = values.get(key);
    if (ref.version > 0 && held && held.value !== null) secrets.set(key, held.value);
    else unresolved.push(key);
  }
  const state: GatewayState = Object.freeze({
    organizationId: k.organizationId,
    issuer: k.issuer,
    audience: k.audience,
    revision: k.revision,
    document: k.document,
    jwks: Object.freeze({ keys: Object.freeze(k.jwks.map((key) => Object.freeze({ ...key }))) }),
    revokedSessions: new Map(k.revoked),
    consumers,
    secrets,
  });
  return { state, unresolved: unresolved.sort() };
}

export function referencedVersions(
  secrets: readonly { environment: string; name: string; version: number }[],
): Map<string, ReferencedVersion> {
  return new Map(secrets.map((s) => [`${s.environment}/${s.name}`, { environment: s.environment, name: s.name, version: s.version }]));
}

function revocations(sessions: readonly { sessionId: string; expiresAt?: Parameters<typeof timestampDate>[0] | undefined }[]) {
  return new Map(sessions.map((s) => [s.sessionId, s.expiresAt ? timestampDate(s.expiresAt).getTime() : Number.MAX_SAFE_INTEGER] as const));
}

function consumersOf(consumers: readonly { consumerId: string; name: string; keySha256: string }[]) {
  return new Map(consumers.map((c) => [c.consumerId, { name: c.name, hash: c.keySha256 }] as const));
}

function toJwk(key: { kty: string; kid: string; alg: string; crv: string; x: string; y: string; use: string }): JsonWebKeyLike {
  return { kty: key.kty, kid: key.kid, alg: key.alg, crv: key.crv, x: key.x, y: key.y, use: key.use };
}
