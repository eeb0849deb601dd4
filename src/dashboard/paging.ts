import { invalidArgument, type Violation } from "../domain/errors.js";

export const defaultPageSize = 20;
export const maxPageSize = 100;

/** A page to read: rows to skip and to take (one more than the page, to learn whether another follows). */
export interface PageRequest {
  skip: number;
  size: number;
}

/**
 * Reads page_size and page_token. Dashboard lists are short-lived views of
 * small sets, so a token is an opaque offset; every violation is listed.
 */
export function readPage(input: { pageSize: number; pageToken: string }): PageRequest {
  const violations: Violation[] = [];
  if (!Number.isInteger(input.pageSize) || input.pageSize < 0 || input.pageSize > maxPageSize) {
    violations.push({
      field: "page_size",
      description: `must be from 1 to ${maxPageSize} (0 or absent: ${defaultPageSize}), got ${input.pageSize}`,
    });
  }
  let skip = 0;
  if (input.pageToken !== "") {
    const match = /^o([1-9][0-9]{0,8})$/.exec(Buffer.from(input.pageToken, "base64url").toString("latin1"));
    if (!match) violations.push({ field: "page_token", description: "is not a token from a previous answer's next_page_token" });
    else skip = Number(match[1]);
  }
  if (violations.length > 0) throw invalidArgument(violations);
  return { skip, size: input.pageSize === 0 ? defaultPageSize : input.pageSize };
}

/** Cuts the rows read with take = size + 1 into the page and the next token ("" on the last page). */
export function pageOf<T>(rows: readonly T[], page: PageRequest): { items: T[]; nextPageToken: string } {
  const items = rows.slice(0, page.size);
  const more = rows.length > page.size;
  return { items, nextPageToken: more ? Buffer.from(`o${page.skip + page.size}`, "latin1").toString("base64url") : "" };
}

/** The page of an in-memory list. */
export function slicePage<T>(all: readonly T[], page: PageRequest): { items: T[]; nextPageToken: string } {
  return pageOf(all.slice(page.skip, page.skip + page.size + 1), page);
}
