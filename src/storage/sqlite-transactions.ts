/**
 * The turn-taking on a SQLite connection that one transaction at a time holds.
 *
 * A SQLite connection has no sessions: a statement made outside a transaction
 * while one is open on the same connection runs inside it. It would read that
 * transaction's uncommitted rows, and its writes would be undone if that
 * transaction rolled back, although the statement returned success to a
 * caller that has nothing to do with it (a session row lost because an
 * unrelated import failed). So while a transaction holds the connection,
 * other work waits its turn: the gate runs it once the transaction has
 * ended, in the order it came, transactions included (a write queued before
 * the next transaction runs before that transaction begins). The adapter
 * (sqlite-adapter.ts) answers statements that write nothing from a second
 * connection instead of queueing them.
 *
 * The transaction holds the connection from the moment its BEGIN runs (the
 * gate runs `begin` and closes in the same synchronous step, so nothing slips
 * in between) until the adapter is told it committed or rolled back. Work and
 * `begin` are synchronous (better-sqlite3), which is what makes the check and
 * the statement one step.
 */
export interface TransactionGate {
  /** Whether a transaction holds the connection. */
  readonly held: boolean;
  /** Runs `work` now when no transaction holds the connection, else when its turn comes. */
  run<T>(work: () => T): Promise<T>;
  /**
   * Runs `begin` when its turn comes and holds the connection from then on;
   * resolves to the function that ends the hold (once; later calls do nothing).
   * When `begin` throws, nothing is held and the promise rejects.
   */
  hold(begin: () => void): Promise<() => void>;
  /** Rejects all waiting work with `reason` (the connection is closing). */
  close(reason: Error): void;
}

export function createTransactionGate(): TransactionGate {
  let held = false;
  let closed: Error | null = null;
  // Invariant: the queue is empty whenever nothing is held.
  const queue: { start(): void; fail(reason: Error): void }[] = [];

  function drain(): void {
    while (!held && queue.length > 0) queue.shift()?.start();
  }

  function take(begin: () => void): () => void {
    begin();
    held = true;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      held = false;
      drain();
    };
  }

  function settle<T>(work: () => T, resolve: (value: T) => void, reject: (reason: unknown) => void): void {
    try {
      resolve(work());
    } catch (error) {
      reject(error);
    }
  }

  function enqueue<T>(work: () => T): Promise<T> {
    if (closed) return Promise.reject(closed);
    if (!held) return new Promise((resolve, reject) => settle(work, resolve, reject));
    return new Promise((resolve, reject) => queue.push({ start: () => settle(work, resolve, reject), fail: reject }));
  }

  return {
    get held() {
      return held;
    },
    run: enqueue,
    hold: (begin) => enqueue(() => take(begin)),
    close(reason) {
      closed = reason;
      for (const waiting of queue.splice(0)) waiting.fail(reason);
    },
  };
}
