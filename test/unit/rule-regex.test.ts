import fc from "fast-check";
import { compileRuleRegex, maxRuleRegexProgramSize, type RuleRegexMatcher } from "../../src/domain/config/rule-regex.js";

/**
 * Rule regexes run on every request at the gateway: what compileRuleRegex
 * accepts runs in time linear in the input with a bounded program, and the
 * matcher it returns is what the gateway uses, so validation and matching
 * cannot disagree.
 */

function accepted(source: string, ignoreCase = false): RuleRegexMatcher {
  const compiled = compileRuleRegex(source, { ignoreCase });
  if (!compiled.ok) throw new Error(`${source} refused: ${compiled.problem}`);
  return compiled.matcher;
}

function refused(source: string, ignoreCase = false): string {
  const compiled = compileRuleRegex(source, { ignoreCase });
  if (compiled.ok) throw new Error(`${source} accepted`);
  return compiled.problem;
}

/** Median of three timings of `run`, in milliseconds. */
/** Milliseconds one run takes. */
function timed(run: () => void): number {
  const started = performance.now();
  run();
  return performance.now() - started;
}

describe("ordinary rule regexes", () => {
  test.each([
    ["bot", "Googlebot/2.1", true],
    ["bot", "Mozilla/5.0", false],
    ["^/api/v[0-9]+/", "/api/v12/plants", true],
    ["^/api/v[0-9]+/", "/v1/api/v1/", false],
    ["^curl/", "curl/8.4.0", true],
    ["\\d{3}", "ab123", true],
    ["it's", "it's", true],
    ["x: y", "x: y", true],
    ["a|b", "cab", true],
    ["^(?:GET|HEAD)$", "HEAD", true],
    ["^(?<major>[0-9]+)\\.", "12.4", true],
    ["\\bsqlmap\\b", "sqlmap/1.0", true],
    ["[\\x00-\\x1f]", "a\tb", true],
    ["\\/", "a/b", true],
  ])("%j tested on %j is %j, as JavaScript's RegExp says", (source, value, expected) => {
    expect(accepted(source).test(value)).toBe(expected);
    expect(new RegExp(source).test(value)).toBe(expected);
  });

  test("ignore_case matches in any case, and only then", () => {
    expect(accepted("bot", true).test("GoogleBOT")).toBe(true);
    expect(accepted("bot", false).test("GoogleBOT")).toBe(false);
    expect(accepted("^/Admin", true).test("/aDMIN/x")).toBe(true);
  });

  test("every regex the documents of the test suite use is accepted", () => {
    for (const source of ["bot", "^curl/", "a|b", "x: y", "[0-9]+ #", "\\d{3}", "it's", "bot-7", "a"]) {
      expect(accepted(source, true).programSize).toBeGreaterThan(0);
    }
  });

  test("the matcher agrees with JavaScript's RegExp on generated patterns and values", () => {
    const piece = fc.constantFrom("a", "b", "ab", "[ab]", "[^a]", "a*", "b+", "(?:a|b)", "a?", "^", "$", ".", "\\d", "[0-9]{2}", "(a|bb)");
    const value = fc.string({ unit: fc.constantFrom("a", "b", "A", "B", "1", "2", " ", "-"), maxLength: 12 });
    fc.assert(
      fc.property(fc.array(piece, { minLength: 1, maxLength: 5 }), value, fc.boolean(), (pieces, input, ignoreCase) => {
        const source = pieces.join("");
        const compiled = compileRuleRegex(source, { ignoreCase });
        if (!compiled.ok) return;
        expect(compiled.matcher.test(input)).toBe(new RegExp(source, ignoreCase ? "i" : "").test(input));
      }),
      { numRuns: 500 },
    );
  });
});

describe("patterns that backtrack exponentially in JavaScript run in linear time", () => {
  // RE2 has no backtracking: these are ordinary patterns for it, so they are accepted,
  // and the gateway's matcher answers them as fast on hostile input as on any other.
  test.each(["(a+)+$", "(a|aa)+$", "(a|a)*b", "((a*)*)*b", "(.*a){12}"])("%s is accepted and linear in the input", (source) => {
    const matcher = accepted(source);
    const hostile = (n: number) => `${"a".repeat(n)}!`;
    // Same answer as JavaScript (on an input short enough for backtracking to finish).
    expect(matcher.test(hostile(12))).toBe(new RegExp(source).test(hostile(12)));
    matcher.test(hostile(10_000));
    // Rounds interleave the two sizes so both meet the same machine; each size keeps its quickest
    // run, as other work on a busy machine only ever adds time.
    let small = Number.POSITIVE_INFINITY;
    let large = Number.POSITIVE_INFINITY;
    // Long enough that the larger input takes a measurable fraction of a millisecond.
    const smallInput = hostile(20_000);
    const largeInput = hostile(200_000);
    for (let round = 0; round < 9; round++) {
      small = Math.min(
        small,
        timed(() => matcher.test(smallInput)),
      );
      large = Math.min(
        large,
        timed(() => matcher.test(largeInput)),
      );
    }
    if (process.env.SHOW_TIMINGS) console.log(`${source}: quickest 20,000 ${small.toFixed(3)} ms, 200,000 ${large.toFixed(3)} ms`);
    // Linear: about 10 times as long. Backtracking would take longer than the age of the universe; a
    // quadratic matcher about 100 times as long. (The floor keeps a matcher that needs no time at all,
    // e.g. one that finds no "b" to end a match on, from dividing by a rounding error.)
    expect(large / Math.max(small, 0.01)).toBeLessThan(40);
  });
});

describe("refused patterns say what to change", () => {
  test.each([
    ["(a)\\1", /backreferences such as \\1 cannot be matched in linear time/],
    ["(?<x>a)\\k<x>", /backreferences such as \\k<name>/],
    ["(?=a)", /lookahead \(\?= and \(\?! cannot be matched in linear time/],
    ["a(?!b)", /lookahead/],
    ["(?<=a)b", /lookbehind/],
    ["(?<!a)b", /lookbehind/],
    ["(?i)bot", /inline flags such as \(\?i\) are not JavaScript: remove them and set ignore_case: true/],
    ["(?i:bot)", /inline flags/],
    ["(?P<n>x)", /\(\?<name>\.\.\.\)/],
    ["/bot/i", /without \/delimiters\/ and flags/],
    ["\\Abot\\z", /use \^ instead of \\A/],
    ["\\Q.\\E", /\\Q…\\E/],
    ["\\pL", /write the class out/],
    ["\\x{e9}", /\\x\{…\} is not JavaScript/],
    ["\\u00e9", /\\u escapes are not RE2/],
    ["[[:alpha:]]", /POSIX classes/],
    ["[]a]", /escape it as \\\]/],
    ["[\\b]", /write \\x08/],
    ["(", /not a valid RE2 regular expression: missing closing \)/],
    ["a{2,1}", /not a valid RE2 regular expression/],
    ["a{1001}", /too costly/],
    ["[^]", /escape it as \\\]/],
    ["", /is empty/],
  ])("%j", (source, problem) => {
    expect(refused(source)).toMatch(problem);
    expect(refused(source, true)).toMatch(problem);
  });

  test("a pattern is at most 1024 characters", () => {
    expect(refused("x".repeat(1025))).toMatch(/longer than 1024 characters/);
    expect(accepted("x".repeat(90)).programSize).toBeLessThanOrEqual(maxRuleRegexProgramSize);
  });

  test("a refusal never repeats the pattern", () => {
    const secretish = "(unclosed-group-with-a-distinctive-name";
    expect(refused(secretish)).not.toContain("distinctive");
  });

  test(`programs larger than ${maxRuleRegexProgramSize} instructions are refused, before or after compiling`, () => {
    // A small source can stand for a large program: each counted repetition copies what it repeats.
    expect(refused("a[ab]{200}[!-]")).toMatch(/too costly to run on every request: it compiles to 204 RE2 instructions, at most 100/);
    expect(refused(".{1000}".repeat(140))).toMatch(/too costly.*about \d+ RE2 instructions/);
    expect(refused("(?:x|y|.{1000})".repeat(40))).toMatch(/too costly/);
    expect(refused("[a-z]{60}[0-9]{60}")).toMatch(/split an alternation a\|b into several rules/);
    expect(accepted("a[ab]{90}[!-]").programSize).toBeLessThanOrEqual(maxRuleRegexProgramSize);
    expect(accepted("^Mozilla/5\\.0 \\(compatible; Googlebot/2\\.1; \\+http://www\\.google\\.com/bot\\.html\\)$").programSize).toBe(76);
  });

  test("whatever the source, nothing accepted compiles to more than the limit", () => {
    const piece = fc.constantFrom("a", ".", "[ab]", "(", ")", "|", "*", "+", "?", "{3}", "{2,9}", "{40}", "{99,}", "\\d", "(?:");
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), fc.boolean(), (pieces, ignoreCase) => {
        const compiled = compileRuleRegex(pieces.join(""), { ignoreCase });
        if (compiled.ok) expect(compiled.matcher.programSize).toBeLessThanOrEqual(maxRuleRegexProgramSize);
      }),
      { numRuns: 500 },
    );
  });
});
