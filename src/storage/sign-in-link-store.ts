import type { Db, Tx } from "./database.js";

/** A one-time dashboard sign-in link; only the hash of its token is stored. */
export interface SignInLinkRecord {
  id: string;
  accountId: string;
  createdAt: Date;
  expiresAt: Date;
  usedAt: Date | null;
}

/** Operators' one-time sign-in links (see src/dashboard/operators/operator-sign-in-links.ts). */
export interface SignInLinkStore {
  createLink(link: Omit<SignInLinkRecord, "usedAt"> & { hash: string }): Promise<void>;
  findLink(hash: string): Promise<SignInLinkRecord | null>;
  /**
   * Spends a link with ONE conditional update (unused and unexpired at `at`):
   * of any number of concurrent calls, on any number of instances, exactly
   * one gets the account; the others get null.
   */
  spendLink(hash: string, at: Date): Promise<string | null>;
  /** Deletes links that expired before `before` (spent or not). */
  purgeLinks(before: Date): Promise<void>;
  /**
   * Marks every unused, unexpired link of an account used at `at`: they sign
   * no one in any more (expired ones could not anyway, and purgeLinks deletes them).
   */
  voidLinksOf(accountId: string, at: Date): Promise<void>;
}

const linkSelect = { id: true, accountId: true, createdAt: true, expiresAt: true, usedAt: true } as const;

export function createSignInLinkStore(db: Db | Tx): SignInLinkStore {
  return {
    async createLink(link) {
      await db.operatorSignInLink.create({ data: link });
    },
    findLink: (hash) => db.operatorSignInLink.findUnique({ where: { hash }, select: linkSelect }),
    async spendLink(hash, at) {
      const { count } = await db.operatorSignInLink.updateMany({
        where: { hash, usedAt: null, expiresAt: { gt: at } },
        data: { usedAt: at },
      });
      if (count !== 1) return null;
      const link = await db.operatorSignInLink.findUnique({ where: { hash }, select: { accountId: true } });
      return link?.accountId ?? null;
    },
    async purgeLinks(before) {
      await db.operatorSignInLink.deleteMany({ where: { expiresAt: { lt: before } } });
    },
    async voidLinksOf(accountId, at) {
      await db.operatorSignInLink.updateMany({ where: { accountId, usedAt: null, expiresAt: { gt: at } }, data: { usedAt: at } });
    },
  };
}
