import { invalidArgument, type Violation } from "../../domain/errors.js";
import type { KeysetPage, TimeAndId } from "./dashboard-store.js";

export const defaultPageSize = 20;
export const maxPageSize = 100;

/**
 * How one list writes its position into a page token and reads it back. A
 * token holds the sort key of the last row shown (keyset paging), so the
 * database reads only the next page, and rows added or removed meanwhile
 * neither repeat nor skip the rows after it.
 */
export interface CursorShape<C> {
  /** Names the list: a token of another list is refused. */
  list: string;
  encode(cursor: C): (string | number)[];
  /** The cursor of a token's values, or null when they cannot be one. */
  decode(values: unknown[]): C | null;
}

/** A page to read: its size and where the previous one ended (null: the first page). */
export interface PageRequest<C> {
  size: number;
  after: C | null;
}

const maxTokenLength = 2048;
const base64url = /^[A-Za-z0-9_-]+$/;

/** A sort key that is a string (an e-mail address, a secret name, an identifier). */
export function stringCursor(list: string): CursorShape<string> {
  return {
    list,
    encode: (value) => [value],
    decode: (values) => (values.length === 1 && typeof values[0] === "string" && values[0] !== "" ? values[0] : null),
  };
}

/** A sort key of a time and an id (rows ordered by creation time, ties by id). */
export function timeAndIdCursor(list: string): CursorShape<TimeAndId> {
  return {
    list,
    encode: (value) => [value.at.getTime(), value.id],
    decode(values) {
      const [at, id] = values;
      if (values.length !== 2 || typeof at !== "number" || !Number.isSafeInteger(at) || typeof id !== "string" || id === "") return null;
      const date = new Date(at);
      return Number.isNaN(date.getTime()) ? null : { at: date, id };
    },
  };
}

function decodeToken<C>(token: string, shape: CursorShape<C>): C | null {
  if (token.length > maxTokenLength || !base64url.test(token)) return null;
  let values: unknown;
  try {
    values = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
  } catch {
    return null;
  }
  if (!Array.isArray(values) || values[0] !== shape.list) return null;
  return shape.decode(values.slice(1));
}

/** Reads page_size and page_token; a malformed token or size is invalid_argument (400), every violation listed. */
export function readPage<C>(input: { pageSize: number; pageToken: string }, shape: CursorShape<C>): PageRequest<C> {
  const violations: Violation[] = [];
  if (!Number.isInteger(input.pageSize) || input.pageSize < 0 || input.pageSize > maxPageSize) {
    violations.push({
      field: "page_size",
      description: `must be from 1 to ${maxPageSize} (0 or absent: ${defaultPageSize}), got ${input.pageSize}`,
    });
  }
  let after: C | null = null;
  if (input.pageToken !== "") {
    after = decodeToken(input.pageToken, shape);
    if (after === null) {
      violations.push({ field: "page_token", description: "is not a token from a previous answer's next_page_token of this list" });
    }
  }
  if (violations.length > 0)
    throw invalidArgument(violations, violations.some((v) => v.field === "page_token") ? "page_token_malformed" : "invalid_argument");
  return { size: input.pageSize === 0 ? defaultPageSize : input.pageSize, after };
}

/** What the store reads for a page: one row more than the page, to learn whether another follows. */
export function keysetOf<C>(page: PageRequest<C>): KeysetPage<C> {
  return { after: page.after, take: page.size + 1 };
}

/** Cuts the rows read with keysetOf(page) into the page and the next token ("" on the last page). */
export function pageOf<T, C>(
  rows: readonly T[],
  page: PageRequest<C>,
  shape: CursorShape<C>,
  cursorOf: (row: T) => C,
): { items: T[]; nextPageToken: string } {
  const items = rows.slice(0, page.size);
  const last = items[items.length - 1];
  if (rows.length <= page.size || last === undefined) return { items, nextPageToken: "" };
  const token = Buffer.from(JSON.stringify([shape.list, ...shape.encode(cursorOf(last))]), "utf8").toString("base64url");
  return { items, nextPageToken: token };
}

/** The cursors of the dashboard's lists. */
export const cursors = {
  apiKeys: timeAndIdCursor("api_keys"),
  members: stringCursor("members"),
  invitations: stringCursor("invitations"),
  identities: stringCursor("identities"),
  identitySessions: timeAndIdCursor("identity_sessions"),
  secrets: stringCursor("secrets"),
} as const;
