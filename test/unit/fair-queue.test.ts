import { FairQueue } from "../../src/domain/identity/fair-queue.js";
import { backoffSeconds, identifierFailureLimit, lockoutRefusal } from "../../src/domain/identity/lockout.js";
import { createSignInGate } from "../../src/domain/identity/sign-in-limits.js";

/** The fair, bounded queue in front of the hashing threads, the lockout rule, and the per-address gate. */

const roomy = { total: 1000, perClient: 1000 };

function drain<T>(queue: FairQueue<T>): T[] {
  const items: T[] = [];
  for (let item = queue.take(); item !== undefined; item = queue.take()) items.push(item);
  return items;
}

describe("the fair queue", () => {
  test("serves organisations in turn, and the clients of an organisation in turn, each client in order", () => {
    const queue = new FairQueue<string>();
    for (let i = 1; i <= 3; i++) queue.offer(`a1-${i}`, { organization: "a", client: "1" }, roomy);
    for (let i = 1; i <= 2; i++) queue.offer(`a2-${i}`, { organization: "a", client: "2" }, roomy);
    queue.offer("b1-1", { organization: "b", client: "1" }, roomy);
    expect(drain(queue)).toEqual(["a1-1", "b1-1", "a2-1", "a1-2", "a2-2", "a1-3"]);
    expect(queue.size).toBe(0);
  });

  test("a newcomer is served before the second item of a flood that was there first", () => {
    const queue = new FairQueue<string>();
    for (let i = 1; i <= 50; i++) queue.offer(`flood-${i}`, { organization: "a", client: "attacker" }, roomy);
    expect(queue.take()).toBe("flood-1");
    queue.offer("legit", { organization: "b", client: "user" }, roomy);
    expect(queue.take()).toBe("flood-2");
    expect(queue.take()).toBe("legit");
  });

  test("a client holds at most perClient items", () => {
    const queue = new FairQueue<number>();
    const limits = { total: 100, perClient: 2 };
    const admitted = [1, 2, 3].map((i) => queue.offer(i, { organization: "a", client: "1" }, limits).admitted);
    expect(admitted).toEqual([true, true, false]);
    expect(queue.offer(4, { organization: "a", client: "2" }, limits).admitted).toBe(true);
  });

  test("when full, the heaviest organisation gives up its newest item to a lighter one; equals do not displace each other", () => {
    const queue = new FairQueue<string>();
    const limits = { total: 4, perClient: 4 };
    for (let i = 1; i <= 4; i++) queue.offer(`a-${i}`, { organization: "a", client: `c${i}` }, limits);
    expect(queue.offer("b-1", { organization: "b", client: "x" }, limits)).toEqual({ admitted: true, evicted: "a-4" });
    expect(queue.offer("b-2", { organization: "b", client: "y" }, limits)).toEqual({ admitted: true, evicted: "a-3" });
    // a holds 2, b holds 2: no one is clearly heavier than b.
    expect(queue.offer("b-3", { organization: "b", client: "z" }, limits)).toEqual({ admitted: false });
    // c holds nothing: the newest item of the heaviest (of equals, the one that grew last) makes room.
    expect(queue.offer("c-1", { organization: "c", client: "x" }, limits)).toEqual({ admitted: true, evicted: "b-2" });
    expect(queue.offer("c-2", { organization: "c", client: "x" }, limits)).toEqual({ admitted: false });
    expect(drain(queue).sort()).toEqual(["a-1", "a-2", "b-1", "c-1"]);
  });

  test("within the heaviest organisation, its heaviest client gives way to a lighter client", () => {
    const queue = new FairQueue<string>();
    const limits = { total: 3, perClient: 3 };
    for (let i = 1; i <= 3; i++) queue.offer(`flood-${i}`, { organization: "a", client: "attacker" }, limits);
    expect(queue.offer("neighbour", { organization: "a", client: "neighbour" }, limits)).toEqual({ admitted: true, evicted: "flood-3" });
    expect(queue.offer("flood-4", { organization: "a", client: "attacker" }, limits)).toEqual({ admitted: false });
  });

  test("take passes over senders it is told to skip, and they keep their turn", () => {
    const queue = new FairQueue<string>();
    queue.offer("a1", { organization: "a", client: "busy" }, roomy);
    queue.offer("b1", { organization: "b", client: "free" }, roomy);
    queue.offer("a2", { organization: "a", client: "busy" }, roomy);
    expect(queue.take((key) => key.client !== "busy")).toBe("b1");
    expect(queue.take((key) => key.client !== "busy")).toBeUndefined();
    expect(queue.take()).toBe("a1");
  });

  test("the round survives lines that empty and come back", () => {
    const queue = new FairQueue<string>();
    queue.offer("a1", { organization: "a", client: "1" }, roomy);
    queue.offer("b1", { organization: "b", client: "1" }, roomy);
    expect(queue.take()).toBe("a1");
    queue.offer("a2", { organization: "a", client: "1" }, roomy);
    queue.offer("c1", { organization: "c", client: "1" }, roomy);
    expect(drain(queue)).toEqual(["b1", "a2", "c1"]);
  });
});

describe("the lockout rule", () => {
  const policy = { threshold: 5, windowSeconds: 900 };
  const now = new Date("2026-11-22T10:00:00Z");
  const ago = (seconds: number) => new Date(now.getTime() - seconds * 1000);

  test("delays double from 1 s at the threshold up to 300 s, and the failures fetched cover the cap", () => {
    expect([4, 5, 6, 7, 13, 14, 20].map((n) => backoffSeconds(n, 5))).toEqual([0, 1, 2, 4, 256, 300, 300]);
    expect(backoffSeconds(identifierFailureLimit(5), 5)).toBe(300);
  });

  test("the pair lock wins over the delay, and lifts when the threshold-th newest failure leaves the window", () => {
    const failures = [ago(10), ago(20), ago(30), ago(40), ago(890)];
    expect(lockoutRefusal(policy, { pair: failures, identifier: failures }, now, "identifier")).toMatchObject({
      reason: "login_locked",
      retryAfterSeconds: 10,
    });
    expect(lockoutRefusal(policy, { pair: failures.slice(0, 4), identifier: failures }, now, "identifier")).toBeNull();
    expect(lockoutRefusal(policy, { pair: [], identifier: [ago(0.5), ...failures.slice(1)] }, now, "identifier")).toMatchObject({
      reason: "login_throttled",
      retryAfterSeconds: 1,
    });
  });
});

describe("the per-address gate", () => {
  test("runs concurrencyPerClient at once per address, queues four times as many, refuses the rest; other addresses are free", async () => {
    const gate = createSignInGate({ concurrencyPerClient: 2 });
    const release: (() => void)[] = [];
    let running = 0;
    let most = 0;
    const work = () =>
      new Promise<void>((resolve) => {
        running++;
        most = Math.max(most, running);
        release.push(() => {
          running--;
          resolve();
        });
      });
    const outcomes = Array.from({ length: 12 }, () =>
      gate.run("a", work).then(
        () => "ok",
        (error: { reason?: string }) => error.reason,
      ),
    );
    expect(await Promise.race([outcomes[11], new Promise((r) => setTimeout(() => r("pending"), 20))])).toBe("too_many_concurrent_sign_ins");
    expect(await gate.run("b", async () => "other address")).toBe("other address");
    while (release.length > 0 || running > 0) {
      release.shift()?.();
      await new Promise((r) => setImmediate(r));
    }
    expect(await Promise.all(outcomes)).toEqual([...Array(10).fill("ok"), "too_many_concurrent_sign_ins", "too_many_concurrent_sign_ins"]);
    expect(most).toBe(2);
  });
});
