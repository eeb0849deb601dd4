import { defineTopic } from "./topic.js";

// Every change-feed topic of the platform, with its payload's one encoder and decoder. Payloads are small
// (identifiers, a revision): subscribers read what changed from the database. The wire forms are fixed:
// PostgreSQL triggers write some of them (migration 0006 sends "<organization id> sessions" on "gateway").

/** "<a> <b>" split at the last space (the first part may itself hold spaces only for "*"-free ids, which it never does). */
function splitLast(payload: string): [string, string] | undefined {
  const space = payload.lastIndexOf(" ");
  return space > 0 ? [payload.slice(0, space), payload.slice(space + 1)] : undefined;
}

function splitFirst(payload: string): [string, string] | undefined {
  const space = payload.indexOf(" ");
  return space > 0 ? [payload.slice(0, space), payload.slice(space + 1)] : undefined;
}

/** An organisation id alone. */
const organizationPayload = {
  encode: (organizationId: string) => organizationId,
  decode: (payload: string) => (payload.length > 0 ? payload : undefined),
};

/** A new configuration revision of an organisation: "<organization id> <revision>". */
export const configRevisions = defineTopic<{ organizationId: string; revision: number }>("config", {
  encode: ({ organizationId, revision }) => `${organizationId} ${revision}`,
  decode(payload) {
    const parts = splitLast(payload);
    const revision = Number(parts?.[1]);
    return parts && Number.isSafeInteger(revision) ? { organizationId: parts[0], revision } : undefined;
  },
});

/** An environment's secrets changed: "<organization id> <environment>". */
export const secretChanges = defineTopic<{ organizationId: string; environment: string }>("secrets", {
  encode: ({ organizationId, environment }) => `${organizationId} ${environment}`,
  decode(payload) {
    const parts = splitFirst(payload);
    return parts ? { organizationId: parts[0], environment: parts[1] } : undefined;
  },
});

export const gatewayChangeKinds = ["sessions", "consumers", "gateway_keys", "signing_keys"] as const;
export type GatewayChangeKind = (typeof gatewayChangeKinds)[number];

/**
 * What gateways' streams follow besides revisions and secrets: "<organization id> <kind>".
 * Platform-wide changes name the organisation "*" (everyOrganization).
 */
export const gatewayChanges = defineTopic<{ organizationId: string; kind: GatewayChangeKind }>("gateway", {
  encode: ({ organizationId, kind }) => `${organizationId} ${kind}`,
  decode(payload) {
    const parts = splitLast(payload);
    if (!parts || !(gatewayChangeKinds as readonly string[]).includes(parts[1])) return undefined;
    return { organizationId: parts[0], kind: parts[1] as GatewayChangeKind };
  },
});

/** An organisation's session signing key changed (rotated here or elsewhere). */
export const sessionSigningKeyChanges = defineTopic<string>("session_signing_keys", organizationPayload);

/** An organisation's sealing key rotated, or its rotation setting changed: instances forget its cached keys. */
export const sealingKeyChanges = defineTopic<string>("sealing_keys", organizationPayload);

/** A credential, account or membership changed: every instance forgets what it cached about credentials. */
export const credentialChanges = defineTopic<"changed">("credentials", {
  encode: () => "changed",
  decode: (payload) => (payload === "changed" ? "changed" : undefined),
});

/**
 * Webhook deliveries of an organisation became due (an event was recorded, a redelivery asked): workers wake.
 * A serving process's own worker hears its commits in process; an operator command's commits reach the
 * server through the notice file (SQLite) or NOTIFY (PostgreSQL).
 */
export const webhookDeliveriesDue = defineTopic<string>("webhook_deliveries", { ...organizationPayload, localWhenFollowed: true });
