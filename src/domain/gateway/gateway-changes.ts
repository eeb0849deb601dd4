/**
 * What the change feed tells gateways' streams, besides configuration
 * revisions ("config") and secrets changes ("secrets"): on topic "gateway",
 * payload "<organization id> <kind>". Signing keys belong to the platform, not
 * to one organisation: their payload names the organisation "*".
 *
 * On PostgreSQL a trigger on IdentitySession sends "<organization id> sessions"
 * itself whenever a session is revoked (migration 0006), so revocations written
 * by any process are announced; the application announces them too, which is
 * what carries them in-process on SQLite.
 */
export const gatewayTopic = "gateway";

export const gatewayChangeKinds = ["sessions", "consumers", "gateway_keys", "signing_keys"] as const;
export type GatewayChangeKind = (typeof gatewayChangeKinds)[number];

/** The organisation of platform-wide changes (signing keys). */
export const everyOrganization = "*";

export function gatewayChangePayload(organizationId: string, kind: GatewayChangeKind): string {
  return `${organizationId} ${kind}`;
}

/** Reads a payload; undefined when it is not one (the stream then re-reads everything). */
export function parseGatewayChange(payload: string): { organizationId: string; kind: GatewayChangeKind } | undefined {
  const space = payload.lastIndexOf(" ");
  if (space <= 0) return undefined;
  const kind = payload.slice(space + 1);
  return (gatewayChangeKinds as readonly string[]).includes(kind)
    ? { organizationId: payload.slice(0, space), kind: kind as GatewayChangeKind }
    : undefined;
}
