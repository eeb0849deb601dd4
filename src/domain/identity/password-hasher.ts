import { hash, parseOptions, verify, type Algorithm, type Options } from "@node-rs/argon2";
import { randomBytes } from "node:crypto";
import { availableParallelism } from "node:os";
import { normalizePassword } from "./password-policy.js";

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

export interface PasswordHasher {
  readonly parameters: Argon2Parameters;
  hash(password: string): Promise<string>;
  /**
   * Verifies a password against a stored hash. With no stored hash it verifies
   * against a dummy hash of the same parameters, so an unknown identifier costs
   * the same work as a wrong password, and answers false.
   */
  verify(stored: string | null, password: string): Promise<PasswordCheck>;
}

/**
 * argon2id through @node-rs/argon2, whose work runs on the libuv thread pool,
 * never on the event loop. At most one hash per core runs at a time: the rest
 * wait in a queue, which keeps a core's worth of time for the event loop and
 * the pool's threads for other work.
 */
export function createPasswordHasher(options: { parameters?: Argon2Parameters; concurrency?: number } = {}): PasswordHasher {
  const parameters = options.parameters ?? owaspArgon2id;
  const argonOptions: Options = { algorithm: argon2id, ...parameters };
  const limit = createLimiter(options.concurrency ?? Math.max(1, availableParallelism()));
  let dummy: Promise<string> | undefined;

  const dummyHash = () => {
    dummy ??= limit(() => hash(randomBytes(32).toString("base64url"), argonOptions));
    return dummy;
  };

  return {
    parameters,
    hash: (password) => limit(() => hash(normalizePassword(password), argonOptions)),
    async verify(stored, password) {
      const target = stored ?? (await dummyHash());
      let ok = false;
      try {
        ok = await limit(() => verify(target, normalizePassword(password)));
      } catch {
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

/** A counting semaphore: runs at most `size` tasks at once, the rest in arrival order. */
function createLimiter(size: number) {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async function run<T>(task: () => Promise<T>): Promise<T> {
    if (running >= size) await new Promise<void>((resolve) => waiting.push(resolve));
    else running++;
    try {
      return await task();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else running--;
    }
  };
}
