import { DomainError } from "../domain/errors.js";

/**
 * Storage errors that callers branch on, recognised without leaking Prisma types
 * out of src/storage. Both providers report a unique-constraint violation as
 * P2002 through the Prisma client; driver adapters may also surface the
 * driver's own code (SQLite SQLITE_CONSTRAINT_UNIQUE / PRIMARYKEY, PostgreSQL 23505).
 */
export function isUniqueViolation(error: unknown): boolean {
  const seen = new Set<unknown>();
  let current: unknown = error;
  while (current && typeof current === "object" && !seen.has(current)) {
    seen.add(current);
    const record = current as Record<string, unknown>;
    const code = record.code;
    if (code === "P2002" || code === "23505") return true;
    if (typeof code === "string" && /SQLITE_CONSTRAINT_(UNIQUE|PRIMARYKEY)/.test(code)) return true;
    const kind = (record.cause as Record<string, unknown> | undefined)?.kind;
    if (kind === "UniqueConstraintViolation") return true;
    current = record.cause;
  }
  return false;
}

/** A transaction that lost a race (serialization failure, deadlock, busy). */
export function isTransientConflict(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === "P2034" || code === "40001" || code === "40P01" || code === "SQLITE_BUSY";
}

/**
 * Whether the database stayed locked by another process longer than a write
 * may wait (SQLite: SQLITE_BUSY, which Prisma reports as P1008 "Operation has
 * timed out", or a transaction that could not start in time, P2028).
 */
export function isDatabaseBusy(error: unknown): boolean {
  const seen = new Set<unknown>();
  let current: unknown = error;
  while (current && typeof current === "object" && !seen.has(current)) {
    seen.add(current);
    const record = current as Record<string, unknown>;
    const code = record.code;
    if (code === "P1008" || code === "P2028") return true;
    if (typeof code === "string" && code.startsWith("SQLITE_BUSY")) return true;
    if (typeof record.originalCode === "string" && record.originalCode.startsWith("SQLITE_BUSY")) return true;
    if ((record.cause as Record<string, unknown> | undefined)?.kind === "SocketTimeout") return true;
    current = record.cause;
  }
  return false;
}

/** Runs fn, turning a unique violation into already_exists with the given words. */
export async function uniquely<T>(fn: () => Promise<T>, reason: string, message: string): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    if (isUniqueViolation(error)) throw new DomainError("already_exists", reason, message);
    throw error;
  }
}
