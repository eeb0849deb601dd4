import { RE2JS, RE2JSSyntaxException } from "re2js";

/**
 * The regular expressions of configuration rules (`rules[].match.regex`), as
 * validation checks them and as the gateway runs them: one function, so both
 * always agree on what a pattern means.
 *
 * A rule regex runs against every live request, so it must be cheap whatever
 * the request carries. JavaScript's RegExp backtracks (`(a+)+$` takes
 * exponential time on "aaaa…!"), so patterns run on RE2 (re2js), which matches
 * in time linear in the input. RE2 is linear in the input but proportional to
 * the size of the compiled program; that size is bounded too.
 *
 * The accepted language is the part of RE2 syntax that JavaScript reads the
 * same way (docs/gateway.md, "The document (format version 1)"): constructs
 * that RE2 cannot match in linear time (backreferences, lookaround) are
 * refused, and so are RE2-only constructs that JavaScript would read as
 * something else (`\A`, `\z`, `\Q…\E`, `\pL`, `\x{…}`, `[[:alpha:]]`, inline
 * flags...). Remaining differences: `\s` is `[\t\n\f\r ]` and case-insensitive
 * matching uses Unicode simple case folding, as in RE2.
 */

/** Longest pattern source accepted, in UTF-16 code units. */
export const maxRuleRegexLength = 1024;

/**
 * Largest RE2 program accepted. RE2's time per input character grows with the
 * program: up to about this size its lazy DFA keeps any input cheap (measured
 * with re2js: under 4 ms for a 16 KB header value chosen to defeat the DFA);
 * from about 130 instructions such input makes it fall back to simulating the
 * NFA, at 100 ms and more per 16 KB. Envoy's RE2 `max_program_size` defaults to
 * the same 100.
 */
export const maxRuleRegexProgramSize = 100;

export interface RuleRegexOptions {
  /** The rule's `ignore_case`. */
  ignoreCase: boolean;
}

/** A compiled rule regex. */
export interface RuleRegexMatcher {
  /** True when the pattern matches anywhere in `value` (as RegExp.prototype.test does). */
  test(value: string): boolean;
  /** Size of the compiled RE2 program (a measure of the cost per input character). */
  readonly programSize: number;
}

/** A matcher, or what is wrong with the pattern and what to write instead. */
export type CompiledRuleRegex = { ok: true; matcher: RuleRegexMatcher } | { ok: false; problem: string };

/**
 * Compiles a rule's regex. A refusal is a value, not a throw: `problem` says
 * what to change (validation places it at the regex's line and column).
 */
export function compileRuleRegex(source: string, options: RuleRegexOptions): CompiledRuleRegex {
  const problem = checkSource(source);
  if (problem) return { ok: false, problem };
  let compiled: RE2JS;
  try {
    compiled = RE2JS.compile(source, options.ignoreCase ? RE2JS.CASE_INSENSITIVE : 0);
  } catch (error) {
    // getDescription() names the problem without repeating the pattern.
    const reason = error instanceof RE2JSSyntaxException ? error.getDescription() : "it cannot be compiled";
    return { ok: false, problem: `is not a valid RE2 regular expression: ${reason}` };
  }
  try {
    new RegExp(source, options.ignoreCase ? "i" : "");
  } catch (error) {
    const reason = error instanceof Error ? error.message.replace(/^Invalid regular expression: \/.*\/[a-z]*: /s, "") : "invalid";
    return { ok: false, problem: `is not a valid JavaScript regular expression: ${reason}` };
  }
  const programSize = compiled.programSize();
  if (programSize > maxRuleRegexProgramSize) return { ok: false, problem: tooCostly(`${programSize}`) };
  return { ok: true, matcher: { test: (value) => compiled.test(value), programSize } };
}

function tooCostly(size: string): string {
  return (
    `is too costly to run on every request: it compiles to ${size} RE2 instructions, at most ${maxRuleRegexProgramSize} are allowed ` +
    "(a counted repetition such as {50} copies what it repeats); shorten it, or split an alternation a|b into several rules"
  );
}

const flagGroup = /^\(\?[A-Za-z-]+[:)]/;

/**
 * Refuses, before compiling, what RE2 cannot run in linear time, what RE2 and
 * JavaScript would read differently, and patterns whose program would be far
 * over the limit (so that no large program is ever built).
 */
function checkSource(source: string): string | undefined {
  if (source.length === 0) return 'is empty: give a pattern (e.g. "bot")';
  if (source.length > maxRuleRegexLength) return `is longer than ${maxRuleRegexLength} characters`;
  if (/^\/.+\/[dgimsuyv]*$/s.test(source)) {
    return 'write the pattern without /delimiters/ and flags (e.g. "bot", not "/bot/i"); use ignore_case: true for case-insensitive matching, and \\/ for a literal slash at either end';
  }
  // Estimated program size: frames of (size so far, size of the last atom) per group.
  const frames: { total: number; last: number }[] = [{ total: 0, last: 0 }];
  let top = frames[0] as { total: number; last: number };
  const atom = (size: number) => {
    top.total += size;
    top.last = size;
  };
  let inClass = false;
  for (let i = 0; i < source.length; i++) {
    const c = source[i] as string;
    if (c === "\\") {
      const e = source[i + 1] ?? "";
      const problem = checkEscape(e, source[i + 2], inClass);
      if (problem) return problem;
      i++;
      if (!inClass) atom(1);
      continue;
    }
    if (inClass) {
      if (c === "]") {
        inClass = false;
        atom(1);
      } else if (c === "[" && source[i + 1] === ":") {
        return "POSIX classes such as [[:alpha:]] are RE2 only (JavaScript reads them otherwise): write the class out, e.g. [A-Za-z]";
      }
      continue;
    }
    switch (c) {
      case "[": {
        inClass = true;
        let j = i + 1;
        if (source[j] === "^") j++;
        if (source[j] === "]") {
          return 'a "]" right after "[" or "[^" means a literal "]" in RE2 but an empty class in JavaScript: escape it as \\]';
        }
        i = j - 1;
        break;
      }
      case "(": {
        const rest = source.slice(i, i + 4);
        if (rest.startsWith("(?=") || rest.startsWith("(?!")) {
          return "lookahead (?= and (?! cannot be matched in linear time: remove it (a rule matches when the pattern is found anywhere in the value)";
        }
        if (rest.startsWith("(?<=") || rest.startsWith("(?<!")) {
          return "lookbehind (?<= and (?<! cannot be matched in linear time: remove it";
        }
        if (rest.startsWith("(?P<")) return "write a named group as (?<name>...): (?P<name>...) is not JavaScript";
        if (flagGroup.test(source.slice(i, i + 40))) {
          return "inline flags such as (?i) are not JavaScript: remove them and set ignore_case: true";
        }
        frames.push({ total: 0, last: 0 });
        top = frames[frames.length - 1] as { total: number; last: number };
        break;
      }
      case ")": {
        if (frames.length > 1) {
          const inner = frames.pop() as { total: number; last: number };
          top = frames[frames.length - 1] as { total: number; last: number };
          atom(inner.total + 2);
        }
        break;
      }
      case "|":
        top.total += 1;
        top.last = 0;
        break;
      case "*":
      case "+":
      case "?":
        top.total += 1;
        break;
      case "{": {
        const counted = /^\{(\d{1,6})(,(\d{0,6}))?\}/.exec(source.slice(i, i + 16));
        if (!counted) {
          atom(1);
          break;
        }
        const min = Number(counted[1]);
        const max = counted[2] === undefined ? min : counted[3] === "" ? min + 1 : Number(counted[3]);
        const copies = Math.max(min, max, 1);
        top.total += top.last * (copies - 1) + 1;
        top.last *= copies;
        i += counted[0].length - 1;
        // Far over the limit: refused without building the program.
        if (top.total > maxRuleRegexProgramSize * 10) return tooCostly(`about ${top.total}`);
        break;
      }
      default:
        atom(1);
    }
  }
  return undefined;
}

/** Escapes that RE2 cannot run in linear time, or that RE2 and JavaScript read differently. */
function checkEscape(e: string, next: string | undefined, inClass: boolean): string | undefined {
  if (e >= "1" && e <= "9") {
    return "backreferences such as \\1 cannot be matched in linear time: remove them (for a character by its code, write \\xHH)";
  }
  if (e === "k") return "backreferences such as \\k<name> cannot be matched in linear time: remove them";
  if (e === "x" && next === "{") return "write \\xHH for a character up to U+00FF, or the character itself: \\x{…} is not JavaScript";
  if (e === "u") return "write the character itself, or \\xHH for one up to U+00FF: \\u escapes are not RE2";
  if (e === "b" && inClass) return "\\b inside a class is a backspace in JavaScript and an error in RE2: write \\x08";
  const rewritten: Record<string, string> = {
    A: "use ^ instead of \\A",
    z: "use $ instead of \\z",
    Q: "escape each special character with a backslash instead of \\Q…\\E",
    E: "escape each special character with a backslash instead of \\Q…\\E",
    C: "use . instead of \\C",
    p: "write the class out (e.g. [A-Za-z]) instead of \\p{…}",
    P: "write the class out (e.g. [^A-Za-z]) instead of \\P{…}",
    a: "write \\x07 instead of \\a",
  };
  const hint = rewritten[e];
  return hint ? `\\${e} means one thing in RE2 and another in JavaScript: ${hint}` : undefined;
}
