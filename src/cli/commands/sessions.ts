import { InvalidArgumentError } from "commander";
import { notFound } from "../../domain/errors.js";
import { isUuid } from "../../domain/identity/identifiers.js";
import type { IdentitySessionSummaryRecord } from "../../dashboard/operators/dashboard-store.js";
import { UsageError } from "../errors.js";
import { formatTable } from "../format.js";
import { type CommandGroup, examples, helpGroups } from "../program.js";
import { type OperatorStore, requireOrganization, tenancyOf, withStore } from "../with-app.js";

/** The identity domain over the command's store (announcements reach running instances and their gateways). */
async function identityOf(store: OperatorStore) {
  return (await import("../../composition/identity.js")).identityOf(store);
}

/** A session or identity id on the command line: a UUID (any case), else a usage error (exit 2, invalid_value). */
function uuidArgument(raw: string): string {
  const value = raw.trim().toLowerCase();
  if (!isUuid(value)) throw new InvalidArgumentError(`"${raw}" is not an id (a UUID, see gatehouse sessions list)`);
  return value;
}

/**
 * What `find` finds, and in which organisation: in --org when given
 * (organization_not_found when it names none), else in the one organisation
 * whose lookup finds it. Every read stays scoped by organisation, as the
 * stores' queries are; an operator's organisations are few.
 */
async function locate<T>(
  app: OperatorStore,
  org: string | undefined,
  find: (organizationId: string) => Promise<T | null>,
): Promise<{ organizationId: string; found: T } | null> {
  if (org !== undefined) await requireOrganization(app, org);
  const candidates = org !== undefined ? [org] : (await (await tenancyOf(app)).listOrganizations()).map((o) => o.id);
  for (const organizationId of candidates) {
    const found = await find(organizationId);
    if (found !== null) return { organizationId, found };
  }
  return null;
}

const revokedAlready = (sessionId: string) =>
  notFound("session_not_found", `session ${sessionId} is revoked already (see gatehouse sessions list)`);

const where = (org: string | undefined) => (org === undefined ? "" : ` in organisation ${org}`);

/** Every session of an identity, newest first (the dashboard's listing, read page by page). */
async function listSessions(app: OperatorStore, organizationId: string, identityId: string): Promise<IdentitySessionSummaryRecord[]> {
  const { dashboardDirectoryOf } = await import("../../composition/dashboard-directory.js");
  const store = dashboardDirectoryOf(app);
  const all: IdentitySessionSummaryRecord[] = [];
  for (;;) {
    const last = all.at(-1);
    const page = await store.listIdentitySessions(organizationId, identityId, {
      after: last ? { at: last.createdAt, id: last.id } : null,
      take: 500,
    });
    all.push(...page);
    if (page.length < 500) return all;
  }
}

/**
 * `gatehouse sessions list|revoke`: end users' sessions. A revocation goes
 * through the identity domain the dashboard and IdentityService call, so it is
 * announced to gateways as theirs are, at once: through the database on
 * PostgreSQL, through the notice file beside the database on SQLite.
 */
export const registerSessions: CommandGroup = (program, cli) => {
  const sessions = program
    .command("sessions")
    .helpGroup(helpGroups.operator)
    .description("list and revoke end users' sessions (gateways refuse a revoked session's token)");

  const list = sessions
    .command("list")
    .description("list an identity's sessions, newest first (never their tokens)")
    .requiredOption("--identity <identity-id>", "the identity (end user) whose sessions to list", uuidArgument)
    .option("--org <id>", "the identity's organisation (found from the identity when left out)")
    .action(async (options: { identity: string; org?: string }) => {
      const rows = await withStore(cli.out, "reading sessions", async (app) => {
        const identities = await identityOf(app);
        const located = await locate(app, options.org, (org) => identities.findIdentity(org, options.identity));
        if (located === null) throw notFound("identity_not_found", `identity ${options.identity} does not exist${where(options.org)}`);
        const { organizationId } = located;
        const now = Date.now();
        return (await listSessions(app, organizationId, options.identity)).map((s) => ({
          session_id: s.id,
          organization_id: organizationId,
          identity_id: options.identity,
          method: s.method,
          created_at: s.createdAt.toISOString(),
          expires_at: s.expiresAt.toISOString(),
          revoked_at: s.revokedAt?.toISOString() ?? null,
          live: s.revokedAt === null && s.expiresAt.getTime() > now,
        }));
      });
      cli.out.result(rows, () =>
        formatTable(
          ["SESSION_ID", "STATUS", "METHOD", "CREATED", "EXPIRES"],
          rows.map((r) => [r.session_id, r.live ? "live" : r.revoked_at ? "revoked" : "expired", r.method, r.created_at, r.expires_at]),
        ),
      );
    });
  examples(list, [
    "gatehouse sessions list --identity 6a0f3c2e-91b4-4d7e-8c15-3e2b9f0a7d64",
    "gatehouse sessions list --identity \"$IDENTITY\" --json | jq -r '.[] | select(.live) | .session_id'",
  ]);

  const revoke = sessions
    .command("revoke")
    .description("revoke a session, or with --identity every live session of an identity: gateways refuse their tokens (401)")
    .argument("[session-id]", "the session's id (see gatehouse sessions list)", uuidArgument)
    .option("--identity <identity-id>", "revoke every live session of this identity instead of one session", uuidArgument)
    .option("--org <id>", "the session's or identity's organisation (found from the id when left out)")
    .addHelpText(
      "after",
      "\nGive a session id or --identity, not both. The revocation is announced (through the database on PostgreSQL,\n" +
        "through the notice file beside it on SQLite): running instances and their gateways refuse the tokens at once.\n" +
        'With --json: {"session_id", "revoked": true}, or for --identity\n' +
        '{"identity_id", "revoked_sessions": <count>} (0 when none was live).',
    )
    .action(async (sessionId: string | undefined, options: { identity?: string; org?: string }) => {
      const identityId = options.identity;
      if (identityId !== undefined) {
        if (sessionId !== undefined) {
          throw new UsageError("give a session id or --identity, not both", "conflicting_options");
        }
        const out = await withStore(cli.out, "revoking the sessions", async (app) => {
          const identities = await identityOf(app);
          const located = await locate(app, options.org, (org) => identities.findIdentity(org, identityId));
          if (located === null) throw notFound("identity_not_found", `identity ${identityId} does not exist${where(options.org)}`);
          // The dashboard's function: an empty session id revokes every live session, announced to gateways.
          const { revoked } = await identities.revokeIdentitySessions(located.organizationId, { identityId, sessionId: "" });
          return { identity_id: identityId, revoked_sessions: revoked };
        });
        cli.out.result(out, () => `revoked ${out.revoked_sessions} session${out.revoked_sessions === 1 ? "" : "s"} of ${identityId}\n`);
        return;
      }
      if (sessionId === undefined) {
        throw new UsageError("missing required argument 'session-id' (or give --identity <identity-id>)", "missing_argument");
      }
      await withStore(cli.out, "revoking the session", async (app) => {
        const identities = await identityOf(app);
        const located = await locate(app, options.org, (org) => identities.findSession(org, sessionId));
        if (located === null) {
          throw notFound("session_not_found", `session ${sessionId} does not exist${where(options.org)} (see gatehouse sessions list)`);
        }
        const { organizationId, found: session } = located;
        // Like `keys revoke` and `consumers revoke`, a session that is revoked already is an error: the command did nothing.
        if (session.revokedAt !== null) {
          throw revokedAlready(sessionId);
        }
        // The dashboard's function (IdentityService.RevokeSession's too, underneath): announced to gateways.
        const { revoked } = await identities.revokeIdentitySessions(organizationId, { identityId: session.identityId, sessionId });
        // Revoked by someone else since it was read: this command did nothing either.
        if (revoked === 0) throw revokedAlready(sessionId);
      });
      cli.out.result({ session_id: sessionId, revoked: true }, () => `revoked ${sessionId}\n`);
    });
  examples(revoke, [
    "gatehouse sessions revoke 0c7e5b2a-4f19-4e8d-a3b6-91d2f0c4e857",
    'gatehouse sessions revoke --org "$ORG" 0c7e5b2a-4f19-4e8d-a3b6-91d2f0c4e857 --json',
    'gatehouse sessions revoke --identity "$IDENTITY"',
  ]);
};
