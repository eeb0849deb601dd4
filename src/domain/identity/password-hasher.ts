import { parseOptions, type Algorithm, type Options } from "@node-rs/argon2";
import { randomBytes } from "node:crypto";
import { availableParallelism } from "node:os";
import { DomainError } from "../errors.js";
import type { FairKey } from "./fair-queue.js";
import { hashingThreads, type HashingAdmission } from "./hashing-threads.js";
import { normalizePassword } from "./password-policy.js";
import { defaultSignInLimits, type SignInLimits } from "./sign-in-limits.js";

/** argon2id parameters (m in KiB, t iterations, p lanes). */
export interface Argon2Parameters {
  memoryCost: number;
  timeCost: number;
  parallelism: number;
}

/**
 * OWASP Password Storage Cheat Sheet: "Use Argon2id with a minimum
 * configuration of 19 MiB of memory, an iteration count of 2, and 1 degree of
 * parallelism."
 */
export const owaspArgon2id: Argon2Parameters = { memoryCost: 19456, timeCost: 2, parallelism: 1 };

// The binding's Algorithm is a const enum (no runtime object): 2 is Argon2id.
const argon2id = 2 as Algorithm;

export interface PasswordCheck {
  ok: boolean;
  /** The stored hash was made with other parameters: store a new one. */
  needsRehash: boolean;
}

/**
 * On whose behalf a computation runs: the organisation (`dashboard` for
 * operators) and the client address. Waiting computations are served
 * round-robin over organisations and their clients, and each pair may have
 * only so many waiting (README "Configuration").
 */
export type HashingClient = FairKey;

export interface PasswordHasher {
  readonly parameters: Argon2Parameters;
  /** resource_exhausted (hashing_busy) when the hashing queue has no room for this client. */
  hash(password: string, client?: HashingClient): Promise<string>;
  /**
   * Verifies a password against a stored hash. With no stored hash it verifies
   * against a dummy hash of the same parameters, so an unknown identifier costs
   * the same work as a wrong password, and answers false. resource_exhausted
   * (hashing_busy) when the hashing queue has no room for this client.
   */
  verify(stored: string | null, password: string, client?: HashingClient): Promise<PasswordCheck>;
}

/**
 * How many hashes run at once by default: one per core, so hashing alone can
 * keep every core busy. Fewer leaves cores idle while logins queue; more only
 * adds threads that take turns on the same cores, each hash finishing later.
 */
export function defaultHashingConcurrency(): number {
  return Math.max(1, availableParallelism());
}

/**
 * argon2id through @node-rs/argon2 on the process's hashing threads (see
 * hashing-threads.ts), never on the event loop and at a lower CPU priority
 * than it. The process runs `concurrency` hashes at once (default: one per
 * core; the largest that any of its hashers asks for); the rest wait, in
 * arrival order.
 */
export function createPasswordHasher(
  options: {
    parameters?: Argon2Parameters;
    concurrency?: number;
    /** How many computations may wait, in all and per (organisation, client address). */
    admission?: Pick<SignInLimits, "hashingQueueLimit" | "hashingQueuePerClient">;
  } = {},
): PasswordHasher {
  const parameters = options.parameters ?? owaspArgon2id;
  const argonOptions: Options = { algorithm: argon2id, ...parameters };
  hashingThreads.reserve(options.concurrency ?? defaultHashingConcurrency());
  const limits = {
    total: options.admission?.hashingQueueLimit ?? defaultSignInLimits.hashingQueueLimit,
    perClient: options.admission?.hashingQueuePerClient ?? defaultSignInLimits.hashingQueuePerClient,
  };
  const admissionOf = (client: HashingClient | undefined): HashingAdmission => ({
    key: client ?? { organization: "-", client: "-" },
    limits,
  });
  const hash = async (password: string, client?: HashingClient) =>
    (await hashingThreads.run({ kind: "hash", password, options: argonOptions }, admissionOf(client))) as string;
  let dummy: Promise<string> | undefined;

  const dummyHash = () => {
    dummy ??= hash(randomBytes(32).toString("base64url")).catch((error: unknown) => {
      dummy = undefined;
      throw error;
    });
    return dummy;
  };

  return {
    parameters,
    hash: (password, client) => hash(normalizePassword(password), client),
    async verify(stored, password, client) {
      const target = stored ?? (await dummyHash());
      let ok = false;
      try {
        const job = { kind: "verify", stored: target, password: normalizePassword(password) } as const;
        ok = (await hashingThreads.run(job, admissionOf(client))) === true;
      } catch (error) {
        // No room in the queue: the caller answers 429.
        if (error instanceof DomainError) throw error;
        // A stored value that is not a PHC string never matches.
        ok = false;
      }
      return { ok: ok && stored !== null, needsRehash: ok && stored !== null && !matchesParameters(stored, parameters) };
    },
  };
}

function matchesParameters(stored: string, parameters: Argon2Parameters): boolean {
  try {
    const parsed = parseOptions(stored);
    return (
      parsed.algorithm === argon2id &&
      parsed.memoryCost === parameters.memoryCost &&
      parsed.timeCost === parameters.timeCost &&
      parsed.parallelism === parameters.parallelism
    );
  } catch {
    return false;
  }
}
