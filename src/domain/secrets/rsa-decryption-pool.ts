import { constants, privateDecrypt, type KeyObject } from "node:crypto";
import { availableParallelism } from "node:os";
import { Worker } from "node:worker_threads";
import { DomainError } from "../errors.js";

/** RSA-OAEP (SHA-256, MGF1-SHA-256) decryption with the organisation's private key. */
export interface RsaDecryptor {
  /** The plaintext, or null when the ciphertext does not decrypt (wrong key, wrong padding, tampered). */
  decrypt(key: KeyObject, ciphertext: Buffer): Promise<Buffer | null>;
  close(): Promise<void>;
}

const oaep = { padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha256" } as const;

/** Decrypts on the calling thread. */
export function createInlineRsaDecryptor(): RsaDecryptor {
  return {
    async decrypt(key, ciphertext) {
      try {
        return privateDecrypt({ key, ...oaep }, ciphertext);
      } catch {
        return null;
      }
    },
    async close() {},
  };
}

// Runs in each worker: one OAEP decryption per message. It reports only success
// or failure, never why, so no padding detail leaves the worker.
const workerSource = `
const { parentPort } = require("node:worker_threads");
const { privateDecrypt, constants } = require("node:crypto");
parentPort.on("message", ({ id, key, ciphertext }) => {
  let plaintext = null;
  try {
    plaintext = privateDecrypt({ key, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha256" }, ciphertext);
  } catch {}
  parentPort.postMessage({ id, plaintext });
});
`;

export interface RsaDecryptionPoolOptions {
  /** Worker threads; 0 decrypts on the calling thread. */
  size?: number;
  /** Decryptions that may wait for a worker before new ones are refused (resource_exhausted). */
  maxQueued?: number;
}

/**
 * The default pool size. One RSA-4096 private operation costs about 6 ms of CPU:
 * on the event loop it stalls every other request for that long, so writes run
 * on worker threads instead, one per core beyond the one the event loop needs.
 */
export function defaultRsaPoolSize(): number {
  return Math.max(1, Math.min(4, availableParallelism() - 1));
}

interface Job {
  key: KeyObject;
  ciphertext: Buffer;
  resolve(plaintext: Buffer | null): void;
  reject(error: unknown): void;
}

interface Slot {
  worker: Worker;
  job: (Job & { id: number }) | undefined;
}

/**
 * A small pool of worker threads for RSA private decryption, started on first use.
 * Each worker takes one job at a time; jobs beyond that wait in a bounded queue.
 */
export function createRsaDecryptionPool(options: RsaDecryptionPoolOptions = {}): RsaDecryptor {
  const size = options.size ?? defaultRsaPoolSize();
  if (size <= 0) return createInlineRsaDecryptor();
  const maxQueued = options.maxQueued ?? 1024;
  const slots: Slot[] = [];
  const queue: Job[] = [];
  let nextId = 1;
  let closed = false;

  function start(): Slot {
    const worker = new Worker(workerSource, { eval: true });
    worker.unref();
    const slot: Slot = { worker, job: undefined };
    worker.on("message", (message: { id: number; plaintext: Uint8Array | null }) => {
      const job = slot.job;
      if (!job || job.id !== message.id) return;
      slot.job = undefined;
      job.resolve(
        message.plaintext ? Buffer.from(message.plaintext.buffer, message.plaintext.byteOffset, message.plaintext.byteLength) : null,
      );
      pump();
    });
    const fail = (error: unknown) => {
      const job = slot.job;
      slot.job = undefined;
      const index = slots.indexOf(slot);
      if (index !== -1) slots.splice(index, 1);
      job?.reject(error instanceof Error ? error : new Error("RSA worker stopped"));
      if (!closed) pump();
    };
    worker.on("error", fail);
    worker.on("exit", (code) => fail(new Error(`RSA worker exited with code ${code}`)));
    slots.push(slot);
    return slot;
  }

  function pump(): void {
    while (queue.length > 0) {
      let slot = slots.find((s) => s.job === undefined);
      if (!slot && slots.length < size) slot = start();
      if (!slot) return;
      const job = queue.shift() as Job;
      const id = nextId++;
      slot.job = { ...job, id };
      slot.worker.postMessage({ id, key: job.key, ciphertext: job.ciphertext });
    }
  }

  return {
    decrypt(key, ciphertext) {
      if (closed) return Promise.reject(new Error("the RSA decryption pool is closed"));
      if (queue.length >= maxQueued) {
        return Promise.reject(
          new DomainError(
            "resource_exhausted",
            "decryption_busy",
            "too many sealed values are being decrypted right now: retry shortly",
            [],
            1,
          ),
        );
      }
      return new Promise<Buffer | null>((resolve, reject) => {
        queue.push({ key, ciphertext, resolve, reject });
        pump();
      });
    },
    async close() {
      closed = true;
      for (const job of queue.splice(0)) job.reject(new Error("the RSA decryption pool is closed"));
      await Promise.all(slots.splice(0).map((slot) => slot.worker.terminate()));
    },
  };
}
