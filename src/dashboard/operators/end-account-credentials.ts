import type { DashboardStore } from "./dashboard-store.js";

/**
 * Ends every credential of an operator account that someone other than the
 * person acting now may hold: its passkeys (and add-passkey ceremonies under
 * way), its unused setup links and every session but `keepSessionId`. The
 * password is the caller's to set: a new one chosen by the person acting, or
 * none after a recovery sign-in.
 *
 * Why: an account's e-mail address is never proven (the platform sends no
 * e-mail), so whoever held a link for the address first (another
 * organisation's admin included) may have made the account and kept a way
 * into it. "Account pre-hijacking" (Sudhodanan and Paverd, USENIX Security
 * 2022) is exactly that way outliving the rightful owner's arrival; see
 * docs/security.md, "The dashboard and operator accounts". Callers run this in
 * the transaction that also changes the password and holds the account's lock
 * (DashboardStore.lockAccount), so a sign-in racing it either ends before (and
 * its session is revoked here) or starts after (and finds the new password).
 */
export async function endAccountCredentials(
  store: Pick<DashboardStore, "removeOperatorPasskeysOf" | "removeAddPasskeyChallengesOf" | "voidSetupTokensOf" | "revokeSessionsOf">,
  accountId: string,
  options: { at: Date; keepSessionId: string | null },
): Promise<void> {
  await store.removeOperatorPasskeysOf(accountId);
  await store.removeAddPasskeyChallengesOf(accountId);
  await store.voidSetupTokensOf(accountId, options.at);
  await store.revokeSessionsOf(accountId, options.at, options.keepSessionId ?? undefined);
}
