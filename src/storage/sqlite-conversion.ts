import {
  type ArgType,
  type ColumnType,
  ColumnTypeEnum,
  DriverAdapterError,
  type Error as DriverError,
  type SqlQuery,
} from "@prisma/driver-adapter-utils";

// How values cross between Prisma's query engine and better-sqlite3, as
// @prisma/adapter-better-sqlite3 (Apache-2.0) converts them: the same bound
// forms (booleans as 0/1, date-times as ISO 8601 text with "+00:00"), the same
// column types from the declared types, the same error kinds. Rows written
// through that adapter read back the same through ours, and the other way round.

/** A declared column type as the engine's column type; null when it says nothing (an expression). */
function declaredColumnType(declared: string | null): ColumnType | null {
  if (declared === null) return null;
  switch (declared.toUpperCase()) {
    case "":
      return null;
    case "DECIMAL":
      return ColumnTypeEnum.Numeric;
    case "FLOAT":
      return ColumnTypeEnum.Float;
    case "DOUBLE":
    case "DOUBLE PRECISION":
    case "NUMERIC":
    case "REAL":
      return ColumnTypeEnum.Double;
    case "TINYINT":
    case "SMALLINT":
    case "MEDIUMINT":
    case "INT":
    case "INTEGER":
    case "SERIAL":
    case "INT2":
      return ColumnTypeEnum.Int32;
    case "BIGINT":
    case "UNSIGNED BIG INT":
    case "INT8":
      return ColumnTypeEnum.Int64;
    case "DATETIME":
    case "TIMESTAMP":
      return ColumnTypeEnum.DateTime;
    case "TIME":
      return ColumnTypeEnum.Time;
    case "DATE":
      return ColumnTypeEnum.Date;
    case "TEXT":
    case "CLOB":
    case "CHARACTER":
    case "VARCHAR":
    case "VARYING CHARACTER":
    case "NCHAR":
    case "NATIVE CHARACTER":
    case "NVARCHAR":
      return ColumnTypeEnum.Text;
    case "BLOB":
      return ColumnTypeEnum.Bytes;
    case "BOOLEAN":
      return ColumnTypeEnum.Boolean;
    case "JSONB":
      return ColumnTypeEnum.Json;
    default:
      return null;
  }
}

/** The type of a value of a column that declares none (an expression, a derived table's column). */
function inferredColumnType(value: unknown): ColumnType {
  switch (typeof value) {
    case "string":
      return ColumnTypeEnum.Text;
    case "bigint":
      return ColumnTypeEnum.Int64;
    case "boolean":
      return ColumnTypeEnum.Boolean;
    case "number":
      return ColumnTypeEnum.UnknownNumber;
    default:
      // better-sqlite3 gives blobs as Buffer (the stock adapter expects an ArrayBuffer and throws on a Buffer).
      if (value instanceof ArrayBuffer || ArrayBuffer.isView(value)) return ColumnTypeEnum.Bytes;
      throw new TypeError(`unexpected value of type ${typeof value} in a result column`);
  }
}

/** Column types from the declared types, a column without one typed by its first non-null value (Int32 when all are null). */
export function columnTypesOf(declared: readonly (string | null)[], rows: readonly unknown[][]): ColumnType[] {
  return declared.map((type, column) => {
    const mapped = declaredColumnType(type);
    if (mapped !== null) return mapped;
    for (const row of rows) {
      const value = row[column];
      if (value !== null && value !== undefined) return inferredColumnType(value);
    }
    return ColumnTypeEnum.Int32;
  });
}

/** A row as the engine reads it: integers are numbers when exact (else decimal text), date-times stored as numbers become ISO text. */
export function engineRow(row: unknown[], columnTypes: readonly ColumnType[]): unknown[] {
  const result: unknown[] = new Array(row.length);
  for (let i = 0; i < row.length; i++) {
    const value = row[i];
    const type = columnTypes[i];
    if (typeof value === "number" && (type === ColumnTypeEnum.Int32 || type === ColumnTypeEnum.Int64) && !Number.isInteger(value)) {
      result[i] = Math.trunc(value);
    } else if ((typeof value === "number" || typeof value === "bigint") && type === ColumnTypeEnum.DateTime) {
      result[i] = new Date(Number(value)).toISOString();
    } else if (typeof value === "bigint") {
      const asNumber = Number(value);
      result[i] = Number.isSafeInteger(asNumber) ? asNumber : value.toString();
    } else {
      result[i] = value;
    }
  }
  return result;
}

const unknownArg: ArgType = { scalarType: "unknown", arity: "scalar" };

/** One bound argument as better-sqlite3 takes it. */
function driverArg(arg: unknown, argType: ArgType): unknown {
  if (arg === null) return null;
  if (typeof arg === "string") {
    switch (argType.scalarType) {
      case "int":
        return Number.parseInt(arg, 10);
      case "float":
      case "decimal":
        return Number.parseFloat(arg);
      case "bigint":
        return BigInt(arg);
      case "datetime":
        return sqliteTimestamp(new Date(arg));
      case "bytes":
        return Buffer.from(arg, "base64");
      default:
        return arg;
    }
  }
  if (typeof arg === "boolean") return arg ? 1 : 0;
  if (arg instanceof Date) return sqliteTimestamp(arg);
  return arg;
}

/** A date-time as Prisma stores it on SQLite: ISO 8601 with an explicit "+00:00". */
function sqliteTimestamp(at: Date): string {
  return at.toISOString().replace("Z", "+00:00");
}

/** The query's arguments as better-sqlite3 binds them. */
export function driverArgs(query: SqlQuery): unknown[] {
  const { args, argTypes } = query;
  const out = new Array<unknown>(args.length);
  for (let i = 0; i < args.length; i++) out[i] = driverArg(args[i], argTypes[i] ?? unknownArg);
  return out;
}

const SQLITE_BUSY = 5;
const unknownCodePrefix = "UNKNOWN_SQLITE_ERROR_";

/** The field names of "UNIQUE constraint failed: Table.a, Table.b". */
function constraintFields(message: string): string[] | undefined {
  return message
    .split("constraint failed: ")
    .at(1)
    ?.split(", ")
    .map((field) => field.split(".").pop() ?? field);
}

function mappedError(code: string, message: string): DriverError {
  switch (code) {
    case "SQLITE_CONSTRAINT_UNIQUE":
    case "SQLITE_CONSTRAINT_PRIMARYKEY": {
      const columns = message.split("constraint failed: ").at(1)?.split(", ");
      const fields = constraintFields(message);
      const table = columns?.at(0)?.split(".").slice(0, -1).join(".") || undefined;
      return { kind: "UniqueConstraintViolation", constraint: fields ? { fields } : undefined, table };
    }
    case "SQLITE_CONSTRAINT_NOTNULL": {
      const fields = constraintFields(message);
      return { kind: "NullConstraintViolation", constraint: fields ? { fields } : undefined };
    }
    case "SQLITE_CONSTRAINT_FOREIGNKEY":
    case "SQLITE_CONSTRAINT_TRIGGER":
      return { kind: "ForeignKeyConstraintViolation", constraint: { foreignKey: {} } };
  }
  const extended = code.startsWith(unknownCodePrefix) ? Number(code.slice(unknownCodePrefix.length)) : undefined;
  const extendedCode = extended !== undefined && Number.isInteger(extended) ? extended : undefined;
  // SQLITE_BUSY and its extended codes (the primary code is the low byte): another connection holds the lock.
  if (code.startsWith("SQLITE_BUSY") || (extendedCode !== undefined && (extendedCode & 0xff) === SQLITE_BUSY)) {
    return { kind: "SocketTimeout" };
  }
  if (message.startsWith("no such table")) return { kind: "TableDoesNotExist", table: message.split(": ").at(1) };
  if (message.startsWith("no such column")) return { kind: "ColumnNotFound", column: message.split(": ").at(1) };
  if (message.includes("has no column named ")) return { kind: "ColumnNotFound", column: message.split("has no column named ").at(1) };
  return { kind: "sqlite", extendedCode: extendedCode ?? 1, message };
}

/**
 * A driver error as the engine understands it (a DriverAdapterError carrying
 * the mapped kind and the driver's code and message); anything that is not a
 * SQLite error is rethrown as it is.
 */
export function toDriverAdapterError(error: unknown): never {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (typeof code !== "string" || typeof message !== "string") throw error;
  throw new DriverAdapterError({ originalCode: code, originalMessage: message, ...mappedError(code, message) });
}
