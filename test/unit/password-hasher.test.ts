import { existsSync, readdirSync, readFileSync } from "node:fs";
import { availableParallelism, getPriority } from "node:os";
import { createPasswordHasher, owaspArgon2id } from "../../src/domain/identity/password-hasher.js";

/**
 * Password hashing runs argon2id on threads of its own, never on the event
 * loop, at a lower CPU priority than the event loop (Linux), with the same
 * verdicts as ever.
 */

const light = { memoryCost: 1024, timeCost: 1, parallelism: 1 };
const password = "correct horse battery staple";

/** The nice value of each thread of this process (Linux /proc). */
function threadNiceness(): Map<number, number> {
  const niceness = new Map<number, number>();
  for (const tid of readdirSync("/proc/self/task")) {
    try {
      // Fields after the command's closing parenthesis start at the third; nice is the 19th.
      const fields = readFileSync(`/proc/self/task/${tid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
      niceness.set(Number(tid), Number(fields[16]));
    } catch {
      // The thread ended meanwhile.
    }
  }
  return niceness;
}

describe("verdicts", () => {
  const hasher = createPasswordHasher({ parameters: light });

  test("the password verifies; another password, no stored hash and a value that is not a hash do not", async () => {
    const stored = await hasher.hash(password);
    expect(stored.startsWith("$argon2id$v=19$m=1024,t=1,p=1$")).toBe(true);
    expect(await hasher.verify(stored, password)).toEqual({ ok: true, needsRehash: false });
    expect(await hasher.verify(stored, "another password")).toEqual({ ok: false, needsRehash: false });
    expect(await hasher.verify(null, password)).toEqual({ ok: false, needsRehash: false });
    expect(await hasher.verify("not a hash", password)).toEqual({ ok: false, needsRehash: false });
  });

  test("a hash made with other parameters verifies and asks to be replaced", async () => {
    const older = await createPasswordHasher({ parameters: { ...light, timeCost: 2 } }).hash(password);
    expect(await hasher.verify(older, password)).toEqual({ ok: true, needsRehash: true });
  });

  test("passwords are compared after NFKC normalisation", async () => {
    const stored = await hasher.hash("ﬁrst password");
    expect((await hasher.verify(stored, "first password")).ok).toBe(true);
  });
});

describe("off the event loop", () => {
  const hasher = createPasswordHasher({ parameters: owaspArgon2id });

  test("the event loop keeps turning while passwords are hashed", async () => {
    const events: string[] = [];
    const hashes = Promise.all([hasher.hash(password), hasher.hash(password)]).then(() => events.push("hashed"));
    await new Promise((resolve) => setTimeout(resolve, 0)).then(() => events.push("timer"));
    await hashes;
    expect(events).toEqual(["timer", "hashed"]);
  });

  const linux = existsSync("/proc/thread-self") ? test : test.skip;
  linux("the hashing threads run at a lower priority than the event loop", async () => {
    await Promise.all(Array.from({ length: availableParallelism() }, () => hasher.hash(password)));
    const niceness = threadNiceness();
    const own = getPriority();
    expect(niceness.get(process.pid)).toBe(own);
    // Threads left by other test files of this process may be there too: at least ours are.
    expect([...niceness.values()].filter((nice) => nice === Math.min(19, own + 10)).length).toBeGreaterThanOrEqual(1);
  });
});

describe("fair and bounded", () => {
  const hasher = createPasswordHasher({ parameters: light, admission: { hashingQueueLimit: 1000, hashingQueuePerClient: 1000 } });

  test("another client's check is served before a burst that was queued first", async () => {
    // Two clients at once start two threads (a thread takes tens of ms to start; light hashes take one).
    await Promise.all([
      hasher.hash(password, { organization: "w", client: "192.0.2.3" }),
      hasher.hash(password, { organization: "w", client: "192.0.2.4" }),
    ]);
    // In arrival order the other client's check would finish last (41st); served fairly, it starts at once and
    // finishes among the first few. Finishing order also depends on the OS scheduling two low-priority threads
    // on a busy machine (one may wait tens of ms while the other finishes a dozen light hashes), so the median
    // of three bursts is what is checked.
    const places: number[] = [];
    for (let round = 0; round < 3; round++) {
      const finished: string[] = [];
      const burst = Array.from({ length: 40 }, (_, i) =>
        hasher.hash(password, { organization: "a", client: "192.0.2.1" }).then(() => finished.push(`burst-${i}`)),
      );
      const other = hasher.hash(password, { organization: "b", client: "192.0.2.2" }).then(() => finished.push("other"));
      await Promise.all([...burst, other]);
      places.push(finished.indexOf("other"));
    }
    places.sort((a, b) => a - b);
    expect(places[1]).toBeLessThan(20);
  });

  test("past the queue's bounds a check is refused with resource_exhausted hashing_busy and Retry-After", async () => {
    const small = createPasswordHasher({ parameters: owaspArgon2id, admission: { hashingQueueLimit: 2, hashingQueuePerClient: 1 } });
    const outcomes = await Promise.all(
      Array.from({ length: 12 }, () =>
        small.hash(password, { organization: "a", client: "192.0.2.9" }).then(
          () => "hashed",
          (error: { reason?: string; retryAfterSeconds?: number }) =>
            `${error.reason} ${error.retryAfterSeconds !== undefined && error.retryAfterSeconds >= 1}`,
        ),
      ),
    );
    expect(outcomes).toContain("hashed");
    expect(outcomes).toContain("hashing_busy true");
  });
});
