import { RE2JS } from "re2js";

/**
 * A rule's `regex`, compiled for the data plane. Rules run on every request
 * and their patterns come from configuration, so they are matched with re2js:
 * linear time in the input whatever the pattern, where a backtracking engine
 * (RegExp) can be made to take exponential time by a crafted pattern or header.
 *
 * A small wrapper kept in the gateway until validation shares one module for
 * rule patterns (what RE2 refuses, such as back-references and look-around,
 * should then be refused at import instead of here).
 */
export interface RuleRegex {
  /** True when the pattern matches any part of the value (RegExp.prototype.test). */
  test(value: string): boolean;
}

/** The compiled pattern, or what keeps it from compiling (never the pattern itself). */
export function compileRuleRegex(source: string, ignoreCase: boolean): RuleRegex | { problem: string } {
  try {
    // translateRegExp maps JavaScript-only spellings (named groups, \u{...}) onto RE2 syntax.
    const pattern = RE2JS.compile(RE2JS.translateRegExp(source), ignoreCase ? RE2JS.CASE_INSENSITIVE : 0);
    return { test: (value: string) => pattern.test(value) };
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return { problem: `the pattern cannot be matched in linear time: ${reason}` };
  }
}
