import { ColumnTypeEnum, type ArgType, type SqlDriverAdapter, type SqlQuery } from "@prisma/driver-adapter-utils";

/** A value a statement may bind. */
export type SqlValue = string | number | bigint | boolean | Date | null;

/**
 * Plain SQL on the database's driver adapter, for the few statements on a hot
 * path (a password login makes three).
 *
 * Prisma's client runs even a raw query through its request pipeline (about
 * 100 µs of CPU per statement on these machines, several times what the
 * driver takes); these calls hand the statement to the same adapter the
 * client uses, and read its rows the way the client's raw queries do, so
 * callers see the same values (Date for date-times, boolean, bigint for
 * 64-bit integers, Buffer for bytes). Outside transactions only: on SQLite the
 * adapter keeps such statements out of an open transaction
 * (sqlite-adapter.ts); on PostgreSQL each runs on a pooled connection.
 *
 * Written as tagged templates like `$queryRaw`: values become bound
 * parameters, never SQL text.
 */
export interface Sql {
  /** Rows as objects keyed by column name; T is the array of rows, as for `$queryRaw<T>`. */
  query<T extends object[] = Record<string, unknown>[]>(strings: TemplateStringsArray, ...values: SqlValue[]): Promise<T>;
  /** The number of rows changed. */
  execute(strings: TemplateStringsArray, ...values: SqlValue[]): Promise<number>;
}

const scalar = (scalarType: ArgType["scalarType"]): ArgType => ({ scalarType, arity: "scalar" });
const argTypes = {
  string: scalar("string"),
  int: scalar("int"),
  float: scalar("float"),
  bigint: scalar("bigint"),
  boolean: scalar("boolean"),
  datetime: scalar("datetime"),
  unknown: scalar("unknown"),
};

function argTypeOf(value: SqlValue): ArgType {
  if (value === null) return argTypes.unknown;
  if (value instanceof Date) return argTypes.datetime;
  switch (typeof value) {
    case "string":
      return argTypes.string;
    case "number":
      return Number.isInteger(value) ? argTypes.int : argTypes.float;
    case "bigint":
      return argTypes.bigint;
    default:
      return argTypes.boolean;
  }
}

/** A driver's value as the client's raw queries give it. */
function readValue(value: unknown, type: number): unknown {
  if (value === null || value === undefined) return null;
  switch (type) {
    case ColumnTypeEnum.Int32:
    case ColumnTypeEnum.Float:
    case ColumnTypeEnum.Double:
      return Number(value);
    case ColumnTypeEnum.Int64:
      return typeof value === "bigint" ? value : BigInt(value as string | number);
    case ColumnTypeEnum.Boolean:
      return typeof value === "boolean" ? value : Number(value) !== 0;
    case ColumnTypeEnum.Date:
    case ColumnTypeEnum.DateTime:
      return value instanceof Date ? value : new Date(value as string | number);
    case ColumnTypeEnum.Bytes:
      return Buffer.isBuffer(value) ? value : Buffer.from(value as Uint8Array);
    default:
      return value;
  }
}

/**
 * Plain SQL on the adapter `adapterOf()` returns (the client connects it; ask
 * each time, so a reconnected client is followed).
 */
export function createSql(provider: "sqlite" | "postgresql", adapterOf: () => SqlDriverAdapter): Sql {
  const placeholder = provider === "sqlite" ? () => "?" : (n: number) => `$${n}`;
  // Templates are the same object on every call from one site: their SQL text is built once.
  const texts = new WeakMap<TemplateStringsArray, string>();

  function statement(strings: TemplateStringsArray, values: SqlValue[]): SqlQuery {
    let sql = texts.get(strings);
    if (sql === undefined) {
      sql = strings.reduce((text, part, i) => (i === 0 ? part : `${text}${placeholder(i)}${part}`), "");
      texts.set(strings, sql);
    }
    return { sql, args: values, argTypes: values.map(argTypeOf) };
  }

  return {
    async query<T extends object[]>(strings: TemplateStringsArray, ...values: SqlValue[]): Promise<T> {
      const { columnNames, columnTypes, rows } = await adapterOf().queryRaw(statement(strings, values));
      return rows.map((row) => {
        const record: Record<string, unknown> = {};
        for (let i = 0; i < columnNames.length; i++) record[columnNames[i] as string] = readValue(row[i], columnTypes[i] as number);
        return record;
      }) as T;
    },
    execute: (strings: TemplateStringsArray, ...values: SqlValue[]) => adapterOf().executeRaw(statement(strings, values)),
  };
}
