import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DomainError } from "../../src/domain/errors.js";
import { type Database, openDatabase } from "../../src/storage/database.js";
import { isUniqueViolation } from "../../src/storage/errors.js";
import { createTenancyStore, type Role } from "../../src/storage/tenancy-store.js";
import { createTestDatabase, openTestDatabase, testProvider } from "../support/database.js";

/**
 * The storage contract suite: one behaviour suite per store, run directly
 * against each database (no HTTP). The database of the run (TEST_DATABASE_URL,
 * as for every other test) is always one; SQLite, which costs a file and a few
 * milliseconds, runs on every run as well.
 */
export type Provider = Database["provider"];

export const storageProviders: readonly Provider[] = testProvider === "postgresql" ? ["postgresql", "sqlite"] : ["sqlite"];

/** A database of one provider, fresh for one test file, and builders for the rows most stores hang off. */
export interface StorageTarget {
  readonly provider: Provider;
  readonly db: Database;
  /** A new organisation. */
  organization(name?: string): Promise<string>;
  /** A new person account (optionally a member of `organizationId` with `role`). */
  account(options?: { organizationId?: string; role?: Role; email?: string; kind?: "person" | "service" }): Promise<string>;
}

async function openTarget(provider: Provider): Promise<{ db: Database; drop(): Promise<void> }> {
  if (provider === testProvider) {
    const testDb = await createTestDatabase();
    return { db: await openTestDatabase(testDb), drop: () => testDb.drop() };
  }
  // The run's database is PostgreSQL: SQLite needs only a file of its own.
  const dir = mkdtempSync(join(tmpdir(), "gatehouse-storage-"));
  return {
    db: await openDatabase({ provider: "sqlite", file: join(dir, "gatehouse.db") }),
    drop: async () => rmSync(dir, { recursive: true, force: true }),
  };
}

/**
 * `describe` per provider with a fresh database for the file: the suite reads
 * `target.db` and the builders inside its tests.
 */
export function describeStorage(name: string, suite: (target: StorageTarget) => void): void {
  describe.each(storageProviders)(`${name} (%s)`, (provider) => {
    let opened: { db: Database; drop(): Promise<void> } | undefined;
    const target: StorageTarget = {
      provider,
      get db() {
        if (!opened) throw new Error("the database is opened in beforeAll");
        return opened.db;
      },
      async organization(orgName = "Org") {
        const id = randomUUID();
        await createTenancyStore(target.db.client).createOrganization({ id, name: orgName });
        return id;
      },
      async account(options = {}) {
        const id = randomUUID();
        const tenancy = createTenancyStore(target.db.client);
        await tenancy.createAccount({
          id,
          email: options.email ?? `${id}@example.com`,
          displayName: `Account ${id.slice(0, 8)}`,
          kind: options.kind ?? "person",
        });
        if (options.organizationId) {
          await tenancy.addMembership({ organizationId: options.organizationId, accountId: id, role: options.role ?? "member" });
        }
        return id;
      },
    };
    beforeAll(async () => {
      opened = await openTarget(provider);
    });
    afterAll(async () => {
      await opened?.db.close();
      await opened?.drop();
    });
    suite(target);
  });
}

/** The DomainError `promise` rejects with, for asserting its kind and reason. */
export async function domainErrorOf(promise: Promise<unknown>): Promise<{ kind: string; reason: string }> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof DomainError) return { kind: error.kind, reason: error.reason };
    throw error;
  }
  throw new Error("expected a DomainError, but the call succeeded");
}

/**
 * Whether `promise` rejects as a unique-constraint violation, as the stores
 * recognise one (errors.ts): both providers, through Prisma and our adapter.
 */
export async function rejectsAsDuplicate(promise: Promise<unknown>): Promise<boolean> {
  try {
    await promise;
  } catch (error) {
    return isUniqueViolation(error);
  }
  return false;
}

/** A fixed instant `seconds` after a base time, so ordering tests do not depend on the clock. */
export function at(seconds: number): Date {
  return new Date(Date.UTC(2026, 10, 22, 10, 0, 0) + seconds * 1000);
}

/** Resolves when its release is called: holds a transaction open at a known point. */
export function latch(): { released: Promise<void>; release(): void } {
  let release = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  return { released, release };
}

/** The answer, or a note that it did not come within 5 s (the timer never outlives the call). */
export async function withinFiveSeconds<T>(answer: Promise<T>): Promise<T | string> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<string>((resolve) => {
    timer = setTimeout(() => resolve("still waiting after 5 s"), 5000);
  });
  try {
    return await Promise.race([answer, late]);
  } finally {
    clearTimeout(timer);
  }
}
