import type { Db, Tx } from "./database.js";

import type { SignInLinkStore } from "../dashboard/operators/sign-in-link-store.js";
export type { SignInLinkRecord, SignInLinkStore } from "../dashboard/operators/sign-in-link-store.js";

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
