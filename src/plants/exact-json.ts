import { isLosslessNumber, parse } from "lossless-json";

/**
 * JSON bodies whose numbers keep their source digits.
 *
 * `JSON.parse` turns 9223372036854775807 into 9223372036854776000, so an
 * int64 field cannot go through it. lossless-json keeps every number as its
 * literal text; `exactInteger` reads that text as a mathematical value, and
 * `validationView` gives the JSON Schema validator plain JS numbers chosen so
 * that its verdicts are the verdicts on the exact values (see below).
 */

/** A parsed body: numbers stay literals until asked for. */
export type ExactJson = unknown;

/** Parses JSON text; throws SyntaxError (or RangeError for absurd nesting) on invalid input. */
export function parseExactJson(text: string): ExactJson {
  // lossless-json also refuses an object that repeats a key with another
  // value, where JSON.parse would silently keep the last one.
  return parse(text);
}

/** The literal text of a number in a parsed body, or undefined for any other value. */
export function numberLiteral(value: unknown): string | undefined {
  return isLosslessNumber(value) ? value.value : undefined;
}

const numberGrammar = /^(-?)(0|[1-9]\d*)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;
/** Integers with more digits than this are only "huge": int64 has 19. */
const maxExactDigits = 40n;

export type NumberValue = { integral: true; value: bigint } | { integral: true; huge: 1 | -1 } | { integral: false; sign: 1 | -1 };

/**
 * The mathematical value of a JSON number literal. JSON Schema (2020-12,
 * validation 6.1.1) counts any number with a zero fractional part as an
 * integer, so `1.0` and `1e3` are the integers 1 and 1000 while `1.5` and
 * `1e-3` are not. Integers past 40 digits are reported as huge, not expanded,
 * so `1e999999999` costs nothing.
 */
export function numberValue(literal: string): NumberValue {
  const match = numberGrammar.exec(literal);
  if (!match) throw new SyntaxError(`not a JSON number: ${literal.slice(0, 40)}`);
  const negative = match[1] === "-";
  const fraction = match[3] ?? "";
  const significant = `${match[2]}${fraction}`.replace(/^0+/, "");
  if (significant === "") return { integral: true, value: 0n };
  const digits = significant.replace(/0+$/, "");
  const scale = BigInt(match[4] ?? "0") - BigInt(fraction.length) + BigInt(significant.length - digits.length);
  const sign = negative ? -1 : 1;
  if (scale < 0n) return { integral: false, sign };
  if (BigInt(digits.length) + scale > maxExactDigits) return { integral: true, huge: sign };
  const magnitude = BigInt(digits) * 10n ** scale;
  return { integral: true, value: negative ? -magnitude : magnitude };
}

/** The exact integer a literal stands for, or undefined when it is not an integer (or is huge). */
export function exactInteger(literal: string): bigint | undefined {
  const value = numberValue(literal);
  return value.integral && "value" in value ? value.value : undefined;
}

const twoTo63 = 2 ** 63;
/** The largest double below 2^63 and the largest double below -2^63 (ULP 1024 and 2048 there). */
const belowTwoTo63 = twoTo63 - 1024;
const belowMinusTwoTo63 = -twoTo63 - 2048;
/** A double with a fractional part, for fractions too large to keep one as a double. */
const largeFraction = 2 ** 52 - 0.5;
const minInt64 = -(2n ** 63n);
const maxInt64 = 2n ** 63n - 1n;
const maxSafe = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * The double the validator sees for a literal. Doubles cannot tell
 * 9223372036854775807 from 9223372036854775808, so the stand-in keeps what
 * the schema's keywords ask about instead of the nearest double:
 *
 * - integral or not (`type: integer`): a fraction such as
 *   9007199254740993.5, whose nearest double is a whole number, becomes a
 *   double with a fractional part, and 1e-400 becomes ±Number.MIN_VALUE;
 * - the sign and the order against small bounds (`minimum: 1`): safe
 *   integers are exact, everything keeps its sign;
 * - inside or outside int64 (`format: int64`): an in-range integer maps below
 *   2^63 (and at or above -2^63), an out-of-range one at or beyond it, so the
 *   int64 format check on the double gives the exact answer.
 *
 * A `maximum` near 2^63 in the document would still compare doubles, which is
 * why the document bounds int64 with its format, not with a maximum.
 */
export function comparableNumber(literal: string): number {
  const value = numberValue(literal);
  if (!value.integral) {
    const nearest = Number(literal);
    if (Number.isFinite(nearest) && !Number.isInteger(nearest)) return nearest;
    return value.sign * (Math.abs(nearest) < 1 ? Number.MIN_VALUE : largeFraction);
  }
  if ("huge" in value) return value.huge * Number.MAX_VALUE;
  const exact = value.value;
  if (exact >= -maxSafe && exact <= maxSafe) return Number(exact);
  if (exact > 0n) return exact <= maxInt64 ? Math.min(Number(exact), belowTwoTo63) : Math.max(Number(exact), twoTo63);
  return exact >= minInt64 ? Math.max(Number(exact), -twoTo63) : Math.min(Number(exact), belowMinusTwoTo63);
}

/** True when a double stand-in (see comparableNumber) is an int64. */
export function isInt64(value: number): boolean {
  return Number.isInteger(value) && value >= -twoTo63 && value < twoTo63;
}

/** True when a double stand-in is an int32. */
export function isInt32(value: number): boolean {
  return Number.isInteger(value) && value >= -(2 ** 31) && value <= 2 ** 31 - 1;
}

/** The parsed body with every number replaced by its comparable double, for the schema validator. */
export function validationView(value: ExactJson): unknown {
  const literal = numberLiteral(value);
  if (literal !== undefined) return comparableNumber(literal);
  if (Array.isArray(value)) return value.map(validationView);
  if (value !== null && typeof value === "object") {
    const view: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      // A "__proto__" key stays an ordinary own property, as JSON.parse keeps it.
      Object.defineProperty(view, key, { value: validationView(item), enumerable: true, writable: true, configurable: true });
    }
    return view;
  }
  return value;
}
