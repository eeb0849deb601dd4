/**
 * The common-password list of zxcvbn-ts (@zxcvbn-ts/language-common, about
 * 49,000 passwords ranked from breach corpora), loaded once on first use.
 * NIST SP 800-63B 5.1.1.2: verifiers "SHALL compare the prospective secrets
 * against a list that contains values known to be commonly-used, expected, or
 * compromised".
 */
let loading: Promise<ReadonlySet<string>> | undefined;

function commonPasswords(): Promise<ReadonlySet<string>> {
  loading ??= import("@zxcvbn-ts/language-common").then(({ dictionary }) => new Set(dictionary["passwords-common"]));
  return loading;
}

/** Whether a password is on the list; the list is lower-case, so the check ignores case. */
export async function isCommonPassword(password: string): Promise<boolean> {
  return (await commonPasswords()).has(password.toLowerCase());
}
