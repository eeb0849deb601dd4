import type { Db, Tx } from "./database.js";
import { isUniqueViolation, uniquely } from "./errors.js";

import type { CeremonyKind, CeremonyRecord, PasskeyRecord, PasskeyStore } from "../domain/passkeys/passkey-store.js";
export type {
  CeremonyKind,
  CeremonyRecord,
  PasskeyRecord,
  PasskeyDescriptor,
  PasskeyStore,
  SystemValue,
} from "../domain/passkeys/passkey-store.js";

type PasskeyRow = Omit<PasskeyRecord, "counter" | "transports" | "publicKey"> & {
  counter: bigint | number;
  transports: string;
  publicKey: Uint8Array;
};

function toPasskey(row: PasskeyRow): PasskeyRecord {
  return {
    ...row,
    publicKey: new Uint8Array(row.publicKey),
    counter: Number(row.counter),
    transports: parseStringArray(row.transports),
  };
}

/** A passkey as its row stores it: key bytes, a 64-bit counter, transports as a JSON array. */
export function passkeyRowData<T extends { publicKey: Uint8Array; counter: number; transports: string[] }>(passkey: T) {
  return {
    ...passkey,
    publicKey: new Uint8Array(passkey.publicKey),
    counter: BigInt(passkey.counter),
    transports: JSON.stringify(passkey.transports),
  };
}

/** A JSON array of strings as stored (transports, tags); anything unreadable counts as none. */
export function parseStringArray(text: string): string[] {
  try {
    const value: unknown = JSON.parse(text);
    return Array.isArray(value) ? value.filter((t): t is string => typeof t === "string") : [];
  } catch {
    return [];
  }
}

function toCeremony(row: Omit<CeremonyRecord, "kind"> & { kind: string }): CeremonyRecord {
  return { ...row, kind: row.kind as CeremonyKind };
}

const ceremonySelect = {
  id: true,
  organizationId: true,
  kind: true,
  challenge: true,
  identityId: true,
  identifier: true,
  displayName: true,
  createdAt: true,
  expiresAt: true,
  usedAt: true,
} as const;

export function createPasskeyStore(db: Db | Tx): PasskeyStore {
  return {
    async createCeremony(ceremony) {
      await db.ceremony.create({ data: ceremony });
    },
    async findCeremony(organizationId, id) {
      const row = await db.ceremony.findFirst({ where: { id, organizationId }, select: ceremonySelect });
      return row ? toCeremony(row) : null;
    },
    async spendCeremony(organizationId, id, kind, at) {
      // The one conditional update that makes a ceremony single-use.
      const { count } = await db.ceremony.updateMany({
        where: { id, organizationId, kind, usedAt: null, expiresAt: { gt: at } },
        data: { usedAt: at },
      });
      if (count !== 1) return null;
      const row = await db.ceremony.findFirst({ where: { id, organizationId }, select: ceremonySelect });
      return row ? toCeremony(row) : null;
    },
    async pruneCeremonies(before) {
      await db.ceremony.deleteMany({ where: { expiresAt: { lt: before } } });
    },

    async findLoginCandidates(organizationId, identifier) {
      const rows = await db.$queryRaw<{ identityId: string | null; passkeyId: string | null; transports: string | null }[]>`
        SELECT i."id" AS "identityId", p."id" AS "passkeyId", p."transports" AS "transports"
        FROM (SELECT 1 AS "anchor") AS "anchor"
        LEFT JOIN "Identity" i ON i."organizationId" = ${organizationId} AND i."identifier" = ${identifier}
        LEFT JOIN "Passkey" p ON p."organizationId" = i."organizationId" AND p."identityId" = i."id"
        ORDER BY p."createdAt" ASC, p."id" ASC`;
      const identityId = rows[0]?.identityId ?? null;
      const passkeys = rows.flatMap((row) =>
        row.passkeyId === null ? [] : [{ id: row.passkeyId, transports: parseStringArray(row.transports ?? "[]") }],
      );
      return { identityId, passkeys };
    },
    async listPasskeys(organizationId, identityId) {
      const rows = await db.passkey.findMany({ where: { organizationId, identityId }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
      return rows.map(toPasskey);
    },
    countPasskeys: (organizationId, identityId) => db.passkey.count({ where: { organizationId, identityId } }),
    async findPasskey(organizationId, id) {
      const row = await db.passkey.findFirst({ where: { id, organizationId } });
      return row ? toPasskey(row) : null;
    },
    async createPasskey(passkey) {
      await uniquely(() => db.passkey.create({ data: passkeyRowData(passkey) }), "passkey_exists", "this passkey is already registered");
    },
    async recordPasskeyUse(organizationId, id, use) {
      const counter = BigInt(use.counter);
      const { count } = await db.passkey.updateMany({
        where: {
          id,
          organizationId,
          ...(use.counter === 0 ? { counter: 0n } : { counter: { lt: counter } }),
        },
        data: { counter, backedUp: use.backedUp, deviceType: use.deviceType, lastUsedAt: use.at },
      });
      return count === 1;
    },
    async removePasskey(organizationId, identityId, id) {
      const { count } = await db.passkey.deleteMany({ where: { id, organizationId, identityId } });
      return count === 1;
    },

    async lockIdentity(organizationId, identityId) {
      const count = await db.$executeRaw`
        UPDATE "Identity" SET "identifier" = "identifier" WHERE "id" = ${identityId} AND "organizationId" = ${organizationId}`;
      return count === 1;
    },

    async findOrCreateSystemValue(key, initial) {
      const select = { value: true, masterKeyId: true } as const;
      const found = await db.systemState.findUnique({ where: { key }, select });
      if (found) return found;
      try {
        await db.systemState.create({ data: { key, ...initial() } });
      } catch (error) {
        // Another instance created it first (unique key): read the winner below.
        if (!isUniqueViolation(error)) throw error;
      }
      const winner = await db.systemState.findUnique({ where: { key }, select });
      if (!winner) throw new Error(`system value ${key} could not be stored`);
      return winner;
    },
  };
}
