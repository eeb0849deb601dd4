import { runCli } from "../support/cli.js";
import { createTestDatabase, type TestDatabase } from "../support/database.js";
import { startTestServer, type TestServer } from "../support/server.js";

/**
 * `gatehouse sessions list|revoke`: end users' sessions listed and revoked by
 * the operator command, on the data store directly, while a server runs on
 * the same store; the server is the witness (ValidateSession).
 */
let db: TestDatabase;
let env: Record<string, string>;
let server: TestServer;
let org: string;
let secretKey: string;

beforeAll(async () => {
  db = await createTestDatabase();
  env = { DATABASE_URL: db.url, GATEHOUSE_DATA_DIR: db.dataDir };
  server = await startTestServer({ db });
  org = server.credentials.organization_id;
  secretKey = server.credentials.secret_key;
}, 60_000);
afterAll(async () => {
  await server?.close();
  await db?.drop();
});

/** Runs the command with --json; answers the exit status and the parsed stdout (or stderr on failure). */
function json<T = Record<string, unknown>>(args: string[]): { status: number | null; body: T } {
  const answer = runCli([...args, "--json"], env);
  const text = answer.status === 0 ? answer.stdout : answer.stderr;
  return { status: answer.status, body: JSON.parse(text) as T };
}

async function identityRpc<T>(method: string, body: unknown, bearer = secretKey): Promise<{ status: number; body: T }> {
  const response = await server.call(`/svc.v1.IdentityService/${method}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    bearer,
  });
  return { status: response.status, body: (await response.json()) as T };
}

/** Signs `identifier` in with a magic link: a new session of its identity. */
async function signIn(identifier: string, bearer = secretKey): Promise<{ identityId: string; sessionId: string; token: string }> {
  const link = await identityRpc<{ token: string }>("GenerateMagicLink", { identifier }, bearer);
  expect(link.status).toBe(200);
  const signed = await identityRpc<{ identityId: string; session: { token: string } }>(
    "VerifyMagicLink",
    { token: link.body.token },
    bearer,
  );
  expect(signed.status).toBe(200);
  const token = signed.body.session.token;
  const claims = JSON.parse(Buffer.from(token.split(".")[1] as string, "base64url").toString()) as { sid: string };
  return { identityId: signed.body.identityId, sessionId: claims.sid, token };
}

const validates = async (token: string) => (await identityRpc("ValidateSession", { token })).status;

const unknownId = "00000000-0000-4000-8000-000000000000";

describe("gatehouse sessions revoke <session-id>", () => {
  test("the session's token stops validating at once; the identity's other session lives on; list shows which", async () => {
    const first = await signIn("cli.sessions.one@example.com");
    const second = await signIn("cli.sessions.one@example.com");
    expect(second.identityId).toBe(first.identityId);
    expect(await validates(first.token)).toBe(200);

    const listed = json<{ session_id: string; live: boolean; revoked_at: string | null; method: string }[]>([
      "sessions",
      "list",
      "--identity",
      first.identityId,
    ]);
    expect(listed.status).toBe(0);
    // (Newest first; two sign-ins of one millisecond are in id order, so only the set is asserted.)
    expect(listed.body.map((s) => s.session_id).sort()).toEqual([first.sessionId, second.sessionId].sort());
    expect(listed.body.every((s) => s.live && s.revoked_at === null && s.method === "magic_link")).toBe(true);

    // No --org: the command finds the session's organisation.
    expect(json(["sessions", "revoke", first.sessionId])).toEqual({ status: 0, body: { session_id: first.sessionId, revoked: true } });
    expect(await validates(first.token)).toBe(401);
    expect(await validates(second.token)).toBe(200);

    const after = json<{ session_id: string; live: boolean; revoked_at: string | null }[]>([
      "sessions",
      "list",
      "--org",
      org,
      "--identity",
      first.identityId,
    ]).body;
    expect(after.find((s) => s.session_id === first.sessionId)).toMatchObject({ live: false, revoked_at: expect.any(String) });
    expect(after.find((s) => s.session_id === second.sessionId)).toMatchObject({ live: true, revoked_at: null });
    const table = runCli(["sessions", "list", "--identity", first.identityId], env);
    expect(table.status).toBe(0);
    expect(table.stdout).toMatch(/^SESSION_ID +STATUS +METHOD +CREATED +EXPIRES\n/);
    expect(table.stdout).toMatch(new RegExp(`\\n${first.sessionId} +revoked +magic_link `));
    expect(table.stdout).toMatch(new RegExp(`\\n${second.sessionId} +live +magic_link `));

    // Revoked already: the command did nothing, so it fails (as keys revoke and consumers revoke do).
    expect(json(["sessions", "revoke", first.sessionId])).toMatchObject({
      status: 1,
      body: { code: "session_not_found", message: expect.stringContaining("revoked already") },
    });

    // The text form, with --org and an upper-case id.
    const text = runCli(["sessions", "revoke", "--org", org, second.sessionId.toUpperCase()], env);
    expect(text).toEqual({ status: 0, stdout: `revoked ${second.sessionId}\n`, stderr: "" });
    expect(await validates(second.token)).toBe(401);
  }, 60_000);

  test("an unknown id, a session of another organisation and an unknown organisation fail (exit 1) and revoke nothing", async () => {
    const mine = await signIn("cli.sessions.two@example.com");
    const unknown = runCli(["sessions", "revoke", unknownId], env);
    expect(unknown).toEqual({
      status: 1,
      stdout: "",
      stderr: `gatehouse: session ${unknownId} does not exist (see gatehouse sessions list)\n`,
    });
    expect(json(["sessions", "revoke", unknownId])).toEqual({
      status: 1,
      body: { code: "session_not_found", message: `session ${unknownId} does not exist (see gatehouse sessions list)` },
    });

    const other = json<{ organization_id: string }>(["orgs", "create", "--name", "Elsewhere"]).body.organization_id;
    expect(json(["sessions", "revoke", "--org", other, mine.sessionId])).toMatchObject({
      status: 1,
      body: { code: "session_not_found", message: expect.stringContaining(`in organisation ${other}`) },
    });
    expect(json(["sessions", "revoke", "--org", unknownId, mine.sessionId])).toMatchObject({
      status: 1,
      body: { code: "organization_not_found" },
    });
    expect(json(["sessions", "revoke", "--identity", unknownId])).toMatchObject({ status: 1, body: { code: "identity_not_found" } });
    expect(json(["sessions", "list", "--identity", unknownId])).toMatchObject({ status: 1, body: { code: "identity_not_found" } });
    expect(json(["sessions", "list", "--org", other, "--identity", mine.identityId])).toMatchObject({
      status: 1,
      body: { code: "identity_not_found" },
    });
    expect(await validates(mine.token)).toBe(200);
  }, 60_000);
});

describe("gatehouse sessions revoke --identity", () => {
  test("revokes every live session of the identity and answers how many; none of another identity", async () => {
    const a1 = await signIn("cli.sessions.three@example.com");
    const a2 = await signIn("cli.sessions.three@example.com");
    const other = await signIn("cli.sessions.four@example.com");
    expect(json(["sessions", "revoke", a1.sessionId])).toMatchObject({ status: 0 });

    expect(json(["sessions", "revoke", "--identity", a1.identityId])).toEqual({
      status: 0,
      body: { identity_id: a1.identityId, revoked_sessions: 1 },
    });
    expect(await validates(a2.token)).toBe(401);
    expect(await validates(other.token)).toBe(200);
    // Nothing live is left: 0, not an error.
    const again = runCli(["sessions", "revoke", "--org", org, "--identity", a1.identityId], env);
    expect(again).toEqual({ status: 0, stdout: `revoked 0 sessions of ${a1.identityId}\n`, stderr: "" });
  }, 60_000);
});

describe("usage", () => {
  test("help lists both forms with examples", () => {
    const help = runCli(["sessions", "revoke", "--help"], env);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^Usage: gatehouse sessions revoke \[options\] \[session-id\]\n/);
    expect(help.stdout).toContain("--identity <identity-id>");
    expect(help.stdout).toContain("--org <id>");
    expect(help.stdout).toContain("gatehouse sessions revoke --identity");
    const group = runCli(["sessions", "--help"], env);
    expect(group.stdout).toMatch(/\n {2}list \[options\]/);
    expect(group.stdout).toMatch(/\n {2}revoke \[options\] \[session-id\]/);
    expect(runCli(["--help"], env).stdout).toMatch(/\n {2}sessions +list and revoke end users' sessions/);
  });

  test("a malformed id, both forms at once, neither, and typos are usage errors (exit 2)", () => {
    expect(json(["sessions", "revoke", "not-a-session"])).toEqual({
      status: 2,
      body: {
        code: "invalid_value",
        message: `command-argument value 'not-a-session' is invalid for argument 'session-id'. "not-a-session" is not an id (a UUID, see gatehouse sessions list)`,
      },
    });
    expect(json(["sessions", "revoke", "--identity", "nobody"])).toMatchObject({ status: 2, body: { code: "invalid_value" } });
    expect(json(["sessions", "list", "--identity", "nobody"])).toMatchObject({ status: 2, body: { code: "invalid_value" } });
    expect(json(["sessions", "revoke", unknownId, "--identity", unknownId])).toMatchObject({
      status: 2,
      body: { code: "conflicting_options" },
    });
    expect(json(["sessions", "revoke"])).toMatchObject({ status: 2, body: { code: "missing_argument" } });
    expect(json(["sessions", "list"])).toMatchObject({ status: 2, body: { code: "missing_option" } });

    const typo = runCli(["sessions", "revoek", unknownId], env);
    expect(typo.status).toBe(2);
    expect(typo.stderr).toContain("(Did you mean revoke?)");
    const option = runCli(["sessions", "revoke", "--identiy", unknownId], env);
    expect(option.status).toBe(2);
    expect(option.stderr).toContain("(Did you mean --identity?)");
    expect(option.stderr).toContain('Run "gatehouse sessions revoke --help" for usage.');
  });
});
