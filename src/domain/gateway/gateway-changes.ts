// What the change feed tells gateways' streams besides revisions and secrets: the "gateway" topic of
// src/domain/changes/topics.ts. On PostgreSQL a trigger on IdentitySession sends "<organization id> sessions"
// itself whenever a session is revoked (migration 0006), so revocations written by any process are announced;
// the application announces them too, which is what carries them in-process on SQLite.
export { gatewayChangeKinds, type GatewayChangeKind } from "../changes/topics.js";

/** The organisation of platform-wide changes (signing keys). */
export const everyOrganization = "*";
