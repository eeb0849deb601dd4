import type { PlatformEvent } from "./catalogue.js";

/**
 * Where a change records its event: bound to the change's transaction (the
 * transactional outbox, docs/events.md "Guarantees"), so the event exists if,
 * and only if, the change commits. Recording also schedules a delivery to each
 * enabled endpoint of the organisation that takes the type, and wakes the
 * delivery workers of every instance once the transaction commits.
 */
export interface EventLog {
  record(organizationId: string, event: PlatformEvent): Promise<void>;
}

/** An event log for code paths that record nothing (reads, tests of other rules). */
export const noEvents: EventLog = { record: async () => {} };
