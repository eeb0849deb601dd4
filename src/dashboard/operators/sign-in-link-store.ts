// One-time operator sign-in links (a port); src/storage implements it.
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
