import type { Options } from "@node-rs/argon2";
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import { DomainError } from "../errors.js";
import { FairQueue, type FairKey, type FairQueueLimits } from "./fair-queue.js";

/** One argon2id computation for a hashing thread. */
export type HashingJob = { kind: "hash"; password: string; options: Options } | { kind: "verify"; stored: string; password: string };

/**
 * Who asks for a computation and how much waiting the asker allows: the
 * (organisation, client address) it is queued under, the process-wide bound on
 * waiting computations and the bound per (organisation, client).
 */
export interface HashingAdmission {
  key: FairKey;
  limits: FairQueueLimits;
}

interface Queued {
  job: HashingJob;
  /** The fairness key as one string, for counting who has work in the pool. */
  sender: string;
  /** The client address it runs for (see threadsPerClient). */
  client: string;
  resolve(value: string | boolean): void;
  reject(error: Error): void;
}

interface HashingThread {
  worker: Worker;
  /** Jobs handed to the thread, oldest (the one it is computing) first; it answers in order. */
  inFlight: Queued[];
  idleTimer: NodeJS.Timeout | null;
  /** When the job it computes now was (about) started. */
  startedAt: number | null;
}

/**
 * Jobs a busy thread may hold: the one it computes and the next, while only
 * one sender has work in the pool. The next is
 * already in the thread's message queue when the current one ends, so the
 * thread starts it at once instead of idling until the event loop has read the
 * answer and posted more work (under load the event loop is busy, and that wait
 * was time the core spent on neither). Jobs are of nearly equal cost, so
 * holding one more per thread delays none behind a long one. While several
 * senders have work, a thread holds one job only: a job handed to a thread
 * can no longer be reordered, so holding a second would make a newcomer wait
 * for it however fair the queue is.
 */
export const hashingDepth = 2;

/**
 * How much lower than the process the hashing threads run (a nice value). At
 * equal priority a hashing thread that has just been handed a 20 ms hash may
 * keep its core while the event loop, woken by a request, waits for the
 * scheduler to switch. At nice +10 the event loop weighs about nine times a
 * hashing thread, so it gets a core as soon as it has work and the hashes use
 * the rest: while saturated with password logins, /healthz answered in a
 * median of 1.5 ms instead of 4 ms and a 99th percentile half as long, with
 * the same number of logins per second. The price: other processes at normal
 * priority on the same machine are served before the hashes too, so on a
 * machine shared with busy processes password sign-ins slow down first.
 */
const hashingNiceness = 10;
/** A thread with nothing to hash for this long ends; the next hash starts a new one (tens of ms). */
const idleMs = 30_000;

// The thread runs CommonJS: the binding is loaded by its resolved path, so it
// is found whatever the working directory.
const threadSource = `
const { parentPort, workerData } = require("node:worker_threads");
const { readlinkSync } = require("node:fs");
const { getPriority, setPriority } = require("node:os");
const argon2 = require(workerData.binding);
try {
  // Linux: a thread's nice value is its own, and /proc/thread-self names it.
  const tid = Number(readlinkSync("/proc/thread-self").split("/").pop());
  setPriority(tid, Math.min(19, getPriority(tid) + workerData.niceness));
} catch {
  // Elsewhere the thread keeps the process's priority.
}
parentPort.on("message", (job) => {
  try {
    const value = job.kind === "hash" ? argon2.hashSync(job.password, job.options) : argon2.verifySync(job.stored, job.password);
    parentPort.postMessage({ value });
  } catch (error) {
    parentPort.postMessage({ error: error instanceof Error ? error.message : String(error) });
  }
});
`;

const binding = createRequire(import.meta.url).resolve("@node-rs/argon2");
const threads: HashingThread[] = [];
const queue = new FairQueue<Queued>();
/** Jobs queued or on a thread, per sender. */
const senders = new Map<string, number>();
let capacity = 1;
/** Jobs handed to threads since the process started. */
let computations = 0;
/** A moving average of how long a job takes on a thread, for Retry-After. */
let averageJobMs = 25;
const defaultAdmission: HashingAdmission = {
  key: { organization: "-", client: "-" },
  limits: { total: Number.POSITIVE_INFINITY, perClient: Number.POSITIVE_INFINITY },
};

function depthAllowed(): number {
  return senders.size <= 1 ? hashingDepth : 1;
}

/**
 * How many threads one client address may keep busy: all but one. Jobs are
 * not preemptible, so a client that held every thread would make anyone else
 * wait for one of its jobs to end; with one thread kept from it, someone else's
 * first job starts at once. The price: a single address alone (a big office
 * behind one NAT, one backend) gets one core fewer for its passwords.
 */
function threadsPerClient(): number {
  return Math.max(1, capacity - 1);
}

/** The client address of a fairness key; callers without one count per organisation. */
function clientOf(key: FairKey): string {
  return key.client === "-" || key.client === "backend" ? `${key.organization}\n${key.client}` : key.client;
}

function busy(): DomainError {
  // The time the queue ahead takes on the threads there are, at least a second.
  const seconds = Math.max(1, Math.ceil(((queue.size + 1) * averageJobMs) / Math.max(1, threads.length) / 1000));
  return new DomainError(
    "resource_exhausted",
    "hashing_busy",
    `the server is checking too many passwords at the moment; try again in ${seconds} s`,
    [],
    seconds,
  );
}

function settle(queued: Queued): void {
  const left = (senders.get(queued.sender) ?? 1) - 1;
  if (left <= 0) senders.delete(queued.sender);
  else senders.set(queued.sender, left);
}

/**
 * The threads that run argon2id, shared by every hasher of the process (as the
 * cores are): at most `capacity` of them, started when there is work, each
 * running one computation at a time synchronously, at a lower CPU priority
 * than the event loop (see hashingNiceness). Never on the event loop.
 */
export const hashingThreads = {
  /** Lets up to `count` computations run at once (the largest any hasher asked for). */
  reserve(count: number): void {
    capacity = Math.max(capacity, count);
  },

  /**
   * Runs a job, or queues it fairly (round-robin over organisations and their
   * clients) when every thread is busy. Past the asker's bounds the job is
   * refused at once with resource_exhausted (hashing_busy, with Retry-After);
   * a full queue may push out the newest job of its heaviest sender instead.
   */
  run(job: HashingJob, admission: HashingAdmission = defaultAdmission): Promise<string | boolean> {
    return new Promise((resolve, reject) => {
      const sender = `${admission.key.organization}\n${admission.key.client}`;
      const queued: Queued = { job, sender, client: clientOf(admission.key), resolve, reject };
      const offered = queue.offer(queued, admission.key, admission.limits);
      if (!offered.admitted) {
        reject(busy());
        return;
      }
      senders.set(sender, (senders.get(sender) ?? 0) + 1);
      if (offered.evicted) {
        settle(offered.evicted);
        offered.evicted.reject(busy());
      }
      pump();
    });
  },

  /** Jobs waiting for a thread (for tests and metrics). */
  get waiting(): number {
    return queue.size;
  },

  /** Jobs handed to threads since the process started (for tests and metrics). */
  get computations(): number {
    return computations;
  },
};

function startThread(): HashingThread {
  const worker = new Worker(threadSource, { eval: true, workerData: { binding, niceness: hashingNiceness } });
  const thread: HashingThread = { worker, inFlight: [], idleTimer: null, startedAt: null };
  threads.push(thread);
  worker.on("message", (answer: { value?: string | boolean; error?: string }) => {
    const done = thread.inFlight.shift();
    if (done) {
      settle(done);
      const took = performance.now() - (thread.startedAt ?? performance.now());
      averageJobMs += (took - averageJobMs) / 8;
      if (answer.error !== undefined) done.reject(new Error(answer.error));
      else done.resolve(answer.value as string | boolean);
    }
    thread.startedAt = thread.inFlight.length > 0 ? performance.now() : null;
    pump();
    if (thread.inFlight.length === 0) idle(thread);
  });
  const lost = (error: Error) => {
    const index = threads.indexOf(thread);
    if (index === -1) return;
    threads.splice(index, 1);
    if (thread.idleTimer) clearTimeout(thread.idleTimer);
    const unanswered = thread.inFlight.splice(0);
    for (const job of unanswered) {
      settle(job);
      job.reject(error);
    }
    // Whatever waits gets a new thread.
    pump();
  };
  worker.on("error", lost);
  worker.on("exit", (code) => lost(new Error(`the hashing thread stopped (exit code ${code})`)));
  return thread;
}

function assign(thread: HashingThread, queued: Queued): void {
  if (thread.idleTimer) {
    clearTimeout(thread.idleTimer);
    thread.idleTimer = null;
  }
  thread.inFlight.push(queued);
  computations++;
  if (thread.inFlight.length === 1) thread.startedAt = performance.now();
  // A thread at work keeps the process alive until its answer arrives; an idle one does not.
  thread.worker.ref();
  thread.worker.postMessage(queued.job);
}

/** How many threads hold a job of this client address. */
function threadsOf(client: string): number {
  let count = 0;
  for (const thread of threads) if (thread.inFlight.some((queued) => queued.client === client)) count++;
  return count;
}

/**
 * Hands waiting jobs to threads in the queue's fair order: to an idle thread
 * (or a new one, up to the capacity), passing over client addresses that
 * already keep threadsPerClient threads busy; and, while a single sender has
 * work, a second job to a busy thread (hashingDepth).
 */
function pump(): void {
  const eligible = (key: FairKey) => threadsOf(clientOf(key)) < threadsPerClient();
  while (queue.size > 0) {
    const free = threads.find((thread) => thread.inFlight.length === 0) ?? (threads.length < capacity ? null : undefined);
    if (free !== undefined) {
      const job = queue.take(eligible);
      if (job) {
        assign(free ?? startThread(), job);
        continue;
      }
    }
    if (depthAllowed() < hashingDepth) return;
    let target: HashingThread | undefined;
    for (const thread of threads) {
      if (
        thread.inFlight.length > 0 &&
        thread.inFlight.length < hashingDepth &&
        (!target || thread.inFlight.length < target.inFlight.length)
      )
        target = thread;
    }
    const job = target ? queue.take() : undefined;
    if (!target || !job) return;
    assign(target, job);
  }
}

/** A thread with nothing to do: it lets the process exit, and ends after idleMs. */
function idle(thread: HashingThread): void {
  thread.worker.unref();
  thread.idleTimer = setTimeout(() => {
    const index = threads.indexOf(thread);
    if (index !== -1 && thread.inFlight.length === 0) {
      threads.splice(index, 1);
      void thread.worker.terminate();
    }
  }, idleMs);
  thread.idleTimer.unref();
}
