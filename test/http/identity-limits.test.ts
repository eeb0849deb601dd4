import {
  enablePasswords,
  goodPassword,
  newIdentifier,
  postRest,
  reasonOf,
  setIdentitySettings,
  type JsonAnswer,
} from "../support/identity-client.js";
import { createManualClock, startTestServer, type TestServer } from "../support/server.js";

/**
 * Brute-force protection with its state in the database (so it holds across
 * instances): lockout per identifier, a per-IP limit on client-side identity
 * requests.
 */
const manual = createManualClock();
const minute = 60_000;
let first: TestServer;
let second: TestServer;
let pk: string;

beforeAll(async () => {
  first = await startTestServer({ clock: manual.clock });
  second = await startTestServer({ clock: manual.clock, db: first.db });
  pk = first.credentials.publishable_key;
  await enablePasswords(first);
});
afterAll(async () => {
  await second.close();
  await first.close();
});

const login = (identifier: string, password: string, server = first) =>
  postRest(server, "/identity/login/password", { identifier, password }, pk);

async function registered(): Promise<string> {
  const identifier = newIdentifier("lock");
  expect((await postRest(first, "/identity/register/password", { identifier, password: goodPassword }, pk)).status).toBe(200);
  return identifier;
}

function expectLocked(answer: JsonAnswer, retryAfter?: number) {
  expect({ status: answer.status, code: (answer.body as { code?: string }).code, reason: reasonOf(answer) }).toEqual({
    status: 429,
    code: "resource_exhausted",
    reason: "login_locked",
  });
  const header = Number(answer.headers.get("retry-after"));
  expect(header).toBeGreaterThanOrEqual(1);
  if (retryAfter !== undefined) expect(header).toBe(retryAfter);
}

describe("lockout after failed password logins", () => {
  test("the sixth attempt within 15 minutes is 429 with Retry-After, even with the right password, until the window passes", async () => {
    const identifier = await registered();
    for (let i = 0; i < 5; i++) {
      expect((await login(identifier, `wrong password ${i}`)).status).toBe(401);
      manual.advance(10_000);
    }
    // The first failure was 50 s ago: the lock lifts 15 min after it.
    expectLocked(await login(identifier, "wrong password 6"), 15 * 60 - 50);
    expectLocked(await login(identifier, goodPassword), 15 * 60 - 50);
    manual.advance(15 * minute - 50_000 - 1000);
    expectLocked(await login(identifier, goodPassword), 1);
    manual.advance(1000);
    expect((await login(identifier, goodPassword)).status).toBe(200);
  });

  test("failures on two instances add up", async () => {
    const identifier = await registered();
    for (let i = 0; i < 5; i++) expect((await login(identifier, "wrong password", i % 2 === 0 ? first : second)).status).toBe(401);
    expectLocked(await login(identifier, goodPassword, second));
    expectLocked(await login(identifier, goodPassword, first));
    manual.advance(15 * minute);
  });

  test("parallel guesses are counted too: of 20 at once at most 5 are checked per instance", async () => {
    const single = await registered();
    const one = await Promise.all(Array.from({ length: 20 }, (_, i) => login(single, `guess ${i}`)));
    expect(one.filter((a) => a.status === 401).length).toBeLessThanOrEqual(5);
    expect(one.filter((a) => a.status === 429).length).toBeGreaterThanOrEqual(15);

    const spread = await registered();
    const two = await Promise.all(Array.from({ length: 20 }, (_, i) => login(spread, `guess ${i}`, i % 2 === 0 ? first : second)));
    expect(two.filter((a) => a.status === 401).length).toBeLessThanOrEqual(10);
    // Whatever got through is recorded: the identifier is locked on every instance now.
    expectLocked(await login(spread, goodPassword, first));
    expectLocked(await login(spread, goodPassword, second));
    manual.advance(15 * minute);
  });

  test("refused attempts during the lockout do not extend it", async () => {
    const identifier = await registered();
    for (let i = 0; i < 5; i++) await login(identifier, "wrong password");
    for (let i = 0; i < 10; i++) {
      manual.advance(minute);
      expectLocked(await login(identifier, "wrong password"));
    }
    manual.advance(5 * minute);
    expect((await login(identifier, goodPassword)).status).toBe(200);
  });

  test("unknown identifiers are locked the same way (no hint that they do not exist)", async () => {
    const identifier = newIdentifier("ghost");
    for (let i = 0; i < 5; i++) expect((await login(identifier, "wrong password")).status).toBe(401);
    expectLocked(await login(identifier, "wrong password"));
    manual.advance(15 * minute);
  });

  test("threshold and window follow the settings", async () => {
    await enablePasswords(first, undefined, { lockoutThreshold: 2, lockoutWindowSeconds: 60 });
    const identifier = await registered();
    for (let i = 0; i < 2; i++) expect((await login(identifier, "wrong password")).status).toBe(401);
    expectLocked(await login(identifier, goodPassword), 60);
    manual.advance(minute);
    expect((await login(identifier, goodPassword)).status).toBe(200);
    await enablePasswords(first, undefined, { lockoutThreshold: 5, lockoutWindowSeconds: 900 });
  });

  test("what was typed as an identifier is not stored in clear", async () => {
    const typed = `typo-${Math.random().toString(36).slice(2)}`;
    expect((await login(typed, "wrong password")).status).toBe(401);
    const stored = JSON.stringify(await first.app.database.client.loginFailure.findMany());
    expect(stored).not.toContain(typed);
  });
});

describe("per-IP limit on client-side identity requests", () => {
  afterAll(() => setIdentitySettings(first, { ipLimitPerMinute: 100_000 }));

  test("past the limit per minute: 429 with Retry-After until the minute ends, on every instance", async () => {
    manual.set(new Date((Math.floor(manual.clock().getTime() / minute) + 1) * minute + 15_000));
    await setIdentitySettings(first, { ipLimitPerMinute: 4 });
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await login(newIdentifier(), "wrong password", i % 2 === 0 ? first : second)).status);
    expect(statuses).toEqual([401, 401, 401, 401]);
    const refused = await postRest(second, "/identity/register/password", { identifier: newIdentifier(), password: goodPassword }, pk);
    expect(refused.status).toBe(429);
    expect(reasonOf(refused)).toBe("ip_rate_limited");
    expect(refused.headers.get("retry-after")).toBe("45");
    // A client cannot pretend to be another address.
    const spoofed = await first.call("/identity/login/password", {
      method: "POST",
      headers: { "content-type": "application/json", "x-gatehouse-peer": "203.0.113.9" },
      body: JSON.stringify({ identifier: "a@example.com", password: "wrong password" }),
      bearer: pk,
    });
    expect(spoofed.status).toBe(429);
    manual.advance(45_000);
    expect((await login(newIdentifier(), "wrong password")).status).toBe(401);
  });

  test("backend (secret-key) calls come from the organisation's server and are not limited per IP", async () => {
    await setIdentitySettings(first, { ipLimitPerMinute: 1 });
    for (let i = 0; i < 3; i++) {
      const answer = await postRest(
        first,
        "/svc.v1.IdentityService/GenerateMagicLink",
        { identifier: newIdentifier() },
        first.credentials.secret_key,
      );
      expect(answer.status).toBe(200);
    }
  });
});
