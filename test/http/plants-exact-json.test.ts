import fc from "fast-check";
import { comparableNumber, exactInteger, isInt64, numberValue, parseExactJson, validationView } from "../../src/plants/exact-json.js";

/**
 * The int64 arithmetic under the sample API's validation (no server needed):
 * the doubles the schema validator sees give the verdicts the exact values
 * would, for the keywords the document uses (type integer, minimum 1, int64).
 */
const minInt64 = -(2n ** 63n);
const maxInt64 = 2n ** 63n - 1n;

/** Integers clustered around the places doubles get wrong: ±2^53, ±2^63, 0 and 1. */
const interestingInteger = fc.oneof(
  fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }),
  ...[0n, 1n, 2n ** 53n, -(2n ** 53n), 2n ** 63n, -(2n ** 63n)].map((centre) =>
    fc.bigInt({ min: -5000n, max: 5000n }).map((offset) => centre + offset),
  ),
);

/** Other spellings of the same integer: a zero fraction or an exponent. */
function spellings(value: bigint): string[] {
  const text = value.toString();
  const sign = text.startsWith("-") ? "-" : "";
  const digits = text.replace("-", "");
  const all = [text, `${text}.0`, `${text}.000e0`, `${sign}${digits[0]}.${digits.slice(1) || "0"}e${digits.length - 1}`];
  return value === 0n ? all : [...all, `${text}0e-1`];
}

describe("exactInteger", () => {
  test("reads every spelling of an integer as that integer, digit for digit", () => {
    fc.assert(
      fc.property(interestingInteger, (value) => {
        for (const literal of spellings(value)) expect(exactInteger(literal)).toBe(value);
      }),
    );
  });

  test("fractions are not integers, however close to one", () => {
    for (const literal of ["1.5", "0.1", "9007199254740993.5", "9223372036854775807.1", "1e-400", "-0.5", "12345e-1"]) {
      expect(numberValue(literal).integral).toBe(false);
      expect(Number.isInteger(comparableNumber(literal))).toBe(false);
    }
  });

  test("absurd exponents cost nothing and are out of range", () => {
    expect(numberValue("1e999999999999")).toEqual({ integral: true, huge: 1 });
    expect(numberValue("-1e999999999999")).toEqual({ integral: true, huge: -1 });
    expect(isInt64(comparableNumber("1e999999999999"))).toBe(false);
    expect(numberValue("0e999999999999")).toEqual({ integral: true, value: 0n });
  });
});

describe("comparableNumber", () => {
  test("is an int64 exactly when the value is, and at least 1 exactly when the value is", () => {
    fc.assert(
      fc.property(interestingInteger, (value) => {
        for (const literal of spellings(value)) {
          const double = comparableNumber(literal);
          expect(Number.isInteger(double)).toBe(true);
          expect(isInt64(double)).toBe(value >= minInt64 && value <= maxInt64);
          expect(double >= 1).toBe(value >= 1n);
        }
      }),
    );
  });

  test("the boundaries", () => {
    expect(isInt64(comparableNumber("9223372036854775807"))).toBe(true);
    expect(isInt64(comparableNumber("9223372036854775808"))).toBe(false);
    expect(isInt64(comparableNumber("-9223372036854775808"))).toBe(true);
    expect(isInt64(comparableNumber("-9223372036854775809"))).toBe(false);
    // Past 2^53 the stand-in is only as exact as the verdicts need; the stored id comes from the literal.
    expect(comparableNumber("9007199254740993")).toBe(2 ** 53);
    expect(exactInteger("9007199254740993")).toBe(9007199254740993n);
  });
});

describe("parseExactJson and validationView", () => {
  test("keep the literal of each number and give the validator doubles", () => {
    const parsed = parseExactJson(`{"id": 9223372036854775807, "n": [1.5, -2]}`);
    expect(validationView(parsed)).toEqual({ id: 2 ** 63 - 1024, n: [1.5, -2] });
  });

  test("a __proto__ key stays an ordinary property, as JSON.parse keeps it", () => {
    const view = validationView(parseExactJson(`{"__proto__": {"polluted": 1}, "id": 1}`)) as Record<string, unknown>;
    expect(Object.getPrototypeOf(view)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.keys(view)).toEqual(["__proto__", "id"]);
  });

  test("a key repeated with another value is refused; repeated with the same value it is harmless", () => {
    expect(() => parseExactJson(`{"id": 1, "id": 2}`)).toThrow(SyntaxError);
    expect(validationView(parseExactJson(`{"id": 1, "id": 1}`))).toEqual({ id: 1 });
  });
});
